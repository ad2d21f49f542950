package webhook

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	goredis "github.com/redis/go-redis/v9"

	"github.com/plantgate/plantgate/host"
	"github.com/plantgate/plantgate/host/redis"
)

// shardReads reports the size of every new-entries read of shard 0.
type shardReads struct {
	*redis.Store
	sizes chan int
}

func (s shardReads) ReadEvents(ctx context.Context, shard int, consumer string, pendingOnly bool, count int, block time.Duration) ([]host.Event, error) {
	evs, err := s.Store.ReadEvents(ctx, shard, consumer, pendingOnly, count, block)
	if shard == 0 && !pendingOnly && err == nil {
		s.sizes <- len(evs)
	}
	return evs, err
}

// TestReaderPacesShortBatches: after a read that found a few entries, a
// shard's reader waits Options.Pace before reading again, so that what is
// written meanwhile comes in one read; an empty read does not pace, so an
// entry after a quiet spell is read at once. Every entry is acknowledged.
func TestReaderPacesShortBatches(t *testing.T) {
	mr := miniredis.RunT(t)
	ctx := context.Background()
	st, err := redis.Open(ctx, "redis://"+mr.Addr(), redis.Options{KeyPrefix: "t:"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	raw := goredis.NewClient(&goredis.Options{Addr: mr.Addr()})
	t.Cleanup(func() { raw.Close() })
	emit := func(id int) {
		if err := raw.XAdd(ctx, &goredis.XAddArgs{Stream: "t:{p00}:events", Values: []any{
			"type", host.EventPlantCreated, "ts", strconv.FormatInt(time.Now().UnixMilli(), 10), "data", fmt.Sprintf(`{"id":%d,"name":"a"}`, id),
		}}).Err(); err != nil {
			t.Fatal(err)
		}
	}

	reads := shardReads{st, make(chan int, 1000)}
	// ClaimIdle 200ms: a blocking read returns empty every 100ms when idle.
	d := New(reads, Options{Consumer: "gw", ClaimIdle: 200 * time.Millisecond, Poll: 20 * time.Millisecond})
	paces, resume := make(chan time.Duration, 100), make(chan struct{})
	first := true
	d.wait = func(dt time.Duration) {
		paces <- dt
		if first {
			first = false
			<-resume
		}
	}
	if err := d.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = d.Close(context.Background()) })
	next := func(what string) int {
		t.Helper()
		select {
		case n := <-reads.sizes:
			return n
		case <-time.After(30 * time.Second):
			t.Fatalf("no read of shard 0 (%s)", what)
			return 0
		}
	}
	emit(1)
	for n := next("the first entry"); n == 0; n = next("the first entry") {
	}
	select {
	case dt := <-paces:
		if dt != OptionsDefault.Pace {
			t.Fatalf("paced %s, want Options.Pace's default %s", dt, OptionsDefault.Pace)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the reader read one entry and did not pace")
	}
	for i := range 5 {
		emit(2 + i)
	}
	close(resume)
	if n := next("after the pace"); n != 5 {
		t.Fatalf("the read after the pace found %d entries, want the 5 written during it", n)
	}
	// Two empty reads: the 5-entry read paced once more, the empty ones not.
	for empty := 0; empty < 2; {
		if next("idle") == 0 {
			empty++
		}
	}
	if n := len(paces); n != 1 {
		t.Fatalf("%d more paces after the 5-entry read and two empty reads, want 1", n)
	}
	if p, err := raw.XPending(ctx, "t:{p00}:events", "webhooks").Result(); err != nil || p.Count != 0 {
		t.Fatalf("pending after delivery: %+v, %v; want every entry acknowledged", p, err)
	}
}
