// Package telemetry exports OpenTelemetry traces of the gateway, configured
// by the standard OTEL_* environment variables, and holds the pieces the
// other packages trace with: spans of plugin decisions (Decisions), of
// store calls (Store), and the W3C propagator.
//
// # When tracing is on
//
// Off unless one of these is set: OTEL_EXPORTER_OTLP_TRACES_ENDPOINT,
// OTEL_EXPORTER_OTLP_ENDPOINT, or OTEL_TRACES_EXPORTER=otlp (then the
// exporter's default endpoint, localhost:4318 or localhost:4317, is used).
// OTEL_SDK_DISABLED=true or OTEL_TRACES_EXPORTER=none turn it off whatever
// else is set. (The specification's default exporter is otlp; a gateway
// that would send spans to localhost by default is not what an operator
// expects, so here an endpoint or the exporter must be named.)
//
// # Variables read
//
//	OTEL_EXPORTER_OTLP_TRACES_ENDPOINT  URL, used as is (http/protobuf: include /v1/traces)
//	OTEL_EXPORTER_OTLP_ENDPOINT         base URL; http/protobuf appends /v1/traces
//	OTEL_EXPORTER_OTLP_TRACES_PROTOCOL  wins over OTEL_EXPORTER_OTLP_PROTOCOL
//	OTEL_EXPORTER_OTLP_PROTOCOL         http/protobuf (default) or grpc
//	OTEL_TRACES_SAMPLER                 always_on, always_off, traceidratio,
//	                                    parentbased_always_on (default),
//	                                    parentbased_always_off, parentbased_traceidratio
//	OTEL_TRACES_SAMPLER_ARG             the ratio of the *traceidratio samplers (default 1)
//	OTEL_SERVICE_NAME                   service.name (default plantgate)
//	OTEL_TRACES_EXPORTER                otlp or none
//	OTEL_SDK_DISABLED                   true: no tracing
//
// The exporters read their other variables themselves from the process
// environment (OTEL_EXPORTER_OTLP_HEADERS, _TIMEOUT, _CERTIFICATE, …).
package telemetry

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// Protocols of OTEL_EXPORTER_OTLP_PROTOCOL.
const (
	ProtocolHTTP = "http/protobuf"
	ProtocolGRPC = "grpc"
)

// Config is tracing's configuration, as the environment gives it.
type Config struct {
	Enabled     bool
	Endpoint    string // a full URL; "" for the exporter's default
	Protocol    string // ProtocolHTTP or ProtocolGRPC
	Sampler     sdktrace.Sampler
	SamplerName string // for the log line
	ServiceName string
}

