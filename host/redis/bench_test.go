package redis

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	goredis "github.com/redis/go-redis/v9"

	"github.com/plantgate/plantgate/host/redis/redistest"
)

// BenchmarkCreatePlant measures one create (one EVALSHA) against miniredis
// and against a real redis-server, serially and from parallel goroutines,
// each create a new id, with the pipeline batcher on (the default) and off
// (Options.Batch -1, one round trip per create). Compare the cases within
// one run, not against a fixed number:
//
//	go test -run '^$' -bench CreatePlant -benchmem ./host/redis/
//
// The redis-server cases skip without the binary (see redistest). miniredis
// runs in the benchmark's process, so its B/op and allocs/op are mostly the
// server's (it runs every script in a fresh Lua state); the redis-server
// figures are the client's alone. Serially the batcher only adds a hand-off
// to its worker; in parallel it sends many creates per round trip.
func BenchmarkCreatePlant(b *testing.B) {
	backends := []struct {
		name string
		open func(b *testing.B, batch int) *Store
	}{
		{"miniredis", func(b *testing.B, batch int) *Store {
			mr := miniredis.RunT(b)
			return New(goredis.NewClient(&goredis.Options{Addr: mr.Addr()}), Options{Batch: batch})
		}},
		{"redis-server", func(b *testing.B, batch int) *Store {
			s, err := Open(context.Background(), redistest.Start(b).URL(), Options{Batch: batch})
			if err != nil {
				b.Fatal(err)
			}
			return s
		}},
		// Three primaries on the same machine: each create still goes to
		// one primary, so the gain is in spreading, not in latency.
		{"cluster", func(b *testing.B, batch int) *Store {
			s, err := Open(context.Background(), cluster.Get(b).URL(), Options{Batch: batch, KeyPrefix: fmt.Sprintf("b%d:", prefixes.Add(1))})
			if err != nil {
				b.Fatal(err)
			}
			return s
		}},
		{"cluster-wait1", func(b *testing.B, batch int) *Store {
			s, err := Open(context.Background(), cluster.Get(b).URL(), Options{Batch: batch, WaitReplicas: 1, KeyPrefix: fmt.Sprintf("b%d:", prefixes.Add(1))})
			if err != nil {
				b.Fatal(err)
			}
			return s
		}},
	}
	for _, be := range backends {
		for _, mode := range []struct {
			name  string
			batch int
		}{{"batched", 0}, {"unbatched", -1}} {
			b.Run(be.name+"/"+mode.name, func(b *testing.B) {
				s := be.open(b, mode.batch)
				b.Cleanup(func() { _ = s.Close() })
				ctx := context.Background()
				p := tagged(0, "Fern", "indoor")
				b.ReportAllocs()
				b.ResetTimer()
				for b.Loop() {
					p.ID++
					if _, err := s.CreatePlant(ctx, p); err != nil {
						b.Fatal(err)
					}
				}
			})
			b.Run(be.name+"/"+mode.name+"/parallel", func(b *testing.B) {
				s := be.open(b, mode.batch)
				b.Cleanup(func() { _ = s.Close() })
				var ids atomic.Int64
				b.ReportAllocs()
				b.SetParallelism(32) // like concurrent requests, not GOMAXPROCS goroutines
				b.ResetTimer()
				b.RunParallel(func(pb *testing.PB) {
					ctx := context.Background()
					for pb.Next() {
						if _, err := s.CreatePlant(ctx, tagged(ids.Add(1), "Fern", "indoor")); err != nil {
							b.Error(err)
							return
						}
					}
				})
			})
		}
	}
}

// BenchmarkCreateLatency reports the median and 99th-percentile latency of
// one create against a real redis-server with 1, 2, 8 and 32 callers creating
// at once, each waiting for its answer before the next, batched (the
// default) and unbatched, in the same run: the batcher must not make a
// light load slower than one round trip per create.
//
//	go test -run '^$' -bench CreateLatency ./host/redis/
//
// Compare p50-µs across the cases of one run; ns/op is wall time per create
// over all callers.
func BenchmarkCreateLatency(b *testing.B) {
	srv := redistest.Start(b)
	var prefix atomic.Int64
	for _, callers := range []int{1, 2, 8, 32} {
		for _, mode := range []struct {
			name  string
			batch int
		}{{"unbatched", -1}, {"batched", 0}} {
			b.Run(fmt.Sprintf("callers=%d/%s", callers, mode.name), func(b *testing.B) {
				s, err := Open(context.Background(), srv.URL(), Options{Batch: mode.batch, KeyPrefix: fmt.Sprintf("lat%d:", prefix.Add(1))})
				if err != nil {
					b.Fatal(err)
				}
				b.Cleanup(func() { _ = s.Close() })
				lat := make([][]time.Duration, callers)
				var ids atomic.Int64
				n := int64(b.N)
				b.ResetTimer()
				var wg sync.WaitGroup
				for c := range callers {
					wg.Go(func() {
						ctx := context.Background()
						for id := ids.Add(1); id <= n; id = ids.Add(1) {
							start := time.Now()
							if _, err := s.CreatePlant(ctx, tagged(id, "Fern", "indoor")); err != nil {
								b.Error(err)
								return
							}
							lat[c] = append(lat[c], time.Since(start))
						}
					})
				}
				wg.Wait()
				b.StopTimer()
				all := slices.Concat(lat...)
				slices.Sort(all)
				if len(all) > 0 {
					b.ReportMetric(float64(all[len(all)/2].Nanoseconds())/1e3, "p50-µs")
					b.ReportMetric(float64(all[len(all)*99/100].Nanoseconds())/1e3, "p99-µs")
				}
			})
		}
	}
}

// BenchmarkReadPlant compares a read of one plant and a list page on the
// package's cluster (one replica per primary) without and with WaitReplicas
// 1, in the same run: with it, each read is fenced (fence.go), a write to
// the replicas and a WAIT for them.
//
//	go test -run '^$' -bench ReadPlant ./host/redis/
func BenchmarkReadPlant(b *testing.B) {
	for _, wait := range []int{0, 1} {
		name := fmt.Sprintf("wait%d", wait)
		open := func(b *testing.B) *Store {
			s, err := Open(context.Background(), cluster.Get(b).URL(), Options{WaitReplicas: wait, KeyPrefix: fmt.Sprintf("b%d:", prefixes.Add(1))})
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { _ = s.Close() })
			ctx := context.Background()
			for id := range int64(100) {
				if _, err := s.CreatePlant(ctx, tagged(id, "Fern", "indoor")); err != nil {
					b.Fatal(err)
				}
			}
			return s
		}
		b.Run(name+"/plant", func(b *testing.B) {
			s := open(b)
			ctx := context.Background()
			var id int64
			for b.Loop() {
				if _, err := s.Plant(ctx, id%100); err != nil {
					b.Fatal(err)
				}
				id++
			}
		})
		b.Run(name+"/plant/parallel", func(b *testing.B) {
			s := open(b)
			var ids atomic.Int64
			b.SetParallelism(32)
			b.RunParallel(func(pb *testing.PB) {
				ctx := context.Background()
				for pb.Next() {
					if _, err := s.Plant(ctx, ids.Add(1)%100); err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
		b.Run(name+"/list", func(b *testing.B) {
			s := open(b)
			ctx := context.Background()
			for b.Loop() {
				if _, err := s.Plants(ctx, nil, 20); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
