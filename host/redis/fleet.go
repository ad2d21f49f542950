package redis

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"time"

	goredis "github.com/redis/go-redis/v9"
)

// Gateways report themselves under one hash tag, so a beat is one MULTI in
// one slot:
//
//	plantgate:{fleet}:gateway:<id>  string: the Heartbeat as JSON, expiring after its TTL
//	plantgate:{fleet}:gateways      set of ids, pruned by Gateways once a record expired
//
// A gateway that stops cleanly leaves at once; one that dies drops out when
// its record expires.

// Heartbeat is what a gateway says about itself every beat.
type Heartbeat struct {
	ID      string    `json:"id"`
	Host    string    `json:"host"`
	Addr    string    `json:"addr,omitempty"` // the address it serves on
	Started time.Time `json:"started"`
	Beat    time.Time `json:"beat"`    // when this record was written
	Version uint64    `json:"version"` // the chain version it serves
	Digest  string    `json:"digest"`  // that chain's digest
	// State is "serving" when its chain is the newest it has seen, or
	// "refused" when it keeps an older chain because the newest failed;
	// Error then says why.
	State string `json:"state"`
	Error string `json:"error,omitempty"`
	// Refused is the version it refused, with State "refused".
	Refused uint64 `json:"refused,omitempty"`
}

func (s *Store) fleetKey(id string) string { return s.opts.KeyPrefix + "{fleet}:gateway:" + id }
func (s *Store) fleetIndexKey() string     { return s.opts.KeyPrefix + "{fleet}:gateways" }

// Beat writes hb, to expire after ttl unless the next beat comes.
func (s *Store) Beat(ctx context.Context, hb Heartbeat, ttl time.Duration) error {
	b, err := json.Marshal(hb)
	if err != nil {
		return err
	}
	_, err = s.client.TxPipelined(ctx, func(p goredis.Pipeliner) error {
		p.Set(ctx, s.fleetKey(hb.ID), b, ttl)
		p.SAdd(ctx, s.fleetIndexKey(), hb.ID)
		return nil
	})
	if err != nil {
		return storeError("heartbeat", err)
	}
	return nil
}

// Leave removes the gateway id from the fleet.
func (s *Store) Leave(ctx context.Context, id string) error {
	_, err := s.client.TxPipelined(ctx, func(p goredis.Pipeliner) error {
		p.Del(ctx, s.fleetKey(id))
		p.SRem(ctx, s.fleetIndexKey(), id)
		return nil
	})
	if err != nil {
		return storeError("leave fleet", err)
	}
	return nil
}

// Gateways returns the live gateways' last heartbeats, by id.
func (s *Store) Gateways(ctx context.Context) ([]Heartbeat, error) {
	ids, err := s.client.SMembers(ctx, s.fleetIndexKey()).Result()
	if err != nil {
		return nil, storeError("list gateways", err)
	}
	if len(ids) == 0 {
		return []Heartbeat{}, nil
	}
	slices.Sort(ids)
	keys := make([]string, len(ids))
	for i, id := range ids {
		keys[i] = s.fleetKey(id)
	}
	vals, err := s.client.MGet(ctx, keys...).Result()
	if err != nil {
		return nil, storeError("list gateways", err)
	}
	out := make([]Heartbeat, 0, len(ids))
	var gone []any
	for i, v := range vals {
		raw, ok := v.(string)
		if !ok {
			gone = append(gone, ids[i])
			continue
		}
		var hb Heartbeat
		if err := json.Unmarshal([]byte(raw), &hb); err != nil {
			return nil, errors.New("gateway " + ids[i] + ": heartbeat is not JSON")
		}
		out = append(out, hb)
	}
	if len(gone) > 0 {
		// Best effort: a failure leaves ids that the next call prunes.
		_ = s.client.SRem(ctx, s.fleetIndexKey(), gone...).Err()
	}
	return out, nil
}
