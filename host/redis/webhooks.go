package redis

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/plantgate/plantgate/host"
)

// Webhook endpoints and deliveries share one hash tag, so that every script
// here runs in one Cluster slot:
//
//	{webhooks}:endpoints        set of endpoint ids
//	{webhooks}:endpoint:<id>    hash: url events secret created disabled reason
//	{webhooks}:delivery:<id>    hash: endpoint event type ts data state attempts status error next created
//	{webhooks}:due:<endpoint>   zset: score due time or lease end (ms), member delivery id
//	{webhooks}:pending          zset: score event time (ms), member delivery id (backlog, oldest)
//	{webhooks}:log              zset: score enqueue time (ms), the newest LogSize delivery ids
//	{webhooks}:failed           zset: score failure time (ms), failed delivery ids
//
// A delivered record expires after DeliveredTTL; a failed one stays until
// it is replayed.

var (
	_ host.WebhookStore = (*Store)(nil)
	_ host.WebhookAdmin = (*Store)(nil)

	//go:embed enqueue_deliveries.lua
	enqueueDeliveriesLua    string
	enqueueDeliveriesScript = goredis.NewScript(enqueueDeliveriesLua)
	//go:embed claim_deliveries.lua
	claimDeliveriesLua    string
	claimDeliveriesScript = goredis.NewScript(claimDeliveriesLua)
	//go:embed finish_attempt.lua
	finishAttemptLua    string
	finishAttemptScript = goredis.NewScript(finishAttemptLua)
	//go:embed replay_delivery.lua
	replayDeliveryLua    string
	replayDeliveryScript = goredis.NewScript(replayDeliveryLua)
	//go:embed remove_endpoint.lua
	removeEndpointLua    string
	removeEndpointScript = goredis.NewScript(removeEndpointLua)
	// disableEndpointScript sets the flag only on an endpoint that exists,
	// so a removal racing a 410 does not leave a half record behind.
	disableEndpointScript = goredis.NewScript(`if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
redis.call('HSET', KEYS[1], 'disabled', 1, 'reason', ARGV[1])
return 1`)
)

const (
	// LogSize is how many of the newest deliveries `webhook deliveries` can list.
	LogSize = 10000
	// DeliveredTTL is how long a delivered delivery's record is kept.
	DeliveredTTL = 24 * time.Hour
)

func (s *Store) webhookKey(parts ...string) string {
	return s.opts.KeyPrefix + "{webhooks}:" + strings.Join(parts, ":")
}

// AddEndpoint implements host.WebhookAdmin. Events are recorded from then
// on (events.go): turned on first, so that no write after the endpoint
// exists goes unrecorded.
func (s *Store) AddEndpoint(ctx context.Context, e host.Endpoint) error {
	if err := s.RecordEvents(ctx); err != nil {
		return err
	}
	_, err := s.client.TxPipelined(ctx, func(p goredis.Pipeliner) error {
		p.HSet(ctx, s.webhookKey("endpoint", e.ID), "url", e.URL, "events", strings.Join(e.Events, " "),
			"secret", e.Secret, "created", e.Created.UnixMilli(), "disabled", 0, "reason", "")
		p.SAdd(ctx, s.webhookKey("endpoints"), e.ID)
		return nil
	})
	if err != nil {
		return storeError("add webhook endpoint", err)
	}
	return nil
}

// Endpoints implements host.WebhookStore and host.WebhookAdmin.
func (s *Store) Endpoints(ctx context.Context) ([]host.Endpoint, error) {
	ids, err := s.client.SMembers(ctx, s.webhookKey("endpoints")).Result()
	if err != nil {
		return nil, storeError("list webhook endpoints", err)
	}
	slices.Sort(ids)
	cmds := make([]*goredis.MapStringStringCmd, len(ids))
	if _, err := s.client.Pipelined(ctx, func(p goredis.Pipeliner) error {
		for i, id := range ids {
			cmds[i] = p.HGetAll(ctx, s.webhookKey("endpoint", id))
		}
		return nil
	}); err != nil {
		return nil, storeError("read webhook endpoints", err)
	}
	eps := make([]host.Endpoint, 0, len(ids))
	for i, id := range ids {
		h := cmds[i].Val()
		if h["url"] == "" {
			continue // removed between the two reads
		}
		eps = append(eps, host.Endpoint{
			ID: id, URL: h["url"], Events: strings.Fields(h["events"]), Secret: h["secret"],
			Created: parseMilli(h["created"]), Disabled: h["disabled"] == "1", Reason: h["reason"],
		})
	}
	return eps, nil
}

