package webhook_test

import (
	"context"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/plantgate/plantgate/host"
	"github.com/plantgate/plantgate/host/webhook"
)

// A create made in a traced span keeps that span's traceparent with its
// outbox event and its delivery record, on every store; the delivery is a
// span of the same trace, a child of the writer's span, and its POST
// carries that delivery span's traceparent. A create without one is
// delivered with a traceparent of a new trace.
func TestDeliveryJoinsTheWritersTrace(t *testing.T) {
	t.Parallel()
	backends(t, func(t *testing.T, newB func(t *testing.T) backend) {
		b := newB(t)
		srv, hits := receiver(t, ok)
		ep := b.addEndpoint(t, srv.URL)
		spans := tracetest.NewInMemoryExporter()
		tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(spans))
		t.Cleanup(func() { tp.Shutdown(context.Background()) })
		b.start(t, func(o *webhook.Options) { o.Tracer = tp.Tracer("test") })

		const writer = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
		ctx := host.WithTraceParent(context.Background(), writer)
		if created, err := b.store.CreatePlant(ctx, host.Plant{ID: 5, Name: "Fern"}); err != nil || !created {
			t.Fatalf("create: %v %v", created, err)
		}
		h := next(t, hits)
		got := h.header.Get("traceparent")
		id := h.header.Get("webhook-id")
		d := b.delivery(t, id+"_"+ep.ID, host.DeliveryDelivered)
		if d.Event.TraceParent != writer {
			t.Fatalf("delivery record's traceparent %q, want the writer's %q", d.Event.TraceParent, writer)
		}
		ended := spans.GetSpans()
		if len(ended) != 1 {
			t.Fatalf("%d spans, want 1: %v", len(ended), ended)
		}
		s := ended[0]
		if s.Name != "webhook plant.created" || s.Parent.TraceID().String() != "4bf92f3577b34da6a3ce929d0e0e4736" || s.Parent.SpanID().String() != "00f067aa0ba902b7" {
			t.Fatalf("span %s, parent %v", s.Name, s.Parent)
		}
		if want := "00-" + s.SpanContext.TraceID().String() + "-" + s.SpanContext.SpanID().String() + "-01"; got != want {
			t.Fatalf("POST traceparent %q, want the delivery span's %q", got, want)
		}

		// No traceparent with the write: a trace of the delivery's own.
		if created, err := b.store.CreatePlant(context.Background(), host.Plant{ID: 6, Name: "Ivy"}); err != nil || !created {
			t.Fatalf("create: %v %v", created, err)
		}
		h = next(t, hits)
		d = b.delivery(t, h.header.Get("webhook-id")+"_"+ep.ID, host.DeliveryDelivered)
		if d.Event.TraceParent != "" || len(h.header.Get("traceparent")) != 55 || h.header.Get("traceparent")[3:35] == "4bf92f3577b34da6a3ce929d0e0e4736" {
			t.Fatalf("untraced write: record %q, header %q", d.Event.TraceParent, h.header.Get("traceparent"))
		}
	})
}
