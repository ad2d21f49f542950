package http

import (
	"crypto/rand"
	"encoding/hex"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/gofiber/fiber/v2"
	oteltrace "go.opentelemetry.io/otel/trace"

	"github.com/plantgate/plantgate/host"
)

// HeaderRequestID carries a request's id. An incoming one is kept when it
// is sane (see requestID); the response always carries the id used.
const HeaderRequestID = "X-Request-ID"

// maxRequestID bounds an incoming request id.
const maxRequestID = 128

// Generated request ids are a per-process random prefix and a counter:
// unique within the process, unlikely to collide across processes, and
// free of a random read per request.
var (
	idPrefix  = newIDPrefix()
	idCounter atomic.Uint64
)

func newIDPrefix() string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:]) + "-"
}

// SaneRequestID reports whether id is an X-Request-ID the gateway keeps,
// answers with and shows plugins as the request id; any other it replaces
// with one of its own. `plantgate plugin run` refuses any other, which no
// plugin could see.
func SaneRequestID(id string) bool { return saneID([]byte(id)) }

// saneID reports whether an incoming id is 1–128 characters of letters,
// digits and ._:- (nothing a log or header injection could use).
func saneID(incoming []byte) bool {
	if n := len(incoming); n == 0 || n > maxRequestID {
		return false
	}
	for _, r := range incoming {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == ':' || r == '-') {
			return false
		}
	}
	return true
}

// observe wraps every routed request: it sets the request id, answers
// errors here rather than in the app's ErrorHandler (so what it reports is
// the status the client gets), and then reports the request.
func (s *Server) observe(c *fiber.Ctx) error {
	start := time.Now()
	id := setRequestID(c, s.cfg.AccessLog)
	var trace host.Trace
	if s.cfg.AccessLog {
		c.SetUserContext(host.WithTrace(c.UserContext(), &trace))
	}
	var span oteltrace.Span
	if s.cfg.Tracer != nil {
		span = s.startSpan(c)
	}
	var code int32
	if err := c.Next(); err != nil {
		code = asHostError(err).Code
		if err := s.handleError(c, err); err != nil {
			if span != nil {
				endSpan(span, c, code)
			}
			return err
		}
	}
	if span != nil {
		endSpan(span, c, code)
	}
	s.report(c, id, start, code, &trace)
	return nil
}

// setRequestID gives the response the request's id: the incoming one when
// it is sane, else a new one. It returns the id when keep (the access log
// reads it), else "": the header is written from the bytes, and a request
// without the access log pays no string for it.
func setRequestID(c *fiber.Ctx, keep bool) string {
	id := c.Request().Header.Peek(HeaderRequestID)
	if !saneID(id) {
		var buf [64]byte
		id = strconv.AppendUint(append(buf[:0], idPrefix...), idCounter.Add(1), 16)
	}
	c.Response().Header.SetBytesV(HeaderRequestID, id)
	if !keep {
		return ""
	}
	return string(id)
}

// report sends the answered request to Observe and the access log. code is
// its error code, 0 for none; trace, when not nil, names the plugin that
// decided.
//
// Nothing it logs aliases the request: Fiber's strings point into buffers
// that fasthttp reuses for the next request, while a slog.Handler may keep
// a record for later (batching, an in-memory sink).
func (s *Server) report(c *fiber.Ctx, id string, start time.Time, code int32, trace *host.Trace) {
	status := c.Response().StatusCode()
	took := since(start)
	if s.cfg.Observe != nil {
		s.cfg.Observe(s.routes.label(c.Path()), status, took)
	}
	if !s.cfg.AccessLog {
		return
	}
	attrs := make([]slog.Attr, 0, 9)
	attrs = append(attrs,
		slog.String("request_id", id),
		slog.String("method", methodName(c.Method())),
		slog.String("path", strings.Clone(c.Path())),
		slog.Int("status", status),
		slog.Duration("latency", took),
	)
	if code != 0 {
		attrs = append(attrs, slog.Int("error", int(code)))
	}
	if p, ok := c.Locals(localPrincipal).(string); ok {
		attrs = append(attrs, slog.String("principal", p))
	}
	if name := clientName(c); name != "" {
		attrs = append(attrs, slog.String("tls_client", name))
	}
	if trace != nil && trace.Plugin != "" {
		attrs = append(attrs, slog.String("plugin", trace.Plugin), slog.String("phase", trace.Phase))
	}
	s.cfg.Logger.LogAttrs(c.UserContext(), slog.LevelInfo, "request", attrs...)
}

// methodName is m as a string that does not alias the request: a constant
// for the methods Fiber routes, else a copy.
func methodName(m string) string {
	if c, ok := knownMethod(m); ok {
		return c
	}
	return strings.Clone(m)
}

// knownMethod returns the constant for m when Fiber routes m
// (fiber.DefaultMethods).
func knownMethod(m string) (string, bool) {
	i := slices.Index(fiber.DefaultMethods, m)
	if i < 0 {
		return "", false
	}
	return fiber.DefaultMethods[i], true
}
