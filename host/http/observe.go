package http

import (
	"crypto/rand"
	"encoding/hex"
	"log/slog"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/gofiber/fiber/v2"

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

// requestID returns the incoming id when it is 1–128 characters of
// letters, digits and ._:- (nothing a log or header injection could use),
// else a new one.
func requestID(incoming string) string {
	if n := len(incoming); n > 0 && n <= maxRequestID && strings.IndexFunc(incoming, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == ':' || r == '-')
	}) < 0 {
		return strings.Clone(incoming)
	}
	return idPrefix + strconv.FormatUint(idCounter.Add(1), 16)
}

// route is the metrics label of a path: one of the API's routes, or
// "other", so that scanning random paths cannot grow the label set.
//
// It returns constants, never path: Fiber's path aliases a buffer that the
// next request reuses, and a label outlives the request.
func route(path string) string {
	switch path {
	case "/plants":
		return "/plants"
	case "/openapi.yaml":
		return "/openapi.yaml"
	case "/healthz":
		return "/healthz"
	case "/readyz":
		return "/readyz"
	}
	if len(path) > len("/plants/") && strings.HasPrefix(path, "/plants/") && strings.IndexByte(path[len("/plants/"):], '/') < 0 {
		return "/plants/{id}"
	}
	return "other"
}

// observe wraps every request: it sets the request id, answers errors here
// rather than in the app's ErrorHandler (so what it reports is the status
// the client gets), and then reports the request to Observe and the access
// log.
func (s *Server) observe(c *fiber.Ctx) error {
	start := time.Now()
	id := requestID(c.Get(HeaderRequestID))
	c.Set(HeaderRequestID, id)
	var trace host.Trace
	if s.cfg.AccessLog {
		c.SetUserContext(host.WithTrace(c.UserContext(), &trace))
	}
	var code int32
	if err := c.Next(); err != nil {
		code = asHostError(err).Code
		if err := s.handleError(c, err); err != nil {
			return err
		}
	}
	status := c.Response().StatusCode()
	took := time.Since(start)
	if s.cfg.Observe != nil {
		s.cfg.Observe(route(c.Path()), status, took)
	}
	if !s.cfg.AccessLog {
		return nil
	}
	attrs := make([]slog.Attr, 0, 9)
	attrs = append(attrs,
		slog.String("request_id", id),
		slog.String("method", c.Method()),
		slog.String("path", c.Path()),
		slog.Int("status", status),
		slog.Duration("latency", took),
	)
	if code != 0 {
		attrs = append(attrs, slog.Int("error", int(code)))
	}
	if p, ok := c.Locals(localPrincipal).(string); ok {
		attrs = append(attrs, slog.String("principal", p))
	}
	if trace.Plugin != "" {
		attrs = append(attrs, slog.String("plugin", trace.Plugin), slog.String("phase", trace.Phase))
	}
	s.cfg.Logger.LogAttrs(c.UserContext(), slog.LevelInfo, "request", attrs...)
	return nil
}
