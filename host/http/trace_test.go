package http_test

import (
	"context"
	nethttp "net/http"
	"strings"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/plantgate/plantgate/host/telemetry"
)

// In process, through Fiber's real stack, trusting traceparent: a request
// with a traceparent is a server span under the caller's span; each plugin
// call and store call is its child; a request whose caller did not sample
// it records nothing.
func TestRequestSpans(t *testing.T) {
	t.Parallel()
	spans := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(spans))
	t.Cleanup(func() { tp.Shutdown(context.Background()) })
	tracer := tp.Tracer("test")
	g := newGateway(t, gatewayOptions{tracer: tracer, decisions: telemetry.Decisions{Tracer: tracer}, trustTraceparent: true})

	req, _ := nethttp.NewRequest("POST", "http://plantgate.test/plants", strings.NewReader(`{"id":3,"name":"Ivy"}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+writerToken)
	req.Header.Set("traceparent", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
	if r := g.do(req); r.status != 200 {
		t.Fatalf("POST: %d %s", r.status, r.body)
	}
	byName := map[string]sdktrace.ReadOnlySpan{}
	for _, s := range spans.GetSpans().Snapshots() {
		byName[s.Name()] = s
	}
	server, ok := byName["POST /plants"]
	if !ok || server.Parent().SpanID().String() != "00f067aa0ba902b7" || server.SpanContext().TraceID().String() != "4bf92f3577b34da6a3ce929d0e0e4736" || server.SpanKind() != trace.SpanKindServer {
		t.Fatalf("server span: %v", byName)
	}
	for _, name := range []string{"plugin authorize bearer-auth", "plugin validate plant-rules", "redis token", "redis create_plant"} {
		s, ok := byName[name]
		if !ok || s.Parent().SpanID() != server.SpanContext().SpanID() {
			t.Fatalf("%s: missing or not under the server span (%v)", name, byName)
		}
	}
	if len(byName) != 5 {
		t.Fatalf("%d spans: %v", len(byName), byName)
	}

	spans.Reset()
	req, _ = nethttp.NewRequest("GET", "http://plantgate.test/plants/3", nil)
	req.Header.Set("Authorization", "Bearer "+writerToken)
	req.Header.Set("traceparent", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00") // not sampled
	g.do(req)
	if n := len(spans.GetSpans()); n != 0 {
		t.Fatalf("%d spans of a request its caller did not sample", n)
	}
}