// RemoveEndpoint implements host.WebhookAdmin. The deliveries it drops keep
// their records, marked dropped, until DeliveredTTL.
func (s *Store) RemoveEndpoint(ctx context.Context, id string) (bool, error) {
	keys := []string{s.webhookKey("endpoint", id), s.webhookKey("endpoints"), s.webhookKey("due", id), s.webhookKey("pending")}
	ids, err := removeEndpointScript.Run(ctx, s.client, keys, id).StringSlice()
	if errors.Is(err, goredis.Nil) {
		return false, nil
	}
	if err != nil {
		return false, storeError("remove webhook endpoint", err)
	}
	if _, err := s.client.Pipelined(ctx, func(p goredis.Pipeliner) error {
		for _, d := range ids {
			p.HSet(ctx, s.webhookKey("delivery", d), "state", "dropped", "error", "endpoint removed")
			p.PExpire(ctx, s.webhookKey("delivery", d), DeliveredTTL)
		}
		return nil
	}); err != nil {
		return true, storeError("mark dropped deliveries", err)
	}
	return true, nil
}

// DisableEndpoint implements host.WebhookStore.
func (s *Store) DisableEndpoint(ctx context.Context, id, reason string) error {
	if err := disableEndpointScript.Run(ctx, s.client, []string{s.webhookKey("endpoint", id)}, reason).Err(); err != nil {
		return storeError("disable webhook endpoint", err)
	}
	return nil
}

// EnqueueDeliveries implements host.WebhookStore in one script call.
func (s *Store) EnqueueDeliveries(ctx context.Context, ds []host.Delivery) error {
	if len(ds) == 0 {
		return nil
	}
	keys := make([]string, 0, 2+2*len(ds))
	keys = append(keys, s.webhookKey("pending"), s.webhookKey("log"))
	args := make([]any, 0, 2+7*len(ds))
	args = append(args, time.Now().UnixMilli(), LogSize)
	for _, d := range ds {
		keys = append(keys, s.webhookKey("delivery", d.ID), s.webhookKey("due", d.Endpoint))
		args = append(args, d.ID, d.Endpoint, d.Event.ID, d.Event.Type, d.Event.Time.UnixMilli(), string(d.Event.Data), d.Event.TraceParent)
	}
	if err := enqueueDeliveriesScript.Run(ctx, s.client, keys, args...).Err(); err != nil {
		return storeError("enqueue webhook deliveries", err)
	}
	return nil
}

// ClaimDeliveries implements host.WebhookStore: one script call leases the
// ids, one pipeline reads the records.
func (s *Store) ClaimDeliveries(ctx context.Context, endpoint string, now time.Time, lease time.Duration, n int) ([]host.Delivery, error) {
	due := s.webhookKey("due", endpoint)
	ids, err := claimDeliveriesScript.Run(ctx, s.client, []string{due}, now.UnixMilli(), now.Add(lease).UnixMilli(), n).StringSlice()
	if err != nil {
		return nil, storeError("claim webhook deliveries", err)
	}
	ds, err := s.deliveries(ctx, ids)
	if err != nil {
		return nil, err
	}
	// A due entry without a record (removed meanwhile) has nothing to deliver.
	var live []host.Delivery
	for i, d := range ds {
		if d.ID == "" {
			s.client.ZRem(ctx, due, ids[i])
			continue
		}
		live = append(live, d)
	}
	return live, nil
}

// deliveries reads the records of ids; a missing one comes back zero.
func (s *Store) deliveries(ctx context.Context, ids []string) ([]host.Delivery, error) {
	cmds := make([]*goredis.MapStringStringCmd, len(ids))
	if _, err := s.client.Pipelined(ctx, func(p goredis.Pipeliner) error {
		for i, id := range ids {
			cmds[i] = p.HGetAll(ctx, s.webhookKey("delivery", id))
		}
		return nil
	}); err != nil {
		return nil, storeError("read webhook deliveries", err)
	}
	ds := make([]host.Delivery, len(ids))
	for i, id := range ids {
		h := cmds[i].Val()
		if h["endpoint"] == "" {
			continue
		}
		attempts, _ := strconv.Atoi(h["attempts"])
		status, _ := strconv.Atoi(h["status"])
		ds[i] = host.Delivery{
			ID: id, Endpoint: h["endpoint"], State: h["state"], Attempts: attempts, LastStatus: status,
			LastError: h["error"], NextTry: parseMilli(h["next"]), Created: parseMilli(h["created"]),
			Event: host.Event{ID: h["event"], Type: h["type"], Time: parseMilli(h["ts"]), Data: []byte(h["data"]), TraceParent: h["tp"]},
		}
	}
	return ds, nil
}

