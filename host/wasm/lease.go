package wasm

import (
	"context"
	"sync"
	"time"

	"github.com/hashicorp/golang-lru/v2/simplelru"

	"github.com/plantgate/plantgate/sdk/abi"
)

// leaseShare is the part of what is left of a window's budget one lease
// takes (at least 1): a gateway holds at most 1/leaseShare of the budget it
// has not spent, so little is lost when a window ends with leases unspent,
// and a budget that is never reached costs about one store round trip per
// window and gateway.
const leaseShare = 16

// maxLeases bounds a plugin's lease table: a new key past it evicts the
// least recently used one, in O(1). A client rotating keys (IPv6 addresses
// under "by": "client") thus costs a bounded table and no sweep. An evicted
// key loses only its unspent local units (at most 1/leaseShare of what was
// left, already counted in the store): its next take leases again, so the
// fleet's count, and the limit, hold.
const maxLeases = 4096

// leases holds a plugin's kv_take budgets on this gateway, shared by all its
// instances: one lease per key, least recently used first.
type leases struct {
	mu sync.Mutex
	m  *simplelru.LRU[string, *lease] // nil until the first take
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
	l := ls.get(key)
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
	l := ls.get(key)
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

// get returns key's lease, made when new, and marks it the most recently
// used. A holder of an evicted lease goes on with it: only the table
// forgets it.
func (ls *leases) get(key []byte) *lease {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	if ls.m == nil {
		ls.m, _ = simplelru.NewLRU[string, *lease](maxLeases, nil) // errs only for a size < 1
	}
	if l, ok := ls.m.Get(string(key)); ok {
		return l
	}
	l := &lease{}
	ls.m.Add(string(key), l)
	return l
}

// has reports whether key has a lease in the table, and len how many keys
// do (tests).
func (ls *leases) has(key string) bool {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	return ls.m != nil && ls.m.Contains(key)
}

func (ls *leases) len() int {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	if ls.m == nil {
		return 0
	}
	return ls.m.Len()
}
