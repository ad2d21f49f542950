package tokencache

import (
	"context"
	"encoding/binary"
	"testing"
	"time"

	"github.com/plantgate/plantgate/host"
)

// anyToken is a store that finds every token, without a lock or a map:
// the benchmarks measure the cache, not the store.
type anyToken struct{}

func (anyToken) Token(_ context.Context, d [32]byte) (host.Token, error) {
	return host.Token{Digest: d, Name: "t", Scopes: []string{"plants:read"}}, nil
}

func wide(i uint64) (d [32]byte) { binary.LittleEndian.PutUint64(d[:], i); return d }

// full returns a cache of DefaultMax live tokens.
func full(b *testing.B) *Cache {
	c := New(anyToken{}, time.Hour, 0)
	for i := range uint64(DefaultMax) {
		if _, err := c.Token(context.Background(), wide(i)); err != nil {
			b.Fatal(err)
		}
	}
	return c
}

// BenchmarkHit is a kept token's lookup: every request of a busy client.
//
//	go test -run '^$' -bench . ./host/tokencache/
func BenchmarkHit(b *testing.B) {
	c := full(b)
	ctx, d := context.Background(), wide(7)
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if _, err := c.Token(ctx, d); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkFullMiss is a new token's lookup in a cache full of live
// tokens (DefaultMax): the first request of each new client once the
// cache filled, the store's answer costing nothing here.
func BenchmarkFullMiss(b *testing.B) {
	c := full(b)
	ctx, next := context.Background(), uint64(DefaultMax)
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		next++
		if _, err := c.Token(ctx, wide(next)); err != nil {
			b.Fatal(err)
		}
	}
}
