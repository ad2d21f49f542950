package wasm

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"

	"github.com/plantgate/plantgate/host"
	"github.com/plantgate/plantgate/host/redis"
	"github.com/plantgate/plantgate/sdk/abi"
)

// countingKV counts the store round trips of leases.
type countingKV struct {
	host.KV
	leases int
}

func (c *countingKV) KVLease(ctx context.Context, ns, key string, limit, share, window int64, size time.Duration) (int64, int64, error) {
	c.leases++
	return c.KV.KVLease(ctx, ns, key, limit, share, window, size)
}

// miniStore is a Redis store on a miniredis of the test's own.
func miniStore(t *testing.T) *redis.Store {
	t.Helper()
	st, err := redis.Open(context.Background(), "redis://"+miniredis.RunT(t).Addr(), redis.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// leaseGateway is one gateway's view of a plugin's leases: its own lease
// table over the shared store.
func leaseGateway(kv host.KV, now *time.Time) *Plugin {
	return &Plugin{kv: kv, info: PluginInfo{Name: "rate-limit"}, clock: func() time.Time { return *now }}
}

// TestLeasesShareTheLimit: two gateways taking from one key in turn never
// allow more than the limit in a window, allow all of it, and start again
// in the next window.
func TestLeasesShareTheLimit(t *testing.T) {
	st := miniStore(t)
	now := time.UnixMilli(1_800_000_000_000)
	a, b := leaseGateway(st, &now), leaseGateway(st, &now)
	for window := range 3 {
		allowed := 0
		for i := range 300 { // 3× the limit
			p := a
			if i%2 == 1 {
				p = b
			}
			r, err := p.leases.take(context.Background(), p, []byte("t:ci"), 100, time.Second)
			if err != nil {
				t.Fatal(err)
			}
			if denied, _, reset := abi.UnpackTake(r); !denied {
				allowed++
			} else if reset != 1000-int64(window) {
				t.Fatalf("reset = %d ms, want %d", reset, 1000-window)
			}
		}
		if allowed != 100 {
			t.Fatalf("window %d: allowed %d of 300, want exactly the limit 100", window, allowed)
		}
		now = now.Add(time.Second + time.Millisecond)
	}
}

// TestLeasesAreCheap: a limit that is never reached costs one store round
// trip per window, however many requests pass.
func TestLeasesAreCheap(t *testing.T) {
	st := miniStore(t)
	kv := &countingKV{KV: st}
	now := time.UnixMilli(1_800_000_000_000)
	p := leaseGateway(kv, &now)
	for range 10_000 {
		if r, err := p.leases.take(context.Background(), p, []byte("t:ci"), 1_000_000_000, time.Second); err != nil || r>>62 != 0 {
			t.Fatalf("take = %#x, %v", r, err)
		}
	}
	if kv.leases != 1 {
		t.Fatalf("%d store round trips for 10,000 takes, want 1", kv.leases)
	}
}

// grantingKV grants every lease in full, without a store: the lease table's
// own bookkeeping is what TestLeaseTableHardCap looks at.
type grantingKV struct{ host.KV }

func (grantingKV) KVLease(_ context.Context, _, _ string, limit, _, _ int64, _ time.Duration) (int64, int64, error) {
	return limit, limit, nil
}

// TestLeaseTableHardCap: a client rotating keys (IPv6 addresses under
// "by": "client") inside one window never grows the table past maxLeases;
// each new key evicts the least recently used one, so a key in use stays.
func TestLeaseTableHardCap(t *testing.T) {
	now := time.UnixMilli(1_800_000_000_000)
	p := leaseGateway(grantingKV{}, &now)
	take := func(key string) {
		t.Helper()
		if _, err := p.leases.take(context.Background(), p, []byte(key), 100, time.Hour); err != nil {
			t.Fatal(err)
		}
	}
	take("hot")
	for i := range maxLeases + 500 {
		take(fmt.Sprintf("2001:db8::%x", i))
		if i%100 == 0 {
			take("hot") // used all along: never the oldest
		}
		if n := p.leases.len(); n > maxLeases {
			t.Fatalf("after %d keys: %d leases, want at most %d", i+2, n, maxLeases)
		}
	}
	if n := p.leases.len(); n != maxLeases {
		t.Fatalf("%d leases, want %d", n, maxLeases)
	}
	if !p.leases.has("hot") {
		t.Fatal("the key in use was evicted")
	}
	// The 500 evicted are the oldest: the first keys made (the hot one aside).
	for i := range maxLeases + 500 {
		kept := p.leases.has(fmt.Sprintf("2001:db8::%x", i))
		if want := i >= 501; kept != want {
			t.Fatalf("key %d kept %v, want %v", i, kept, want)
		}
	}
}
