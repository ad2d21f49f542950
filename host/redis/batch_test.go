package redis

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/alicebob/miniredis/v2"
	goredis "github.com/redis/go-redis/v9"

	"github.com/plantgate/plantgate/host"
)

// TestBatchConcurrent creates plants and reads a token from many goroutines
// at once, so the batcher sends pipelines of several commands, and checks
// every answer went to its own caller.
func TestBatchConcurrent(t *testing.T) {
	t.Parallel()
	mr := miniredis.RunT(t)
	s := New(goredis.NewClient(&goredis.Options{Addr: mr.Addr()}), Options{Batch: 8})
	t.Cleanup(func() { _ = s.Close() })
	ctx := context.Background()
	tok := host.Token{Digest: [32]byte{1, 2, 3}, Name: "ci", Scopes: []string{host.ScopePlantsWrite}}
	if err := s.PutToken(ctx, tok); err != nil {
		t.Fatal(err)
	}
	const n = 200
	var wg sync.WaitGroup
	errs := make(chan error, 3*n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p := tagged(int64(i+1), fmt.Sprintf("plant %d", i), "t")
			if created, err := s.CreatePlant(ctx, p); err != nil || !created {
				errs <- fmt.Errorf("create %d: %v %v", i, created, err)
			}
			if created, err := s.CreatePlant(ctx, p); err != nil || created {
				errs <- fmt.Errorf("re-create %d: %v %v", i, created, err)
			}
			if _, err := s.CreatePlant(ctx, tagged(int64(i+1), "other", "t")); host.Code(err) != host.ErrConflict {
				errs <- fmt.Errorf("conflicting create %d: %v", i, err)
			}
			if got, err := s.Token(ctx, tok.Digest); err != nil || got.Name != "ci" {
				errs <- fmt.Errorf("token: %+v %v", got, err)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// TestBatchNoScript flushes the server's scripts: a batched EVALSHA answered
// NOSCRIPT is run again alone and the create still lands once.
func TestBatchNoScript(t *testing.T) {
	t.Parallel()
	mr := miniredis.RunT(t)
	client := goredis.NewClient(&goredis.Options{Addr: mr.Addr()})
	s := New(client, Options{})
	t.Cleanup(func() { _ = s.Close() })
	ctx := context.Background()
	for i := range 3 {
		if err := client.ScriptFlush(ctx).Err(); err != nil {
			t.Fatal(err)
		}
		if created, err := s.CreatePlant(ctx, plant(int64(i+1), "Fern")); err != nil || !created {
			t.Fatalf("create after SCRIPT FLUSH: %v %v", created, err)
		}
	}
	// Concurrent creates go through the workers' pipelines.
	if err := client.ScriptFlush(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for i := range 32 {
		wg.Go(func() {
			if created, err := s.CreatePlant(ctx, plant(int64(100+i), "Fern")); err != nil || !created {
				t.Errorf("concurrent create %d after SCRIPT FLUSH: %v %v", 100+i, created, err)
			}
		})
	}
	wg.Wait()
	indexed := 0
	for i := range s.shards {
		members, err := mr.ZMembers(s.shards[i].index)
		if err != nil && !errors.Is(err, miniredis.ErrKeyNotFound) {
			t.Fatal(err)
		}
		indexed += len(members)
	}
	if indexed != 35 {
		t.Fatalf("the shards' indexes hold %d plants, want 35", indexed)
	}
}

// TestBatchLinger: a lone caller sends its own command and never lingers;
// with other callers waiting a worker lingers, and the command is still
// answered when nobody else comes.
func TestBatchLinger(t *testing.T) {
	t.Parallel()
	mr := miniredis.RunT(t)
	s := New(goredis.NewClient(&goredis.Options{Addr: mr.Addr()}), Options{})
	t.Cleanup(func() { _ = s.Close() })
	ctx := context.Background()
	var id atomic.Int64
	create := func() {
		if created, err := s.CreatePlant(ctx, plant(id.Add(1), "Fern")); err != nil || !created {
			t.Errorf("create %d: %v %v", id.Load(), created, err)
		}
	}
	for range 50 {
		create()
	}
	if n, d := s.batch.lingers.Load(), s.batch.direct.Load(); n != 0 || d != 50 {
		t.Fatalf("a lone caller lingered %d times and sent %d of 50 creates itself", n, d)
	}
	// A stand-in for another waiting caller: the create goes to a worker,
	// finds itself alone in its batch, and the worker lingers.
	s.batch.waiting.Add(1)
	create()
	s.batch.waiting.Add(-1)
	if n := s.batch.lingers.Load(); n != 1 {
		t.Fatalf("with another caller waiting a worker lingered %d times, want 1", n)
	}
}

// TestBatchClosed: a command after Close fails as unavailable.
func TestBatchClosed(t *testing.T) {
	t.Parallel()
	mr := miniredis.RunT(t)
	s := New(goredis.NewClient(&goredis.Options{Addr: mr.Addr()}), Options{})
	_ = s.Close()
	_, err := s.CreatePlant(context.Background(), plant(1, "Fern"))
	wantUnavailable(t, err)
}
