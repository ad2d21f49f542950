package redis

import (
	"bytes"
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
// credential, nor a digest of it. Its writer bounds every field a client
// controls (host.Clip): a clipped path, name or tag keeps its first bytes
// and its original length (PathBytes, NameBytes, TagBytes), so an entry
// is a few KiB whatever the request.
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
	PathBytes int        `json:"path_bytes,omitempty"` // the path's length when clipped
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
	ID        int64   `json:"id"`
	Name      string  `json:"name"`
	NameBytes int     `json:"name_bytes,omitempty"` // the name's length when clipped
	Tag       *string `json:"tag,omitempty"`
	TagBytes  int     `json:"tag_bytes,omitempty"` // the tag's length when clipped
}

func (s *Store) shadowDiffKey() string { return s.opts.KeyPrefix + "{shadow}:diffs" }

// AddShadowDiff appends d to the fleet's diff log, trimming it to about
// ShadowDiffCap entries.
func (s *Store) AddShadowDiff(ctx context.Context, d ShadowDiff) error {
	d.ID = ""
	// Without HTML escaping: '<' stays one byte, not six.
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(d); err != nil {
		return err
	}
	err := s.client.XAdd(ctx, &goredis.XAddArgs{
		Stream: s.shadowDiffKey(), MaxLen: ShadowDiffCap, Approx: true, Values: []any{"d", bytes.TrimSuffix(b.Bytes(), []byte("\n"))},
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
