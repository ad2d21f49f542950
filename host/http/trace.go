package http

import (
	"context"
	"strings"

	"github.com/gofiber/fiber/v2"
	"github.com/valyala/fasthttp"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/plantgate/plantgate/host"
	"github.com/plantgate/plantgate/host/telemetry"
)

// headerCarrier reads a request's W3C trace headers for the propagator.
type headerCarrier struct{ h *fasthttp.RequestHeader }

// Get copies the value: a span context must not alias fasthttp's buffers.
// A tracestate is capped (capTraceState).
func (hc headerCarrier) Get(key string) string {
	v := hc.h.Peek(key)
	if key == "tracestate" {
		return capTraceState(v)
	}
	return string(v)
}

// maxTraceState bounds what is kept of a client's tracestate, which every
// span of the request (and, linked, the new trace's root) carries to the
// trace backend: W3C Trace Context's 512 characters, the length every
// vendor is asked to propagate at least.
const maxTraceState = 512

// capTraceState keeps the leading list members of v that fit in
// maxTraceState bytes, whole (W3C Trace Context drops members from the
// end), instead of the up to 32 members of any length a client may send.
func capTraceState(v []byte) string {
	if len(v) <= maxTraceState {
		return string(v)
	}
	end := 0
	for i, b := range v[:maxTraceState+1] {
		if b == ',' {
			end = i
		}
	}
	return strings.TrimRight(string(v[:end]), " \t")
}
func (hc headerCarrier) Set(string, string) {}
func (hc headerCarrier) Keys() []string     { return nil }

// startSpan starts the request's server span and makes it the parent of
// what the request does next (plugin calls, store calls). With
// Config.TrustTraceparent it is a child of the client's valid traceparent;
// without, the root of a new trace, linked to the client's span, so the
// client picks neither the trace id (which webhook receivers see) nor the
// sampling decision. The span is named by the route template
// ("POST /plants/{id}"), never by the path; the path attribute is clipped.
func (s *Server) startSpan(c *fiber.Ctx) trace.Span {
	ctx := c.UserContext()
	incoming := trace.SpanContextFromContext(telemetry.Propagator.Extract(context.Background(), headerCarrier{&c.Request().Header}))
	method := methodName(c.Method())
	route := s.routes.label(c.Path())
	path, pathBytes := host.Clip(string(c.Path()), host.RecordPathBytes)
	opts := []trace.SpanStartOption{
		trace.WithSpanKind(trace.SpanKindServer),
		trace.WithAttributes(
			attribute.String("http.request.method", method),
			attribute.String("http.route", route),
			attribute.String("url.path", path),
			attribute.String("plantgate.request_id", string(c.Response().Header.Peek(HeaderRequestID))),
		),
	}
	if pathBytes > 0 {
		opts = append(opts, trace.WithAttributes(attribute.Int("plantgate.url.path_bytes", pathBytes)))
	}
	switch {
	case !incoming.IsValid():
	case s.cfg.TrustTraceparent:
		ctx = trace.ContextWithRemoteSpanContext(ctx, incoming)
	default:
		opts = append(opts, trace.WithNewRoot(), trace.WithLinks(trace.Link{SpanContext: incoming}))
	}
	if name := clientName(c); name != "" {
		// OpenTelemetry's semantic convention for the client certificate's subject.
		opts = append(opts, trace.WithAttributes(attribute.String("tls.client.subject", name)))
	}
	ctx, span := s.cfg.Tracer.Start(ctx, method+" "+route, opts...)
	c.SetUserContext(ctx)
	return span
}

// endSpan ends the request's span with the status the client got; a
// 5xx is an error (the server's), a 4xx is not.
func endSpan(span trace.Span, c *fiber.Ctx, code int32) {
	status := c.Response().StatusCode()
	span.SetAttributes(attribute.Int("http.response.status_code", status))
	if code != 0 {
		span.SetAttributes(attribute.Int("plantgate.error", int(code)))
	}
	if status >= 500 {
		span.SetStatus(codes.Error, "")
	}
	span.End()
}
