package http

import (
	"strings"

	"github.com/gofiber/fiber/v2"
	"github.com/valyala/fasthttp"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/plantgate/plantgate/host/telemetry"
)

// headerCarrier reads a request's W3C trace headers for the propagator.
type headerCarrier struct{ h *fasthttp.RequestHeader }

// Get copies the value: a span context must not alias fasthttp's buffers.
func (hc headerCarrier) Get(key string) string { return string(hc.h.Peek(key)) }
func (hc headerCarrier) Set(string, string)    {}
func (hc headerCarrier) Keys() []string        { return nil }

// startSpan starts the request's server span, a child of its traceparent
// when it has a valid one, and makes it the parent of what the request
// does next (plugin calls, store calls). The span is named by the route
// template ("POST /plants/{id}"), never by the path.
func (s *Server) startSpan(c *fiber.Ctx) trace.Span {
	ctx := telemetry.Propagator.Extract(c.UserContext(), headerCarrier{&c.Request().Header})
	method := methodName(c.Method())
	route := s.routes.label(c.Path())
	ctx, span := s.cfg.Tracer.Start(ctx, method+" "+route,
		trace.WithSpanKind(trace.SpanKindServer),
		trace.WithAttributes(
			attribute.String("http.request.method", method),
			attribute.String("http.route", route),
			attribute.String("url.path", strings.Clone(c.Path())),
			attribute.String("plantgate.request_id", string(c.Response().Header.Peek(HeaderRequestID))),
		))
	if name := clientName(c); name != "" {
		// OpenTelemetry's semantic convention for the client certificate's subject.
		span.SetAttributes(attribute.String("tls.client.subject", name))
	}
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
