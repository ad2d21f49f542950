package redis

import (
	"context"
	"testing"
	"time"
)

// testKV: values and windowed counters, stored under the documented keys,
// apart per namespace, with their expiries.
func testKV(t *testing.T, newF newFixture) {
	f := newF(t)
	ctx := context.Background()
	if err := f.store.KVSet(ctx, "auth", "k}x", []byte("v1"), time.Minute); err != nil {
		t.Fatal(err)
	}
	if v, found, err := f.store.KVGet(ctx, "auth", "k}x"); err != nil || !found || string(v) != "v1" {
		t.Fatalf("KVGet = %q, %v, %v", v, found, err)
	}
	if _, found, err := f.store.KVGet(ctx, "aut", "hk}x"); err != nil || found {
		t.Fatalf("another namespace sees the key: %v, %v", found, err)
	}
	key := f.key("kv:4:auth:{k}x}")
	if v, err := f.raw.Get(ctx, key).Result(); err != nil || v != "v1" {
		t.Fatalf("GET %s = %q, %v", key, v, err)
	}
	if ttl, err := f.raw.PTTL(ctx, key).Result(); err != nil || ttl <= 0 || ttl > time.Minute {
		t.Fatalf("PTTL %s = %v, %v; want up to a minute", key, ttl, err)
	}
	if del, err := f.store.KVDelete(ctx, "auth", "k}x"); err != nil || !del {
		t.Fatalf("KVDelete = %v, %v", del, err)
	}
	if del, err := f.store.KVDelete(ctx, "auth", "k}x"); err != nil || del {
		t.Fatalf("second KVDelete = %v, %v", del, err)
	}
	for want := int64(1); want <= 3; want++ {
		if n, err := f.store.KVIncr(ctx, "auth", "n", 1, 42, time.Second); err != nil || n != want {
			t.Fatalf("KVIncr = %d, %v; want %d", n, err, want)
		}
	}
	if n, err := f.store.KVIncr(ctx, "auth", "n", 5, 43, time.Second); err != nil || n != 5 {
		t.Fatalf("next window: %d, %v; want 5", n, err)
	}
	if ttl, err := f.raw.PTTL(ctx, f.key("kv:4:auth:{n}:w42")).Result(); err != nil || ttl <= 0 || ttl > 2*time.Second {
		t.Fatalf("window counter PTTL = %v, %v; want up to two windows", ttl, err)
	}
}

// testKVLease: leases shrink with what is left, and never pass the limit.
func testKVLease(t *testing.T, newF newFixture) {
	f := newF(t)
	ctx := context.Background()
	var grants []int64
	var total int64
	for {
		g, taken, err := f.store.KVLease(ctx, "rl", "t:ci", 100, 16, 7, time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if g == 0 {
			if taken != 100 {
				t.Fatalf("spent with %d taken, want 100", taken)
			}
			break
		}
		total += g
		if taken != total {
			t.Fatalf("taken %d after grants %v, want %d", taken, grants, total)
		}
		grants = append(grants, g)
	}
	if total != 100 || grants[0] != 6 || grants[len(grants)-1] != 1 {
		t.Fatalf("grants %v (total %d): want 100/16 = 6 first, 1 last, 100 in all", grants, total)
	}
}

// testKVLeaseSliding: a sliding window's slots, stored under the
// documented key, count for the slots after them and no longer; older ones
// are dropped; the oldest counted slot is reported.
func testKVLeaseSliding(t *testing.T, newF newFixture) {
	f := newF(t)
	ctx := context.Background()
	const slots = 20
	lease := func(slot int64) (granted, taken, oldest int64) {
		t.Helper()
		g, tk, o, err := f.store.KVLeaseSliding(ctx, "rl", "c:1", 3, 16, slot, slots, 3*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		return g, tk, o
	}
	for i := range 3 {
		if g, tk, o := lease(100); g != 1 || tk != int64(i+1) || o != 100 {
			t.Fatalf("lease %d in slot 100 = %d, %d, %d; want 1, %d, 100", i, g, tk, o, i+1)
		}
	}
	// Slot 100 counts up to slot 120 and not at 121.
	if g, tk, o := lease(120); g != 0 || tk != 3 || o != 100 {
		t.Fatalf("slot 120 = %d, %d, %d; want spent (0, 3, 100)", g, tk, o)
	}
	if g, tk, o := lease(121); g != 1 || tk != 1 || o != 121 {
		t.Fatalf("slot 121 = %d, %d, %d; want 1, 1, 121", g, tk, o)
	}
	hash := f.key("kv:2:rl:{c:1}:s3000")
	if m, err := f.raw.HGetAll(ctx, hash).Result(); err != nil || len(m) != 1 || m["121"] != "1" {
		t.Fatalf("HGETALL %s = %v, %v; want only slot 121", hash, m, err)
	}
	if ttl, err := f.raw.PTTL(ctx, hash).Result(); err != nil || ttl <= 60*time.Second || ttl > 66*time.Second {
		t.Fatalf("PTTL %s = %v, %v; want the 22 slots of 3 s", hash, ttl, err)
	}
}
