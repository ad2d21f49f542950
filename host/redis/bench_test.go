package redis

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/alicebob/miniredis/v2"
	goredis "github.com/redis/go-redis/v9"

	"github.com/plantgate/plantgate/host/redis/redistest"
)

// BenchmarkCreatePlant measures one create (one EVALSHA round trip) against
// miniredis and against a real redis-server, serially and from parallel
// goroutines, each create a new id. Compare the backends within one run,
// not against a fixed number:
//
//	go test -run '^$' -bench CreatePlant -benchmem ./host/redis/
//
// The redis-server cases skip without the binary (see redistest). miniredis
// runs in the benchmark's process, so its B/op and allocs/op are mostly the
// server's (it runs every script in a fresh Lua state); the redis-server
// figures are the client's alone.
func BenchmarkCreatePlant(b *testing.B) {
	backends := []struct {
		name string
		open func(b *testing.B) *Store
	}{
		{"miniredis", func(b *testing.B) *Store {
			mr := miniredis.RunT(b)
			return New(goredis.NewClient(&goredis.Options{Addr: mr.Addr()}), Options{})
		}},
		{"redis-server", func(b *testing.B) *Store {
			s, err := Open(context.Background(), redistest.Start(b).URL(), Options{})
			if err != nil {
				b.Fatal(err)
			}
			return s
		}},
	}
	for _, be := range backends {
		b.Run(be.name, func(b *testing.B) {
			s := be.open(b)
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
		b.Run(be.name+"/parallel", func(b *testing.B) {
			s := be.open(b)
			b.Cleanup(func() { _ = s.Close() })
			var ids atomic.Int64
			b.ReportAllocs()
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
