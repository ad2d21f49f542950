package host

import (
	"context"
	"time"
)

// Decision is what one plugin decided on one request: the unit of the
// decision log (host/decisionlog) and of a plugin call's trace span
// (host/telemetry). Live and shadow calls are reported the same way, through
// a DecisionRecorder:
//
//	if rec != nil && rec.Wants(ctx) {
//		rec.Record(ctx, &host.Decision{Plugin: name, Phase: "authorize", …})
//	}
//
// Its strings may be borrowed from the request (Fiber's buffers): a recorder
// copies what it keeps before Record returns.
type Decision struct {
	Plugin string   // "bearer-auth"
	SHA256 [32]byte // the module's digest: the version that decided
	Phase  string   // "authorize" or "validate"
	Shadow bool     // a shadow plugin's decision, not enforced

	// Outcome is "allow", "deny", "fault" or "busy" (the wasm package's
	// Outcome constants); Code the error code the caller was given (0 on
	// allow), Message the deny's message (never guest text from a fault).
	Outcome string
	Code    int32
	Message string
	// Principal is who an authorize plugin allowed the request as.
	Principal string

	Start time.Time     // when the call began, pool wait included
	Took  time.Duration // how long it took, pool wait included

	Input DecisionInput
}

// DecisionInput is the canonical input's non-secret fields: what a
// decision log may keep. The credential is never here; the request id and
// the client's address come from the context's Exchange.
type DecisionInput struct {
	Method, Path, Route string
	PathID              int64
	HasPathID           bool
	// Plant is the validate phase's canonical plant; nil for authorize.
	Plant *Plant
	// Principal is who the authorize chain allowed the request as
	// (validate phase).
	Principal string
}

// DecisionRecorder receives decisions. Wants is asked first, so that a
// caller builds a Decision only when it will be used: with nothing to
// record, a request pays one call and no allocation.
type DecisionRecorder interface {
	// Wants reports whether a decision on the request of ctx is recorded
	// (a decision log samples requests; a tracer records sampled spans).
	Wants(ctx context.Context) bool
	// Record takes one decision. It never blocks on I/O.
	Record(ctx context.Context, d *Decision)
}

// Recorders returns one DecisionRecorder for all of rs, skipping nil ones;
// nil when none is left.
func Recorders(rs ...DecisionRecorder) DecisionRecorder {
	var all recorders
	for _, r := range rs {
		if r != nil {
			all = append(all, r)
		}
	}
	switch len(all) {
	case 0:
		return nil
	case 1:
		return all[0]
	}
	return all
}

type recorders []DecisionRecorder

func (rs recorders) Wants(ctx context.Context) bool {
	for _, r := range rs {
		if r.Wants(ctx) {
			return true
		}
	}
	return false
}

func (rs recorders) Record(ctx context.Context, d *Decision) {
	for _, r := range rs {
		if r.Wants(ctx) {
			r.Record(ctx, d)
		}
	}
}

type traceParentKey struct{}

// WithTraceParent returns ctx carrying a W3C traceparent value: the span a
// store write happens in, so that the outbox event it writes carries it and
// the webhook delivery joins the same trace (host/telemetry sets it,
// host/redis reads it).
func WithTraceParent(ctx context.Context, traceparent string) context.Context {
	return context.WithValue(ctx, traceParentKey{}, traceparent)
}

// TraceParentFrom returns the traceparent in ctx, or "".
func TraceParentFrom(ctx context.Context) string {
	s, _ := ctx.Value(traceParentKey{}).(string)
	return s
}
