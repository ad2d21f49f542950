package redis

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	goredis "github.com/redis/go-redis/v9"
)

// The fleet's shadow decision-diff log is one capped stream, so every
// gateway of a fleet writes to it and `plugin diff` and each console read
// all of them:
//
//	plantgate:{shadow}:diffs   stream, field "d": a ShadowDiff as JSON; about ShadowDiffCap entries
//
// XADD trims with MAXLEN ~ (whole macro nodes, cheap): the stream holds at
// least ShadowDiffCap entries and not many more.

// ShadowDiffCap is about how many diffs the stream keeps, newest last.
const ShadowDiffCap = 1000

// ShadowDiff is one shadow decision that disagreed with the live chain (or
// faulted). It holds the canonical input's non-secret fields: never the
// credential, nor a digest of it.
type ShadowDiff struct {
	ID        string     `json:"id"` // the stream entry's id; set when read
	At        time.Time  `json:"at"`
	Gateway   string     `json:"gateway,omitempty"` // the writer's fleet id or address
	RequestID string     `json:"request_id,omitempty"`
	Plugin    string     `json:"plugin"`
	File      string     `json:"file"`
	Phase     string     `json:"phase"`
	Outcome   string     `json:"outcome"` // would_deny, would_allow, fault
	Live      Decision   `json:"live"`
	Shadow    Decision   `json:"shadow"`
	Principal string     `json:"principal,omitempty"`
	Method    string     `json:"method,omitempty"`
	Route     string     `json:"route,omitempty"`
	Path      string     `json:"path,omitempty"`
	PathID    *int64     `json:"path_id,omitempty"`
	Plant     *DiffPlant `json:"plant,omitempty"`
}

// Decision is one side of a ShadowDiff: "allow" or "deny" (a fault is a
// deny with its code).
type Decision struct {
	Decision string `json:"decision"`
	Code     int32  `json:"code,omitempty"`
}

// String is the decision as `plugin diff` and the console show it: "allow",
// or the verdict with its code ("deny 40355").
func (d Decision) String() string {
	if d.Code != 0 {
		return d.Decision + " " + strconv.Itoa(int(d.Code))
	}
	return d.Decision
}

// DiffPlant is the canonical plant a validate phase saw.
type DiffPlant struct {
	ID   int64   `json:"id"`
	Name string  `json:"name"`
	Tag  *string `json:"tag,omitempty"`
}

func (s *Store) shadowDiffKey() string { return s.opts.KeyPrefix + "{shadow}:diffs" }

// AddShadowDiff appends d to the fleet's diff log, trimming it to about
// ShadowDiffCap entries.
func (s *Store) AddShadowDiff(ctx context.Context, d ShadowDiff) error {
	d.ID = ""
	b, err := json.Marshal(d)
	if err != nil {
		return err
	}
	err = s.client.XAdd(ctx, &goredis.XAddArgs{
		Stream: s.shadowDiffKey(), MaxLen: ShadowDiffCap, Approx: true, Values: []any{"d", b},
	}).Err()
	if err != nil {
		return storeError("add shadow diff", err)
	}
	return nil
}

// ShadowDiffs returns the newest n diffs, newest first.
func (s *Store) ShadowDiffs(ctx context.Context, n int) ([]ShadowDiff, error) {
	msgs, err := s.client.XRevRangeN(ctx, s.shadowDiffKey(), "+", "-", int64(n)).Result()
	if err != nil {
		return nil, storeError("shadow diffs", err)
	}
	out := make([]ShadowDiff, 0, len(msgs))
	for _, m := range msgs {
		raw, _ := m.Values["d"].(string)
		var d ShadowDiff
		if err := json.Unmarshal([]byte(raw), &d); err != nil {
			return nil, fmt.Errorf("shadow diff %s: %w", m.ID, err)
		}
		d.ID = m.ID
		out = append(out, d)
	}
	return out, nil
}
