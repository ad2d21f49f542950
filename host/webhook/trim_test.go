package webhook_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/plantgate/plantgate/host"
	"github.com/plantgate/plantgate/host/webhook"
)

// streamIDs returns the ids of the entries left in a shard's outbox.
func (b backend) streamIDs(t *testing.T, shard int) []string {
	t.Helper()
	msgs, err := b.raw.XRange(context.Background(), b.streamKey(shard), "-", "+").Result()
	if err != nil {
		t.Fatal(err)
	}
	ids := make([]string, len(msgs))
	for i, m := range msgs {
		ids[i] = m.ID
	}
	return ids
}

func (b backend) streamKey(shard int) string { return fmt.Sprintf("%s{p%02d}:events", b.prefix, shard) }

// streamID is the stream entry id inside a webhook-id (redis.EventID).
func streamID(webhookID string) string { return webhookID[strings.LastIndexByte(webhookID, '_')+1:] }

// A running deliverer trims what it delivered: a shard whose entries are
// all acknowledged ends empty; in a shard where another gateway still holds
// an unacknowledged entry, that entry and everything after it stay.
func TestOutboxTrimmedAfterDelivery(t *testing.T) {
	t.Parallel()
	backends(t, func(t *testing.T, newB func(t *testing.T) backend) {
		b := newB(t)
		ctx := context.Background()
		srv, hits := receiver(t, ok)
		b.addEndpoint(t, srv.URL)
		if err := b.store.EnsureEventGroup(ctx); err != nil {
			t.Fatal(err)
		}
		// Shard 2: a gateway (not started here) read e0 and e1, acknowledged
		// e0 and died holding e1.
		e0 := b.emit(t, 2, host.EventPlantCreated, `{"id":1,"name":"a"}`)
		e1 := b.emit(t, 2, host.EventPlantCreated, `{"id":2,"name":"b"}`)
		if got, err := b.store.ReadEvents(ctx, 2, "dead", false, 2, -1); err != nil || len(got) != 2 {
			t.Fatalf("dead consumer read %d entries: %v", len(got), err)
		}
		if err := b.store.AckEvents(ctx, 2, streamID(e0)); err != nil {
			t.Fatal(err)
		}
		e2 := b.emit(t, 2, host.EventPlantDeleted, `{"id":1}`)
		e3 := b.emit(t, 2, host.EventPlantCreated, `{"id":3,"name":"c"}`)
		for i := range 4 {
			b.emit(t, 9, host.EventPlantCreated, fmt.Sprintf(`{"id":%d,"name":"d"}`, 10+i))
		}

		// ClaimIdle far away: the dead gateway's e1 stays unacknowledged.
		b.start(t, func(o *webhook.Options) { o.ClaimIdle = time.Hour })
		for range 6 {
			if id := next(t, hits).header.Get("webhook-id"); id == e1 {
				t.Fatalf("%s, held by another gateway, was delivered", id)
			}
		}

		want := map[int][]string{2: {streamID(e1), streamID(e2), streamID(e3)}, 9: {}}
		deadline := time.Now().Add(15 * time.Second)
		for shard, ids := range want {
			for {
				got := b.streamIDs(t, shard)
				if slices.Equal(got, ids) {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("shard %d outbox holds %v, want %v", shard, got, ids)
				}
				time.Sleep(10 * time.Millisecond) // polling stored state, not ordering events
			}
		}
	})
}

// TrimEvents drops exactly the head of a shard's outbox that the group has
// read and acknowledged: unread entries and the oldest pending one (and
// what follows it) survive, and a pending entry is still readable after.
func TestTrimEventsKeepsUnackedTail(t *testing.T) {
	t.Parallel()
	backends(t, func(t *testing.T, newB func(t *testing.T) backend) {
		b := newB(t)
		ctx := context.Background()
		const shard = 5
		trim := func(want int64, left ...string) {
			t.Helper()
			n, err := b.store.TrimEvents(ctx, shard)
			if err != nil || n != want {
				t.Fatalf("TrimEvents = %d, %v; want %d trimmed", n, err, want)
			}
			if got := b.streamIDs(t, shard); !slices.Equal(got, left) {
				t.Fatalf("outbox holds %v, want %v", got, left)
			}
		}
		trim(0) // no stream, no group: nothing to do, no error

		var e [5]string
		for i := range e {
			e[i] = streamID(b.emit(t, shard, host.EventPlantCreated, fmt.Sprintf(`{"id":%d,"name":"x"}`, i)))
		}
		trim(0, e[:]...) // no group yet: nobody has read anything
		if err := b.store.EnsureEventGroup(ctx); err != nil {
			t.Fatal(err)
		}
		trim(0, e[:]...) // the group has read nothing

		if got, err := b.store.ReadEvents(ctx, shard, "a", false, 3, -1); err != nil || len(got) != 3 {
			t.Fatalf("read %d entries: %v", len(got), err)
		}
		trim(0, e[:]...) // e0..e2 pending, e3 e4 unread

		if err := b.store.AckEvents(ctx, shard, e[0], e[2]); err != nil {
			t.Fatal(err)
		}
		trim(1, e[1:]...) // e1 still pending: it and all after it stay
		pending, err := b.store.ReadEvents(ctx, shard, "a", true, 10, 0)
		if err != nil || len(pending) != 1 || pending[0].StreamID != e[1] || string(pending[0].Data) != `{"id":1,"name":"x"}` {
			t.Fatalf("pending after trim: %+v, %v", pending, err)
		}

		if err := b.store.AckEvents(ctx, shard, e[1]); err != nil {
			t.Fatal(err)
		}
		trim(2, e[3:]...) // nothing pending: up to the last read (e2); unread e3 e4 stay

		if got, err := b.store.ReadEvents(ctx, shard, "b", false, 10, -1); err != nil || len(got) != 2 {
			t.Fatalf("read %d entries: %v", len(got), err)
		}
		trim(0, e[3:]...) // read by b, not acknowledged
		if err := b.store.AckEvents(ctx, shard, e[3], e[4]); err != nil {
			t.Fatal(err)
		}
		trim(2)
		// The emptied stream and its group stay: new entries are read as before.
		e5 := streamID(b.emit(t, shard, host.EventPlantDeleted, `{"id":5}`))
		if got, err := b.store.ReadEvents(ctx, shard, "b", false, 10, -1); err != nil || len(got) != 1 || got[0].StreamID != e5 {
			t.Fatalf("read after emptying: %+v, %v", got, err)
		}
		if n, err := b.raw.Exists(ctx, b.streamKey(shard)).Result(); err != nil || n != 1 {
			t.Fatalf("stream exists = %d, %v", n, err)
		}
	})
}
