package telemetry

import (
	"context"
	"encoding/hex"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/plantgate/plantgate/host"
)

// Span attributes of a plugin call.
const (
	AttrPlugin     = "plantgate.plugin.name"
	AttrPluginSHA  = "plantgate.plugin.sha256"
	AttrPhase      = "plantgate.plugin.phase"
	AttrDecision   = "plantgate.plugin.decision" // allow, deny, fault, busy
	AttrCode       = "plantgate.plugin.code"     // the error code given, on deny and fault
	AttrShadow     = "plantgate.plugin.shadow"
	AttrGuestNanos = "plantgate.plugin.guest_time_ns"
)

// Decisions makes a span of each plugin decision, a child of the request's
// span: it is a host.DecisionRecorder for wasm.Options.Decisions, beside
// the decision log (host.Recorders).
type Decisions struct{ Tracer trace.Tracer }

var _ host.DecisionRecorder = Decisions{}

// Wants implements host.DecisionRecorder: the request's span is sampled.
// A shadow plugin decides after the answer, when the request's span has
// usually ended (no longer recording): its sampled flag still says the
// trace is kept, and the shadow's span joins it as a child.
func (r Decisions) Wants(ctx context.Context) bool {
	span := trace.SpanFromContext(ctx)
	return span.IsRecording() || span.SpanContext().IsSampled()
}

// Record implements host.DecisionRecorder. The span is made after the
// call, with the call's own start and end times: the guest call itself is
// not slowed by a span's bookkeeping.
func (r Decisions) Record(ctx context.Context, d *host.Decision) {
	attrs := []attribute.KeyValue{
		attribute.String(AttrPlugin, d.Plugin),
		attribute.String(AttrPhase, d.Phase),
		attribute.String(AttrDecision, d.Outcome),
		attribute.Int64(AttrGuestNanos, d.Took.Nanoseconds()),
		attribute.String(AttrPluginSHA, hex.EncodeToString(d.SHA256[:])),
	}
	if d.Code != 0 {
		attrs = append(attrs, attribute.Int(AttrCode, int(d.Code)))
	}
	if d.Shadow {
		attrs = append(attrs, attribute.Bool(AttrShadow, true))
	}
	name := "plugin " + d.Phase + " " + d.Plugin
	if d.Shadow {
		name = "shadow " + d.Phase + " " + d.Plugin
	}
	_, span := r.Tracer.Start(ctx, name, trace.WithTimestamp(d.Start), trace.WithAttributes(attrs...))
	if d.Outcome == "fault" || d.Outcome == "busy" {
		span.SetStatus(codes.Error, d.Outcome)
	}
	span.End(trace.WithTimestamp(d.Start.Add(d.Took)))
}
