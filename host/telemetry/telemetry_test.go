package telemetry

import (
	"context"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/plantgate/plantgate/host"
)

func lookup(env map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := env[k]; return v, ok }
}

func TestConfigFromEnv(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name                           string
		env                            map[string]string
		enabled                        bool
		endpoint, protocol, sampler, e string
	}{
		{name: "nothing set: off", env: nil},
		{name: "base endpoint, http appends the traces path", env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318/"},
			enabled: true, endpoint: "http://collector:4318/v1/traces", protocol: "http/protobuf", sampler: "parentbased_always_on"},
		{name: "traces endpoint as is, and it wins", env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://a:4318", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://b:9999/custom"},
			enabled: true, endpoint: "http://b:9999/custom", protocol: "http/protobuf", sampler: "parentbased_always_on"},
		{name: "grpc takes the base endpoint as is", env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4317", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"},
			enabled: true, endpoint: "http://collector:4317", protocol: "grpc", sampler: "parentbased_always_on"},
		{name: "traces protocol wins", env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4317", "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "grpc"},
			enabled: true, endpoint: "http://c:4317", protocol: "grpc", sampler: "parentbased_always_on"},
		{name: "exporter otlp without endpoint: the exporter's default", env: map[string]string{"OTEL_TRACES_EXPORTER": "otlp"},
			enabled: true, protocol: "http/protobuf", sampler: "parentbased_always_on"},
		{name: "exporter none wins over an endpoint", env: map[string]string{"OTEL_TRACES_EXPORTER": "none", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://a:4318"}},
		{name: "sdk disabled wins", env: map[string]string{"OTEL_SDK_DISABLED": "true", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://a:4318"}},
		{name: "ratio sampler", env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://a:4318", "OTEL_TRACES_SAMPLER": "parentbased_traceidratio", "OTEL_TRACES_SAMPLER_ARG": "0.1"},
			enabled: true, endpoint: "http://a:4318/v1/traces", protocol: "http/protobuf", sampler: "parentbased_traceidratio=0.1"},
		{name: "always_on", env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://a:4318", "OTEL_TRACES_SAMPLER": "always_on"},
			enabled: true, endpoint: "http://a:4318/v1/traces", protocol: "http/protobuf", sampler: "always_on"},
		{name: "bad protocol", env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://a:4318", "OTEL_EXPORTER_OTLP_PROTOCOL": "http/json"},
			e: `OTEL_EXPORTER_OTLP_PROTOCOL="http/json": want http/protobuf or grpc`},
		{name: "bad exporter", env: map[string]string{"OTEL_TRACES_EXPORTER": "zipkin"},
			e: `OTEL_TRACES_EXPORTER="zipkin": want otlp or none (the only exporter plantgate has is OTLP)`},
		{name: "bad sampler", env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://a:4318", "OTEL_TRACES_SAMPLER": "sometimes"},
			e: `OTEL_TRACES_SAMPLER="sometimes": want always_on, always_off, traceidratio, parentbased_always_on, parentbased_always_off or parentbased_traceidratio`},
		{name: "bad ratio", env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://a:4318", "OTEL_TRACES_SAMPLER": "traceidratio", "OTEL_TRACES_SAMPLER_ARG": "2"},
			e: `OTEL_TRACES_SAMPLER_ARG="2": want a ratio from 0 to 1`},
		{name: "bad disabled", env: map[string]string{"OTEL_SDK_DISABLED": "maybe"}, e: `OTEL_SDK_DISABLED="maybe": want true or false`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c, err := ConfigFromEnv(lookup(tt.env))
			if tt.e != "" {
				if err == nil || err.Error() != tt.e {
					t.Fatalf("error %v, want %q", err, tt.e)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if c.Enabled != tt.enabled || c.Endpoint != tt.endpoint || (tt.enabled && (c.Protocol != tt.protocol || c.SamplerName != tt.sampler)) {
				t.Fatalf("got enabled=%v endpoint=%q protocol=%q sampler=%q", c.Enabled, c.Endpoint, c.Protocol, c.SamplerName)
			}
			if c.ServiceName != "plantgate" {
				t.Fatalf("service %q", c.ServiceName)
			}
		})
	}
}

func TestTraceParentRoundTrip(t *testing.T) {
	t.Parallel()
	const tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	ctx := ContextWithTraceParent(context.Background(), tp)
	if !trace.SpanContextFromContext(ctx).IsRemote() {
		t.Fatal("no remote span context")
	}
	if got := TraceParent(ctx); got != tp {
		t.Fatalf("TraceParent %q, want %q", got, tp)
	}
	if got := TraceParent(ContextWithTraceParent(context.Background(), "00-garbage")); got != "" {
		t.Fatalf("from a bad traceparent: %q", got)
	}
	if got := TraceParent(context.Background()); got != "" {
		t.Fatalf("without a span: %q", got)
	}
}

// TestShadowSpanAfterTheRequest: a shadow plugin decides after the request's
// span has ended; its span still joins the trace as that span's child
// (before, Wants asked whether the span was recording, and it no longer was).
func TestShadowSpanAfterTheRequest(t *testing.T) {
	t.Parallel()
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	defer tp.Shutdown(context.Background())
	tracer := tp.Tracer("test")
	ctx, req := tracer.Start(context.Background(), "POST /plants")
	req.End()
	rec := Decisions{Tracer: tracer}
	if !rec.Wants(ctx) {
		t.Fatal("Wants is false once the request's span ended: a shadow's decision would get no span")
	}
	rec.Record(ctx, &host.Decision{Plugin: "rules.shadow", Phase: "validate", Outcome: "deny", Code: 40355, Shadow: true, Start: time.Now()})
	spans := exp.GetSpans()
	if len(spans) != 2 {
		t.Fatalf("%d spans, want the request's and the shadow's", len(spans))
	}
	s := spans[1]
	if s.Name != "shadow validate rules.shadow" || s.Parent.SpanID() != req.SpanContext().SpanID() || s.SpanContext.TraceID() != req.SpanContext().TraceID() {
		t.Fatalf("shadow span %q, parent %v, trace %v; want a child of %v", s.Name, s.Parent.SpanID(), s.SpanContext.TraceID(), req.SpanContext().SpanID())
	}

	_, unsampled := sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.NeverSample())).Tracer("test").Start(context.Background(), "GET /plants/{id}")
	if rec.Wants(trace.ContextWithSpan(context.Background(), unsampled)) {
		t.Fatal("Wants is true for a request whose span is not sampled")
	}
}
