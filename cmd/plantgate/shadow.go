package main

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/plantgate/plantgate/host"
	"github.com/plantgate/plantgate/host/metrics"
	"github.com/plantgate/plantgate/host/redis"
	"github.com/plantgate/plantgate/host/wasm"
)

// maxDiffsPerSecond bounds the disagreements one gateway writes to the
// fleet's diff log: a shadow that disagrees with every request must not
// turn each one into a store write. The counters still count them all.
const maxDiffsPerSecond = 20

// shadowRecorder is the gateway's wasm.ShadowRecorder: every shadow
// decision, already compared with the live chain's (wasm's compareShadow),
// arrives at Shadow, off the request path. It counts them in /metrics and
// writes the disagreements to the fleet's capped diff log in the store.
// A decision log hooks in here too.
type shadowRecorder struct {
	metrics *metrics.ShadowMetrics
	store   *redis.Store
	gateway atomic.Value // string: the fleet id, or the listen address
	log     *slog.Logger

	mu     sync.Mutex // guards the rate window
	second time.Time
	logged int
}

var _ wasm.ShadowRecorder = (*shadowRecorder)(nil)

// Shadow implements wasm.ShadowRecorder.
func (r *shadowRecorder) Shadow(d wasm.ShadowDecision) {
	r.metrics.Decision(d.Plugin, d.Outcome)
	if d.Outcome == wasm.ShadowAgree {
		return
	}
	if !r.admit(time.Now()) {
		r.metrics.Unlogged()
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if err := r.store.AddShadowDiff(ctx, diffOf(d, r.gateway.Load().(string))); err != nil {
		r.metrics.Unlogged()
		r.log.Warn("shadow decision diff not logged", "plugin", d.Plugin, "err", err)
	}
}

// ShadowDropped implements wasm.ShadowRecorder.
func (r *shadowRecorder) ShadowDropped(plugin string) { r.metrics.Dropped(plugin) }

// admit reports whether one more diff fits this second's bound.
func (r *shadowRecorder) admit(now time.Time) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if s := now.Truncate(time.Second); !s.Equal(r.second) {
		r.second, r.logged = s, 0
	}
	if r.logged >= maxDiffsPerSecond {
		return false
	}
	r.logged++
	return true
}

// diffOf is d as the diff log stores it: the input's non-secret fields
// only (ShadowDecision holds no credential), each a client controls
// clipped (host.Clip) with its original length kept.
func diffOf(d wasm.ShadowDecision, gateway string) redis.ShadowDiff {
	side := func(v wasm.Verdict) redis.Decision {
		if v.Allow {
			return redis.Decision{Decision: "allow"}
		}
		return redis.Decision{Decision: "deny", Code: v.Code}
	}
	text := func(s string) string { return host.ClipString(s, host.RecordTextBytes) }
	out := redis.ShadowDiff{
		At: time.Now().UTC(), Gateway: gateway, RequestID: text(d.RequestID), Plugin: d.Plugin, File: d.File,
		Phase: d.Phase, Outcome: d.Outcome, Live: side(d.Live), Shadow: side(d.Shadow), Principal: text(d.Principal),
		Method: text(d.Method), Route: text(d.Route),
	}
	out.Path, out.PathBytes = host.Clip(d.Path, host.RecordPathBytes)
	if d.HasPathID {
		id := d.PathID
		out.PathID = &id
	}
	if p := d.Plant; p != nil {
		out.Plant = &redis.DiffPlant{ID: p.ID}
		out.Plant.Name, out.Plant.NameBytes = host.Clip(p.Name, host.RecordNameBytes)
		if p.HasTag {
			tag, n := host.Clip(p.Tag, host.RecordNameBytes)
			out.Plant.Tag, out.Plant.TagBytes = &tag, n
		}
	}
	return out
}
