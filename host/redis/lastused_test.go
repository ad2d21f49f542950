package redis

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
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
	_ = u.Close(ctx)

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
	_ = u.Close(ctx)
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

// silentServer accepts connections and reads commands but never answers
// one (past refusing the connection handshake), like a Redis host that is
// up but hung. It counts the EVALSHA commands it
// received and sends on got for each.
type silentServer struct {
	addr     string
	evalshas atomic.Int64
	got      chan struct{}
}

func startSilentServer(t *testing.T) *silentServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &silentServer{addr: ln.Addr().String(), got: make(chan struct{}, 64)}
	var conns sync.WaitGroup
	t.Cleanup(func() { _ = ln.Close(); conns.Wait() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			conns.Go(func() {
				defer c.Close()
				buf := make([]byte, 4096)
				for {
					n, err := c.Read(buf)
					cmd := bytes.ToLower(buf[:n])
					if bytes.Contains(cmd, []byte("hello")) {
						// Refused like an old server: go-redis goes on without it.
						_, _ = c.Write([]byte("-ERR unknown command 'hello'\r\n"))
					}
					for range bytes.Count(cmd, []byte("evalsha")) {
						srv.evalshas.Add(1)
						srv.got <- struct{}{}
					}
					if err != nil {
						return
					}
				}
			})
		}
	}()
	return srv
}

// activeTokens finds every digest as an active token.
type activeTokens struct{}

func (activeTokens) Token(_ context.Context, d [32]byte) (host.Token, error) {
	return host.Token{Digest: d, Name: "ci", Scopes: []string{"plants:write"}}, nil
}

// TestTokenUsageCloseDeadline: Close returns when its context ends even
// though the store never answers, and the writes still queued then are
// dropped rather than each waiting out its timeout after shutdown.
func TestTokenUsageCloseDeadline(t *testing.T) {
	t.Parallel()
	srv := startSilentServer(t)
	s := New(goredis.NewClient(&goredis.Options{Addr: srv.addr, Protocol: 2, DisableIdentity: true,
		ReadTimeout: time.Minute, ContextTimeoutEnabled: true, MaxRetries: -1}), Options{})
	u := NewTokenUsage(activeTokens{}, s, time.Minute, slog.New(slog.DiscardHandler))
	for i := range 3 {
		if _, err := u.Token(context.Background(), digest(byte(i), 1)); err != nil {
			t.Fatal(err)
		}
	}
	<-srv.got // the first write is on the wire, the other two queued

	ctx, cancel := context.WithCancel(context.Background())
	cancel() // the shutdown deadline has passed
	if err := u.Close(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("Close = %v, want the context's error", err)
	}
	_ = s.Close() // what serve does next: ends the write in flight
	<-u.done
	if n := srv.evalshas.Load(); n != 1 {
		t.Fatalf("the store received %d writes, want 1: the queued ones must be dropped at the deadline", n)
	}
}
