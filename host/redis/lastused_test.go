package redis

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	goredis "github.com/redis/go-redis/v9"

	"github.com/plantgate/plantgate/host"
)

// TestTokenUsage: an active token's use is recorded once per interval, off
// the lookup; revoked, expired and unknown tokens are not recorded, and a
// deleted token is not brought back.
func TestTokenUsage(t *testing.T) {
	t.Parallel()
	mr := miniredis.RunT(t)
	s := New(goredis.NewClient(&goredis.Options{Addr: mr.Addr()}), Options{KeyPrefix: "pg:"})
	t.Cleanup(func() { _ = s.Close() })
	ctx := context.Background()
	created := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	active := host.Token{Digest: digest(1, 1), Name: "ci", Scopes: []string{"plants:write"}, Created: created}
	revoked := host.Token{Digest: digest(2, 2), Name: "old", Scopes: []string{"plants:write"}, Created: created, Revoked: true}
	for _, tok := range []host.Token{active, revoked} {
		if err := s.PutToken(ctx, tok); err != nil {
			t.Fatal(err)
		}
	}

	var mu sync.Mutex
	now := created.Add(time.Hour)
	u := NewTokenUsage(s, s, time.Minute, nil)
	u.now = func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	advance := func(d time.Duration) { mu.Lock(); now = now.Add(d); mu.Unlock() }

	lookup := func(d [32]byte) {
		t.Helper()
		if _, err := u.Token(ctx, d); err != nil && host.Code(err) != host.ErrTokenNotFound {
			t.Fatal(err)
		}
	}
	lookup(active.Digest)
	first := now
	advance(30 * time.Second)
	lookup(active.Digest) // within the interval: not written
	lookup(revoked.Digest)
	lookup(digest(9, 9))
	u.Close()

	got, err := s.Token(ctx, active.Digest)
	if err != nil || !got.LastUsed.Equal(first.Truncate(time.Millisecond)) {
		t.Fatalf("last used %v (%v), want %v", got.LastUsed, err, first)
	}
	if got, _ := s.Token(ctx, revoked.Digest); !got.LastUsed.IsZero() {
		t.Fatalf("a revoked token's use was recorded: %v", got.LastUsed)
	}

	// After the interval, the next use is written again.
	u = NewTokenUsage(s, s, time.Minute, nil)
	u.now = func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	advance(time.Minute)
	lookup(active.Digest)
	u.Close()
	if got, _ := s.Token(ctx, active.Digest); !got.LastUsed.Equal(now.Truncate(time.Millisecond)) {
		t.Fatalf("last used %v, want %v", got.LastUsed, now)
	}

	// A token deleted meanwhile stays deleted.
	mr.Del("pg:{tokens}:token:" + selector(active.Digest))
	if err := s.TouchToken(ctx, active.Digest, now); err != nil {
		t.Fatal(err)
	}
	if mr.Exists("pg:{tokens}:token:" + selector(active.Digest)) {
		t.Fatal("TouchToken recreated a deleted token")
	}
}
