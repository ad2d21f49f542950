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

// maxLeases bounds a plugin's lease table: a new key past it evicts the
// least recently used one, in O(1). A client rotating keys (IPv6 addresses
// under "by": "client") thus costs a bounded table and no sweep. An evicted
// key loses only its unspent local units (at most 1/leaseShare of what was
// left, already counted in the store): its next take leases again, so the
// fleet's count, and the limit, hold.
const maxLeases = 4096

// leases holds a plugin's kv_take budgets on this gateway, shared by all its
// instances: one lease per key, in a list from the least to the most
// recently used.
type leases struct {
	mu         sync.Mutex
	m          map[string]*lease
	head, tail *lease // least and most recently used; guarded by mu
}

// lease is one key's budget in its current window.
type lease struct {
	key        string
	prev, next *lease // the table's use order; guarded by leases.mu

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
	if l := ls.m[string(key)]; l != nil {
		ls.unlink(l)
		ls.push(l)
		return l
	}
	if ls.m == nil {
		ls.m = make(map[string]*lease)
	}
	if len(ls.m) >= maxLeases {
		old := ls.head
		ls.unlink(old)
		delete(ls.m, old.key)
	}
	l := &lease{key: string(key)}
	ls.m[l.key] = l
	ls.push(l)
	return l
}

// push appends l as the most recently used.
func (ls *leases) push(l *lease) {
	l.prev, l.next = ls.tail, nil
	if ls.tail != nil {
		ls.tail.next = l
	} else {
		ls.head = l
	}
	ls.tail = l
}

// unlink takes l out of the use order.
func (ls *leases) unlink(l *lease) {
	if l.prev != nil {
		l.prev.next = l.next
	} else {
		ls.head = l.next
	}
	if l.next != nil {
		l.next.prev = l.prev
	} else {
		ls.tail = l.prev
	}
	l.prev, l.next = nil, nil
}
