package wasm

import (
	"context"
	"testing"
	"time"

	"github.com/plantgate/plantgate/host"
	"github.com/plantgate/plantgate/host/redis"
	"github.com/plantgate/plantgate/host/redis/redistest"
)

// BenchmarkKVIncr measures what a KV call adds to an authorize call,
// against a real redis-server on loopback: a call that allows at once
// (allow.wasm), one that makes a kv_incr first (a store round trip) and
// one that makes a kv_take (a lease from the store about once per window,
// then local). Compare the rows within one run:
//
//	go test -run '^$' -bench BenchmarkKVIncr -benchtime 2s ./host/wasm/
func BenchmarkKVIncr(b *testing.B) {
	srv := redistest.Start(b)
	st, err := redis.Open(context.Background(), srv.URL(), redis.Options{KeyPrefix: "bench:"})
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	for _, name := range []string{"allow", "kvincr", "kvtake"} {
		b.Run(name, func(b *testing.B) {
			p := load(b, name, nil, Limits{}, Options{KV: st})
			ctx := host.WithExchange(context.Background(), &host.Exchange{RequestID: "bench"})
			r := host.AuthorizeRequest{Method: "GET", Path: "/plants", Route: "GET /plants"}
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				if _, err := p.Authorize(ctx, r); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// TestKVIncrFixture: the benchmark's fixture really increments, in its
// plugin's namespace: three calls make the counter 3.
func TestKVIncrFixture(t *testing.T) {
	st := miniStore(t)
	now := time.UnixMilli(1_800_000_000_000)
	p := load(t, "kvincr", nil, Limits{}, Options{KV: st, clock: func() time.Time { return now }})
	for range 3 {
		if _, err := p.Authorize(context.Background(), host.AuthorizeRequest{Method: "GET", Path: "/"}); err != nil {
			t.Fatal(err)
		}
	}
	n, err := st.KVIncr(context.Background(), "kvincr", "k", 0, now.UnixMilli()/60_000, time.Minute)
	if err != nil || n != 3 {
		t.Fatalf("counter = %d, %v; want 3", n, err)
	}
}