// FinishAttempt implements host.WebhookStore.
func (s *Store) FinishAttempt(ctx context.Context, d host.Delivery) error {
	keys := []string{s.webhookKey("delivery", d.ID), s.webhookKey("due", d.Endpoint), s.webhookKey("pending"), s.webhookKey("failed")}
	err := finishAttemptScript.Run(ctx, s.client, keys, d.ID, d.State, d.Attempts, d.LastStatus, d.LastError,
		d.NextTry.UnixMilli(), time.Now().UnixMilli(), DeliveredTTL.Milliseconds()).Err()
	if err != nil {
		return storeError("record webhook attempt", err)
	}
	return nil
}

// Deliveries implements host.WebhookAdmin.
func (s *Store) Deliveries(ctx context.Context, failedOnly bool, limit int) ([]host.Delivery, error) {
	index := s.webhookKey("log")
	if failedOnly {
		index = s.webhookKey("failed")
	}
	ids, err := s.client.ZRevRange(ctx, index, 0, int64(limit)-1).Result()
	if err != nil {
		return nil, storeError("list webhook deliveries", err)
	}
	ds, err := s.deliveries(ctx, ids)
	if err != nil {
		return nil, err
	}
	return slices.DeleteFunc(ds, func(d host.Delivery) bool { return d.ID == "" }), nil
}

// ErrNoDelivery and ErrNotFailed are ReplayDelivery's refusals.
var (
	ErrNoDelivery = errors.New("no such delivery")
	ErrNotFailed  = errors.New("the delivery has not failed; only failed deliveries are replayed")
)

// ReplayDelivery implements host.WebhookAdmin. It refuses a delivery whose
// endpoint is gone or disabled: replaying into either would only fail again.
func (s *Store) ReplayDelivery(ctx context.Context, id string) error {
	rec := s.webhookKey("delivery", id)
	endpoint, err := s.client.HGet(ctx, rec, "endpoint").Result()
	if errors.Is(err, goredis.Nil) {
		return fmt.Errorf("replay %s: %w", id, ErrNoDelivery)
	}
	if err != nil {
		return storeError("replay webhook delivery", err)
	}
	ep, err := s.client.HMGet(ctx, s.webhookKey("endpoint", endpoint), "url", "disabled").Result()
	if err != nil {
		return storeError("replay webhook delivery", err)
	}
	if ep[0] == nil {
		return fmt.Errorf("replay %s: endpoint %s was removed", id, endpoint)
	}
	if ep[1] == "1" {
		return fmt.Errorf("replay %s: endpoint %s is disabled", id, endpoint)
	}
	keys := []string{rec, s.webhookKey("due", endpoint), s.webhookKey("pending"), s.webhookKey("failed")}
	res, err := replayDeliveryScript.Run(ctx, s.client, keys, id, time.Now().UnixMilli()).Int64()
	if err != nil {
		return storeError("replay webhook delivery", err)
	}
	switch res {
	case -1:
		return fmt.Errorf("replay %s: %w", id, ErrNoDelivery)
	case -2:
		return fmt.Errorf("replay %s: %w", id, ErrNotFailed)
	}
	return nil
}

// WebhookBacklog implements host.WebhookStore: the pending deliveries and,
// per shard, the outbox entries given to a gateway and not yet acknowledged.
func (s *Store) WebhookBacklog(ctx context.Context) (int64, time.Time, error) {
	var card *goredis.IntCmd
	var first *goredis.ZSliceCmd
	pend := make([]*goredis.XPendingCmd, EventShards)
	_, err := s.client.Pipelined(ctx, func(p goredis.Pipeliner) error {
		card = p.ZCard(ctx, s.webhookKey("pending"))
		first = p.ZRangeWithScores(ctx, s.webhookKey("pending"), 0, 0)
		for shard := range EventShards {
			pend[shard] = p.XPending(ctx, s.eventStreamKey(shard), eventGroup)
		}
		return nil
	})
	if err != nil && !isNoGroup(err) {
		return 0, time.Time{}, storeError("read webhook backlog", err)
	}
	n := card.Val()
	var oldest time.Time
	if z := first.Val(); len(z) > 0 {
		oldest = time.UnixMilli(int64(z[0].Score))
	}
	for _, c := range pend {
		p, err := c.Result()
		if err != nil || p.Count == 0 {
			continue
		}
		n += p.Count
		ms, _, _ := strings.Cut(p.Lower, "-")
		if t := parseMilli(ms); !t.IsZero() && (oldest.IsZero() || t.Before(oldest)) {
			oldest = t
		}
	}
	return n, oldest, nil
}

// isNoGroup reports a pipeline error that only says a shard has no group
// yet (no gateway has delivered from it).
func isNoGroup(err error) bool { return strings.HasPrefix(err.Error(), "NOGROUP") }

// parseMilli reads a stored Unix-millisecond time; "" or 0 is the zero time.
func parseMilli(s string) time.Time {
	ms, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return time.Time{}
	}
	return fromUnixMilli(ms)
}
