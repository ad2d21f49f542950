package redis

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/plantgate/plantgate/host"
)

// Delivery reads the outbox (events.go) of each shard on its own through one
// consumer group, so each stream operation here touches one key,
// <prefix>{pNN}:events, in that shard's slot.

// EventShards is the number of outbox shards, one per plant shard.
const EventShards = Shards

// eventGroup is the consumer group the gateways deliver through: each entry
// goes to one gateway (consumer) of the fleet.
const eventGroup = "webhooks"

// eventStreamKey is the outbox stream of one shard.
func (s *Store) eventStreamKey(shard int) string { return s.shards[shard].events }

// EventShards implements host.WebhookStore.
func (s *Store) EventShards() int { return EventShards }

// EnsureEventGroup creates the consumer group on every shard's stream,
// starting at the stream's beginning, so that events written before any
// gateway delivered are delivered too. Touches each {pNN}:events.
func (s *Store) EnsureEventGroup(ctx context.Context) error {
	for shard := range EventShards {
		err := s.client.XGroupCreateMkStream(ctx, s.eventStreamKey(shard), eventGroup, "0").Err()
		if err != nil && !strings.HasPrefix(err.Error(), "BUSYGROUP") {
			return storeError("create webhook consumer group", err)
		}
	}
	return nil
}

// RecordEvents makes every later create and delete record its event in the
// outbox (events.go) by setting each shard's {pNN}:events:on. Idempotent.
func (s *Store) RecordEvents(ctx context.Context) error {
	_, err := s.client.Pipelined(ctx, func(p goredis.Pipeliner) error {
		for shard := range Shards {
			p.Set(ctx, s.shards[shard].recording, "1", 0)
		}
		return nil
	})
	if err != nil {
		return storeError("turn on event recording", err)
	}
	return nil
}

// ReadEvents implements host.WebhookStore with XREADGROUP on one shard's
// stream: ">" for new entries, "0" for this consumer's unacknowledged ones.
// A blocking read holds a connection of a client of its own, so that the
// readers never take the request path's connections.
func (s *Store) ReadEvents(ctx context.Context, shard int, consumer string, pendingOnly bool, count int, block time.Duration) ([]host.Event, error) {
	start, c := ">", s.client
	if pendingOnly {
		start, block = "0", -1
	} else if block >= 0 {
		c = s.readerClient()
	}
	args := &goredis.XReadGroupArgs{Group: eventGroup, Consumer: consumer, Streams: []string{s.eventStreamKey(shard), start}, Count: int64(count), Block: block}
	if block < 0 {
		args.Block = -1
	}
	streams, err := c.XReadGroup(ctx, args).Result()
	if errors.Is(err, goredis.Nil) {
		return nil, nil
	}
	if err != nil {
		return nil, storeError("read outbox", err)
	}
	var events []host.Event
	for _, st := range streams {
		events = appendEvents(events, shard, st.Messages)
	}
	return events, nil
}

// ClaimEvents implements host.WebhookStore with XAUTOCLAIM on one shard's
// stream, walking its whole pending list once.
func (s *Store) ClaimEvents(ctx context.Context, shard int, consumer string, minIdle time.Duration, count int) ([]host.Event, error) {
	var events []host.Event
	cursor := "0-0"
	for {
		msgs, next, err := s.client.XAutoClaim(ctx, &goredis.XAutoClaimArgs{
			Stream: s.eventStreamKey(shard), Group: eventGroup, Consumer: consumer,
			MinIdle: minIdle, Start: cursor, Count: int64(count),
		}).Result()
		if err != nil {
			return events, storeError("claim outbox entries", err)
		}
		events = appendEvents(events, shard, msgs)
		if next == "0-0" || next == "" || len(events) >= count {
			return events, nil
		}
		cursor = next
	}
}

// AckEvents implements host.WebhookStore.
func (s *Store) AckEvents(ctx context.Context, shard int, streamIDs ...string) error {
	if len(streamIDs) == 0 {
		return nil
	}
	if err := s.client.XAck(ctx, s.eventStreamKey(shard), eventGroup, streamIDs...).Err(); err != nil {
		return storeError("acknowledge outbox entries", err)
	}
	return nil
}

