package host

import (
	"context"
	"time"
)

// Webhook event types: the "type" of a Standard Webhooks payload.
const (
	EventPlantCreated = "plant.created"
	EventPlantDeleted = "plant.deleted"
)

// AllEvents lists every event type; an endpoint added without --event gets them all.
var AllEvents = []string{EventPlantCreated, EventPlantDeleted}

// Endpoint is a webhook receiver registered in the store, so that every
// gateway sharing the store delivers to it.
type Endpoint struct {
	ID     string
	URL    string
	Events []string
	// Secret is "whsec_" + base64 of the HMAC key. It is stored as is: the
	// gateway needs the key itself to sign, unlike a token, which it only
	// has to recognise.
	Secret   string
	Created  time.Time
	Disabled bool
	Reason   string // why it was disabled, e.g. "410 Gone"
}

// Wants reports whether the endpoint subscribed to events of this type.
func (e Endpoint) Wants(eventType string) bool {
	for _, t := range e.Events {
		if t == eventType {
			return true
		}
	}
	return false
}

// Event is one entry of the outbox: written by the same store step as the
// create or delete it reports.
type Event struct {
	ID       string    // the webhook-id: stable, the same on every retry
	Shard    int       // which outbox shard holds it
	StreamID string    // its position in that shard's outbox
	Type     string    // EventPlantCreated or EventPlantDeleted
	Time     time.Time // when the write happened (millisecond precision)
	Data     []byte    // the payload's "data" object, exact JSON
	// TraceParent is the W3C traceparent of the span that wrote the event,
	// "" when it was not traced: each delivery's span is its child.
	TraceParent string
}

// Delivery states.
const (
	DeliveryPending   = "pending"   // due now or at NextTry
	DeliveryDelivered = "delivered" // a 2xx answer
	DeliveryFailed    = "failed"    // attempts exhausted or 410; kept for replay
)

// Delivery is one event for one endpoint, with its attempts so far.
type Delivery struct {
	ID         string
	Endpoint   string
	Event      Event // Shard and StreamID are not kept
	State      string
	Attempts   int
	LastStatus int    // HTTP status of the last attempt; 0: none (no answer, or not tried yet)
	LastError  string // why the last attempt failed, when it did
	NextTry    time.Time
	Created    time.Time
}

// WebhookStore is what the delivery engine needs from the store: the outbox
// read through a consumer group, and the durable delivery queue.
type WebhookStore interface {
	// EventShards is how many outbox shards there are; each is read on its own.
	EventShards() int
	// EnsureEventGroup creates the delivery consumer group on every shard
	// (and the shard's stream when missing). Safe to repeat.
	EnsureEventGroup(ctx context.Context) error
	// RecordEvents makes every later create and delete record its event:
	// a store records none while no endpoint exists. Safe to repeat.
	RecordEvents(ctx context.Context) error
	// ReadEvents returns up to count events of one shard that no consumer
	// has been given yet (pendingOnly=false, waiting up to block), or the
	// ones this consumer was given and has not acknowledged (pendingOnly=true).
	ReadEvents(ctx context.Context, shard int, consumer string, pendingOnly bool, count int, block time.Duration) ([]Event, error)
	// ClaimEvents takes over up to count events of one shard that another
	// consumer was given and left unacknowledged for at least minIdle.
	ClaimEvents(ctx context.Context, shard int, consumer string, minIdle time.Duration, count int) ([]Event, error)
	// AckEvents marks events of one shard handled.
	AckEvents(ctx context.Context, shard int, streamIDs ...string) error
	// TrimEvents deletes the events of one shard that were read and
	// acknowledged, up to the oldest one that was not, and reports how many
	// it deleted. An event not yet read or not yet acknowledged stays.
	TrimEvents(ctx context.Context, shard int) (int64, error)

	// Endpoints lists every endpoint, ordered by id.
	Endpoints(ctx context.Context) ([]Endpoint, error)
	// EnqueueDeliveries records deliveries, due now. A delivery whose ID is
	// already recorded is left as it is, so enqueuing again is safe.
	EnqueueDeliveries(ctx context.Context, ds []Delivery) error
	// ClaimDeliveries leases up to n deliveries of one endpoint that are due
	// at now: no other claim sees them until now+lease.
	ClaimDeliveries(ctx context.Context, endpoint string, now time.Time, lease time.Duration, n int) ([]Delivery, error)
	// FinishAttempt records an attempt's outcome: d.State delivered or
	// failed ends the delivery; pending schedules it again at d.NextTry.
	FinishAttempt(ctx context.Context, d Delivery) error
	// DisableEndpoint stops deliveries to an endpoint.
	DisableEndpoint(ctx context.Context, id, reason string) error
	// WebhookBacklog counts deliveries and outbox events not yet handled
	// and returns when the oldest of them happened (zero: none).
	WebhookBacklog(ctx context.Context) (n int64, oldest time.Time, err error)
}

// WebhookAdmin manages endpoints and deliveries; the CLI uses it.
type WebhookAdmin interface {
	AddEndpoint(ctx context.Context, e Endpoint) error
	Endpoints(ctx context.Context) ([]Endpoint, error)
	// RemoveEndpoint deletes the endpoint and drops its pending deliveries;
	// it reports false when there is no such endpoint.
	RemoveEndpoint(ctx context.Context, id string) (bool, error)
	// Deliveries lists up to limit deliveries, newest first; failed ones
	// only when failedOnly.
	Deliveries(ctx context.Context, failedOnly bool, limit int) ([]Delivery, error)
	// ReplayDelivery makes a failed delivery due again with its attempts
	// reset.
	ReplayDelivery(ctx context.Context, id string) error
}
