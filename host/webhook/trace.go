package webhook

import (
	"context"
	"net/url"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/plantgate/plantgate/host"
	"github.com/plantgate/plantgate/host/telemetry"
)

// startDeliverySpan starts the span of one delivery attempt: a child of
// the span that wrote the event (its traceparent travelled with the event
// through the outbox and the delivery queue), or a new trace when the
// write was not traced.
func startDeliverySpan(ctx context.Context, tr trace.Tracer, target string, ev host.Event) (context.Context, trace.Span) {
	parent := telemetry.ContextWithTraceParent(ctx, ev.TraceParent)
	attrs := []attribute.KeyValue{
		attribute.String("http.request.method", "POST"),
		attribute.String("plantgate.webhook.event_id", ev.ID),
		attribute.String("plantgate.webhook.type", ev.Type),
	}
	// The host only: a URL's path or query may hold a secret.
	if u, err := url.Parse(target); err == nil {
		attrs = append(attrs, attribute.String("server.address", u.Hostname()))
	}
	return tr.Start(parent, "webhook "+ev.Type, trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(attrs...))
}

func endDeliverySpan(span trace.Span, status int, err error) {
	if status != 0 {
		span.SetAttributes(attribute.Int("http.response.status_code", status))
	}
	switch {
	case err != nil:
		span.SetStatus(codes.Error, err.Error())
	case status < 200 || status > 299:
		span.SetStatus(codes.Error, "answered "+itoa(status))
	}
	span.End()
}

func itoa(n int) string { return attribute.IntValue(n).Emit() }
