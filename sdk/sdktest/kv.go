package sdktest

import (
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/plantgate/plantgate/sdk/abi"
	"github.com/plantgate/plantgate/sdk/internal/module"
)

// KV is an in-memory stand-in for the host's KV store, for native tests
// of a plugin that uses sdk.Get, sdk.Set, sdk.Delete, sdk.Incr or
// sdk.Take. It checks arguments as the host does; its Take counts exactly
// (the host's leases can only grant less, never more). Install it with
// SetKV.
//
//	kv := sdktest.NewKV()
//	sdktest.SetKV(t, kv)
//	kv.Down = true // every call now fails as a store outage: sdk.ErrUnavailable
type KV struct {
	// Now is the clock of TTLs and windows. Default: time.Now.
	Now func() time.Time
	// Down makes every call answer abi.KVUnavailable.
	Down bool

	mu      sync.Mutex
	values  map[string]kvValue
	windows map[windowKey]*int64
	// slides holds each sliding key's units by slot, as the host's store
	// does: slot number → units.
	slides map[slideKey]map[int64]int64
}

type slideKey struct {
	key    string
	slotMs int64
}

type windowKey struct {
	key    string
	window int64
}

type kvValue struct {
	v       []byte
	expires time.Time // zero: never
}

// NewKV returns an empty KV.
func NewKV() *KV {
	return &KV{Now: time.Now, values: map[string]kvValue{}, windows: map[windowKey]*int64{}, slides: map[slideKey]map[int64]int64{}}
}

// SetKV makes kv answer the plugin's KV calls until the test ends.
func SetKV(t testing.TB, kv *KV) {
	swap(t, &module.KVGet, kv.get)
	swap(t, &module.KVSet, kv.set)
	swap(t, &module.KVDelete, kv.delete)
	swap(t, &module.KVIncr, kv.incr)
	swap(t, &module.KVTake, kv.take)
	swap(t, &module.KVTakeSliding, kv.takeSliding)
}

// Value returns key's value as the plugin stored it, for assertions.
func (kv *KV) Value(key string) ([]byte, bool) {
	kv.mu.Lock()
	defer kv.mu.Unlock()
	e, ok := kv.values[key]
	if !ok || !e.expires.IsZero() && !kv.Now().Before(e.expires) {
		return nil, false
	}
	return e.v, true
}

func (kv *KV) check(key string) int64 {
	switch {
	case len(key) == 0 || len(key) > abi.MaxKVKey:
		return abi.KVBadArgument
	case kv.Down:
		return abi.KVUnavailable
	}
	return 0
}

func (kv *KV) get(key string, out []byte) int32 {
	if r := kv.check(key); r != 0 {
		return int32(r)
	}
	v, ok := kv.Value(key)
	if !ok {
		return int32(abi.KVNotFound)
	}
	copy(out, v)
	return int32(len(v))
}

func (kv *KV) set(key string, value []byte, ttlMs int64) int32 {
	if r := kv.check(key); r != 0 {
		return int32(r)
	}
	if len(value) > abi.MaxKVValue || ttlMs < 0 || ttlMs > abi.MaxKVTTL {
		return int32(abi.KVBadArgument)
	}
	kv.mu.Lock()
	defer kv.mu.Unlock()
	e := kvValue{v: append([]byte(nil), value...)}
	if ttlMs > 0 {
		e.expires = kv.Now().Add(time.Duration(ttlMs) * time.Millisecond)
	}
	kv.values[strings.Clone(key)] = e // key may alias the plugin's buffer
	return 0
}

func (kv *KV) delete(key string) int32 {
	if r := kv.check(key); r != 0 {
		return int32(r)
	}
	_, ok := kv.Value(key)
	kv.mu.Lock()
	defer kv.mu.Unlock()
	delete(kv.values, key)
	if ok {
		return 1
	}
	return 0
}

// count adds delta to key's counter in the current window of windowMs.
func (kv *KV) count(key string, delta, windowMs int64) (n, resetMs int64) {
	kv.mu.Lock()
	defer kv.mu.Unlock()
	now := kv.Now().UnixMilli()
	w := now / windowMs
	// Looked up first: a count that exists costs no allocation, so a
	// plugin's own allocation test measures the plugin alone.
	// The count is changed through its pointer, never by assigning the
	// map entry again: an assignment to an existing string key stores the
	// new key, and key may alias the plugin's buffer (which the next call
	// overwrites), so the map would end up holding another caller's key.
	c, ok := kv.windows[windowKey{key, w}]
	if !ok {
		c = new(int64)
		kv.windows[windowKey{strings.Clone(key), w}] = c
	}
	*c += delta
	return *c, (w+1)*windowMs - now
}

func (kv *KV) incr(key string, delta, windowMs int64) int64 {
	if r := kv.check(key); r != 0 {
		return r
	}
	if windowMs < 1 || windowMs > abi.MaxKVTTL {
		return abi.KVBadArgument
	}
	n, _ := kv.count(key, delta, windowMs)
	return n
}

func (kv *KV) take(key string, limit, windowMs int64) int64 {
	if r := kv.check(key); r != 0 {
		return r
	}
	if limit < 1 || windowMs < 1 || windowMs > abi.MaxKVTTL {
		return abi.KVBadArgument
	}
	n, reset := kv.count(key, 1, windowMs)
	if n > limit {
		kv.count(key, -1, windowMs)
		return abi.PackTake(true, 0, reset)
	}
	return abi.PackTake(false, limit-n, reset)
}

// takeSliding is abi.ImportKVTakeSliding, counted exactly: the slots of
// the window (abi.SlidingSlot) as the host counts them, without leases.
func (kv *KV) takeSliding(key string, limit, windowMs int64) int64 {
	if r := kv.check(key); r != 0 {
		return r
	}
	if limit < 1 || windowMs < 1 || windowMs > abi.MaxKVTTL {
		return abi.KVBadArgument
	}
	kv.mu.Lock()
	defer kv.mu.Unlock()
	now := kv.Now().UnixMilli()
	slotMs, slots := abi.SlidingSlot(windowMs)
	s := now / slotMs
	counts := kv.slides[slideKey{key, slotMs}]
	if counts == nil {
		counts = map[int64]int64{}
		kv.slides[slideKey{strings.Clone(key), slotMs}] = counts
	}
	taken, oldest := int64(0), s
	for slot, n := range counts {
		if slot < s-slots {
			delete(counts, slot)
			continue
		}
		taken += n
		oldest = min(oldest, slot)
	}
	reset := (oldest+1+slots)*slotMs - now
	if taken >= limit {
		return abi.PackTake(true, 0, reset)
	}
	counts[s]++
	return abi.PackTake(false, limit-taken-1, reset)
}