// TrimEvents implements host.WebhookStore with XTRIM MINID on one shard's
// stream (touches {pNN}:events only). The threshold is, for each group, the
// oldest entry still pending, or the one after the last entry the group
// read when nothing is pending; the lowest of them over all groups, so a
// group of someone else's is respected too. Without a group nothing is
// trimmed: no one has read anything yet.
//
// It reads without a transaction and is still safe against readers and
// acknowledgers running meanwhile, because the group state is read before
// the pending list. Every entry below the last-delivered id read first
// had been given out by then, and one no longer pending a moment later has
// been acknowledged; every entry below the oldest id pending a moment later
// had been given out too (pending ids never pass the last-delivered id),
// and is not pending, so it is acknowledged. Entries appended or read
// later have higher ids than either threshold.
func (s *Store) TrimEvents(ctx context.Context, shard int) (int64, error) {
	key := s.eventStreamKey(shard)
	groups, err := s.client.XInfoGroups(ctx, key).Result()
	if err != nil {
		if strings.Contains(err.Error(), "no such key") {
			return 0, nil
		}
		return 0, storeError("read outbox groups", err)
	}
	minID := ""
	for _, g := range groups {
		id, err := nextStreamID(g.LastDeliveredID)
		if err != nil {
			return 0, storeError("read outbox groups", err)
		}
		if g.Pending > 0 {
			p, err := s.client.XPending(ctx, key, g.Name).Result()
			if err != nil {
				return 0, storeError("read outbox pending entries", err)
			}
			if p.Count > 0 {
				id = p.Lower
			}
		}
		if minID == "" || streamIDLess(id, minID) {
			minID = id
		}
	}
	if minID == "" {
		return 0, nil
	}
	n, err := s.client.XTrimMinID(ctx, key, minID).Result()
	if err != nil {
		return 0, storeError("trim outbox", err)
	}
	return n, nil
}

// parseStreamID splits a stream entry id "<ms>-<seq>"; "<ms>" alone is
// "<ms>-0" (miniredis reports a group created at "0" so).
func parseStreamID(id string) (ms, seq uint64, err error) {
	a, b, ok := strings.Cut(id, "-")
	if ms, err = strconv.ParseUint(a, 10, 64); err == nil && ok {
		seq, err = strconv.ParseUint(b, 10, 64)
	}
	if err != nil {
		return 0, 0, fmt.Errorf("malformed stream id %q", id)
	}
	return ms, seq, nil
}

// nextStreamID is the smallest id after id.
func nextStreamID(id string) (string, error) {
	ms, seq, err := parseStreamID(id)
	if err != nil {
		return "", err
	}
	if seq == math.MaxUint64 {
		return strconv.FormatUint(ms+1, 10) + "-0", nil
	}
	return strconv.FormatUint(ms, 10) + "-" + strconv.FormatUint(seq+1, 10), nil
}

// streamIDLess orders well-formed stream ids (both come from Redis).
func streamIDLess(a, b string) bool {
	am, as, _ := parseStreamID(a)
	bm, bs, _ := parseStreamID(b)
	return am < bm || am == bm && as < bs
}

// appendEvents decodes stream entries. An entry without a known type, a
// time or data still becomes an Event (Type ""), so that the caller can
// log it and acknowledge it rather than read it forever.
func appendEvents(dst []host.Event, shard int, msgs []goredis.XMessage) []host.Event {
	for _, m := range msgs {
		e := host.Event{ID: EventID(shard, m.ID), Shard: shard, StreamID: m.ID}
		typ, _ := m.Values[EventFieldType].(string)
		data, _ := m.Values[EventFieldData].(string)
		ts, _ := m.Values[EventFieldTS].(string)
		ms, err := strconv.ParseInt(ts, 10, 64)
		if err == nil && data != "" && (typ == host.EventPlantCreated || typ == host.EventPlantDeleted) {
			e.Type, e.Data, e.Time = typ, []byte(data), time.UnixMilli(ms).UTC()
			e.TraceParent, _ = m.Values[EventFieldTP].(string)
		}
		dst = append(dst, e)
	}
	return dst
}

// EventID is the webhook-id of the outbox entry at streamID in shard: unique
// across shards, the same on every retry and on every gateway.
func EventID(shard int, streamID string) string {
	return fmt.Sprintf("msg_p%02d_%s", shard, streamID)
}

// readerClient is the client blocking outbox reads use: its own pool,
// one connection per shard (per node in a cluster), opened on first use.
// A Store made by New, whose client it cannot copy, uses that client.
func (s *Store) readerClient() goredis.UniversalClient {
	s.readerOnce.Do(func() {
		s.reader = s.client
		if s.newReader != nil {
			s.reader = s.newReader(EventShards + 1)
		}
	})
	return s.reader
}

// InterruptEventReads ends the blocking outbox reads in progress (a
// cancelled context does not reach a read blocked in Redis); reads after
// it fail. A deliverer calls it when it stops.
func (s *Store) InterruptEventReads() {
	c := s.readerClient()
	if c != s.client {
		_ = c.Close()
	}
}