// ConfigFromEnv reads the OTEL_* variables through lookup (os.LookupEnv).
// A value it does not know is an error naming the variable.
func ConfigFromEnv(lookup func(string) (string, bool)) (Config, error) {
	get := func(k string) string {
		v, _ := lookup(k)
		return strings.TrimSpace(v)
	}
	c := Config{Protocol: ProtocolHTTP, ServiceName: "plantgate"}
	if v := get("OTEL_SERVICE_NAME"); v != "" {
		c.ServiceName = v
	}
	if v := get("OTEL_SDK_DISABLED"); v != "" {
		off, err := strconv.ParseBool(v)
		if err != nil {
			return c, fmt.Errorf("OTEL_SDK_DISABLED=%q: want true or false", v)
		}
		if off {
			return c, nil
		}
	}
	tracesEndpoint, endpoint := get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"), get("OTEL_EXPORTER_OTLP_ENDPOINT")
	switch v := get("OTEL_TRACES_EXPORTER"); v {
	case "none":
		return c, nil
	case "otlp":
		c.Enabled = true
	case "":
		c.Enabled = tracesEndpoint != "" || endpoint != ""
	default:
		return c, fmt.Errorf("OTEL_TRACES_EXPORTER=%q: want otlp or none (the only exporter plantgate has is OTLP)", v)
	}
	if !c.Enabled {
		return c, nil
	}
	proto := get("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
	name := "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"
	if proto == "" {
		proto, name = get("OTEL_EXPORTER_OTLP_PROTOCOL"), "OTEL_EXPORTER_OTLP_PROTOCOL"
	}
	switch proto {
	case "", ProtocolHTTP:
		c.Protocol = ProtocolHTTP
	case ProtocolGRPC:
		c.Protocol = ProtocolGRPC
	default:
		return c, fmt.Errorf("%s=%q: want http/protobuf or grpc", name, proto)
	}
	switch {
	case tracesEndpoint != "":
		c.Endpoint = tracesEndpoint
	case endpoint != "" && c.Protocol == ProtocolHTTP:
		c.Endpoint = strings.TrimSuffix(endpoint, "/") + "/v1/traces"
	case endpoint != "":
		c.Endpoint = endpoint
	}
	var err error
	c.Sampler, c.SamplerName, err = sampler(get("OTEL_TRACES_SAMPLER"), get("OTEL_TRACES_SAMPLER_ARG"))
	return c, err
}

func sampler(name, arg string) (sdktrace.Sampler, string, error) {
	ratio := 1.0
	if arg != "" && strings.HasSuffix(name, "traceidratio") {
		r, err := strconv.ParseFloat(arg, 64)
		if err != nil || r < 0 || r > 1 {
			return nil, "", fmt.Errorf("OTEL_TRACES_SAMPLER_ARG=%q: want a ratio from 0 to 1", arg)
		}
		ratio = r
	}
	switch name {
	case "always_on":
		return sdktrace.AlwaysSample(), name, nil
	case "always_off":
		return sdktrace.NeverSample(), name, nil
	case "traceidratio":
		return sdktrace.TraceIDRatioBased(ratio), name + "=" + strconv.FormatFloat(ratio, 'g', -1, 64), nil
	case "", "parentbased_always_on":
		return sdktrace.ParentBased(sdktrace.AlwaysSample()), "parentbased_always_on", nil
	case "parentbased_always_off":
		return sdktrace.ParentBased(sdktrace.NeverSample()), name, nil
	case "parentbased_traceidratio":
		return sdktrace.ParentBased(sdktrace.TraceIDRatioBased(ratio)), name + "=" + strconv.FormatFloat(ratio, 'g', -1, 64), nil
	}
	return nil, "", fmt.Errorf("OTEL_TRACES_SAMPLER=%q: want always_on, always_off, traceidratio, parentbased_always_on, parentbased_always_off or parentbased_traceidratio", name)
}

// Propagator is the W3C Trace Context propagator: traceparent and
// tracestate, read from requests and written on webhook deliveries.
var Propagator propagation.TextMapPropagator = propagation.TraceContext{}

// Tracing is a running tracer provider and its exporter.
type Tracing struct {
	Config   Config
	Tracer   trace.Tracer
	provider *sdktrace.TracerProvider
}

// instrumentation is the tracer's name: the instrumentation scope.
const instrumentation = "github.com/plantgate/plantgate"

// Start builds the exporter and tracer provider of c. Spans are batched
// and sent in the background; Shutdown sends what is left.
func Start(ctx context.Context, c Config, version string) (*Tracing, error) {
	if !c.Enabled {
		return nil, nil
	}
	var exp sdktrace.SpanExporter
	var err error
	switch c.Protocol {
	case ProtocolGRPC:
		var opts []otlptracegrpc.Option
		if c.Endpoint != "" {
			opts = append(opts, otlptracegrpc.WithEndpointURL(c.Endpoint))
		}
		exp, err = otlptracegrpc.New(ctx, opts...)
	default:
		var opts []otlptracehttp.Option
		if c.Endpoint != "" {
			opts = append(opts, otlptracehttp.WithEndpointURL(c.Endpoint))
		}
		exp, err = otlptracehttp.New(ctx, opts...)
	}
	if err != nil {
		return nil, fmt.Errorf("otlp trace exporter (%s %s): %w", c.Protocol, c.Endpoint, err)
	}
	sampler := c.Sampler
	if sampler == nil {
		sampler = sdktrace.ParentBased(sdktrace.AlwaysSample())
	}
	res := resource.NewSchemaless(
		attribute.String("service.name", c.ServiceName),
		attribute.String("service.version", version),
	)
	tp := sdktrace.NewTracerProvider(
		sdktrace.WithBatcher(exp, sdktrace.WithBatchTimeout(time.Second)),
		sdktrace.WithSampler(sampler),
		sdktrace.WithResource(res),
	)
	return &Tracing{Config: c, Tracer: tp.Tracer(instrumentation, trace.WithInstrumentationVersion(version)), provider: tp}, nil
}

// ForceFlush exports every ended span now (tests).
func (t *Tracing) ForceFlush(ctx context.Context) error { return t.provider.ForceFlush(ctx) }

// Shutdown exports the spans still queued and stops the exporter.
func (t *Tracing) Shutdown(ctx context.Context) error { return t.provider.Shutdown(ctx) }

// TraceParent returns the W3C traceparent of the span in ctx, "" when it
// has none.
func TraceParent(ctx context.Context) string {
	sc := trace.SpanContextFromContext(ctx)
	if !sc.IsValid() {
		return ""
	}
	var b [55]byte
	tid, sid := sc.TraceID(), sc.SpanID()
	out := append(b[:0], "00-"...)
	out = appendHex(out, tid[:])
	out = append(out, '-')
	out = appendHex(out, sid[:])
	out = append(out, '-')
	out = appendHex(out, []byte{byte(sc.TraceFlags())})
	return string(out)
}

func appendHex(dst, src []byte) []byte {
	const digits = "0123456789abcdef"
	for _, c := range src {
		dst = append(dst, digits[c>>4], digits[c&0xf])
	}
	return dst
}

// ContextWithTraceParent returns ctx with the remote span context a
// traceparent names as its parent; ctx unchanged when traceparent is not a
// valid one.
func ContextWithTraceParent(ctx context.Context, traceparent string) context.Context {
	if traceparent == "" {
		return ctx
	}
	return Propagator.Extract(ctx, propagation.MapCarrier{"traceparent": traceparent})
}
