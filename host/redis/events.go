package redis

// # The outbox contract
//
// Once events are recorded (below), every create that really creates (not
// an identical re-create) and every delete that really deletes appends
// exactly one entry to its shard's stream, <prefix>{pNN}:events (see
// shards.go), in the same Lua script call as the write itself: a create or
// delete that was answered always has its event, and an event is never
// written for a write that did not happen.
//
// Events are recorded from the first webhook endpoint on. Until then
// nobody could receive them, and a gateway without webhooks skips the
// stream write and its reading, acknowledging and trimming: about a fifth
// of Redis's work per create and a tenth of the gateway's (issue 14). A
// shard records once its flag <prefix>{pNN}:events:on exists, checked by
// the script in the same call as the write. Store.RecordEvents sets every
// shard's flag, and AddEndpoint calls it before it adds the endpoint, so
// each write after an endpoint exists records its event. The flags are
// never cleared: clearing them when the last endpoint goes would race an
// endpoint being added, and recording for nobody only costs what it did
// before. Every delivering gateway that sees endpoints sets them too, when
// it starts and now and then (webhook.Deliverer), for a store written
// before the flags and an endpoint an older CLI added.
//
// An entry has three fields, and a fourth when the write was traced:
//
//	type  EventPlantCreated ("plant.created") or EventPlantDeleted ("plant.deleted")
//	ts    when the gateway made the write, Unix milliseconds in decimal
//	data  the webhook's data object as compact JSON, ready to embed:
//	      {"id":42,"name":"Fern","tag":"indoor"} for a create (tag left out
//	      when the plant has none; the plant's canonical content), and
//	      {"id":42} for a delete
//	tp    only when the write ran in a sampled trace span: that span's W3C
//	      traceparent, so that the event's deliveries join its trace
//
// Entry ids are Redis's own (XADD *), so they grow within a stream; there
// is no order across streams. The scripts never trim: whoever delivers the
// events trims a stream after delivering them. Readers find the streams
// with Store.EventStreams.

// Field names of an outbox entry.
const (
	EventFieldType = "type"
	EventFieldTS   = "ts"
	EventFieldData = "data"
	EventFieldTP   = "tp"
)

// Event types, the values of EventFieldType.
const (
	EventPlantCreated = "plant.created"
	EventPlantDeleted = "plant.deleted"
)

// EventStreams returns the keys of every shard's outbox stream, in shard
// order. The slice is the caller's.
func (s *Store) EventStreams() []string {
	keys := make([]string, Shards)
	for i := range s.shards {
		keys[i] = s.shards[i].events
	}
	return keys
}
