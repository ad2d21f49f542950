package wasm

import (
	"context"
	"sync"
	"time"

	"github.com/plantgate/plantgate/sdk/abi"
)

// leaseShare is the part of what is left of a window's budget one lease
// takes (at least 1): a gateway holds at most 1/leaseShare of the budget it
// has not spent, so little is lost when a window ends with leases unspent,
// and a budget that is never reached costs about one store round trip per
// window and gateway.
const leaseShare = 16

// maxLeases is the number of keys above which a new key first drops the
// keys whose window has ended.
const maxLeases = 4096

// leases holds a plugin's kv_take budgets on this gateway, shared by all its
// instances: one lease per key.
type leases struct {
	mu sync.Mutex
	m  map[string]*lease
}

// lease is one key's budget in its current window.
type lease struct {
	mu     sync.Mutex
	window int64 // the window number the rest is about
	sizeMs int64
	left   int64 // units leased from the store and not spent yet
	taken  int64 // the fleet's count after this gateway's last lease
	spent  bool  // the store granted nothing: deny until the window ends
	oldest int64 // sliding: the oldest slot holding a counted unit
}

// take spends one unit of key's budget, leasing from the store when the
// local lease is spent. It returns an abi.Take.
func (ls *leases) take(ctx context.Context, p *Plugin, key []byte, limit int64, size time.Duration) (abi.Take, error) {
	now := p.clock().UnixMilli()
	sizeMs := size.Milliseconds()
	w := now / sizeMs
	reset := (w+1)*sizeMs - now
	l := ls.get(key, now)
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.window != w || l.sizeMs != sizeMs {
		l.window, l.sizeMs, l.left, l.taken, l.spent = w, sizeMs, 0, 0, false
	}
	if l.left == 0 && !l.spent {
		lctx, cancel := lookupContext(ctx)
		granted, taken, err := p.kv.KVLease(lctx, p.info.Name, string(key), limit, leaseShare, w, size)
		cancel()
		if err != nil {
			return 0, err
		}
		l.left, l.taken, l.spent = granted, taken, granted == 0
	}
	if l.spent {
		return abi.PackTake(true, 0, reset), nil
	}
	l.left--
	return abi.PackTake(false, l.left+max(limit-l.taken, 0), reset), nil
}

// takeSliding is take over a sliding window (abi.ImportKVTakeSliding): a
// lease is for one slot of the window, granted into that slot in the
// store and spent only while the slot lasts, so every unit counts in the
// store from the slot it is spent in. ls must hold sliding leases only.
func (ls *leases) takeSliding(ctx context.Context, p *Plugin, key []byte, limit int64, size time.Duration) (abi.Take, error) {
	now := p.clock().UnixMilli()
	slotMs, slots := abi.SlidingSlot(size.Milliseconds())
	s := now / slotMs
	l := ls.get(key, now)
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.window != s || l.sizeMs != slotMs {
		l.window, l.sizeMs, l.left, l.taken, l.spent, l.oldest = s, slotMs, 0, 0, false, s
	}
	if l.left == 0 && !l.spent {
		lctx, cancel := lookupContext(ctx)
		granted, taken, oldest, err := p.kv.KVLeaseSliding(lctx, p.info.Name, string(key), limit, leaseShare, s, slots, time.Duration(slotMs)*time.Millisecond)
		cancel()
		if err != nil {
			return 0, err
		}
		l.left, l.taken, l.spent, l.oldest = granted, taken, granted == 0, min(oldest, s)
	}
	// The oldest counted unit frees when its slot leaves the window.
	reset := (l.oldest+1+slots)*slotMs - now
	if l.spent {
		return abi.PackTake(true, 0, reset), nil
	}
	l.left--
	return abi.PackTake(false, l.left+max(limit-l.taken, 0), reset), nil
}

// get returns key's lease, made when new.
func (ls *leases) get(key []byte, now int64) *lease {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	if l := ls.m[string(key)]; l != nil {
		return l
	}
	if ls.m == nil {
		ls.m = make(map[string]*lease)
	}
	if len(ls.m) >= maxLeases {
		for k, l := range ls.m {
			if l.mu.TryLock() {
				if l.sizeMs == 0 || (l.window+1)*l.sizeMs <= now {
					delete(ls.m, k)
				}
				l.mu.Unlock()
			}
		}
	}
	l := &lease{}
	ls.m[string(key)] = l
	return l
}
