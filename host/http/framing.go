package http

import (
	"bytes"
	"errors"
	"net"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/valyala/fasthttp"

	"github.com/plantgate/plantgate/host"
)

// Requests that never reach a route are answered here, on the fasthttp
// server itself: those fasthttp cannot read (headers too large, body too
// large, too slow, malformed), and those it reads but this gateway refuses
// because two parsers could frame them differently (request smuggling).
// Each gets what a routed request gets (an X-Request-ID, the Error body, a
// metric and an access line) and the connection is closed after the
// answer: once framing is in doubt, no later byte on it can be trusted.

// hookServer puts refuse in front of Fiber's handler and in place of
// Fiber's serverErrorHandler, which calls the app's ErrorHandler without
// the middleware (no request id, metric or access line) and maps every
// read failure it does not know to one code.
func (s *Server) hookServer() {
	srv := s.app.Server()
	// Keep request bytes out of the error texts fasthttp may log itself;
	// they may hold a credential. Some texts still quote a header value,
	// so refuse never logs them.
	srv.SecureErrorLogMessage = true
	// A connection on which no byte of a request arrived within the read
	// timeout is closed without an answer, as fasthttp closes an idle
	// keep-alive one. Clients open spare connections and keep them idle
	// (net/http does when a dial loses the race to a freed connection): an
	// answer there answers nothing (net/http logs "Unsolicited response"),
	// and one that crosses the client's first request on it is taken for
	// that request's (found by plantgate-chaos). fasthttp tells a started
	// request only through ConnState: a connection goes active at its first
	// byte.
	var started sync.Map // net.Conn → struct{}: some request byte arrived
	srv.ConnState = func(c net.Conn, st fasthttp.ConnState) {
		switch st {
		case fasthttp.StateActive:
			started.Store(c, struct{}{})
		case fasthttp.StateClosed, fasthttp.StateHijacked:
			started.Delete(c)
		}
	}
	srv.ErrorHandler = func(fctx *fasthttp.RequestCtx, err error) {
		if s.handshakeFailed(fctx, err) {
			return
		}
		var ne net.Error
		if _, ok := started.Load(fctx.Conn()); !ok && errors.As(err, &ne) && ne.Timeout() {
			// fasthttp writes whatever this leaves in the response; on a
			// closed connection that write fails, unseen.
			_ = fctx.Conn().Close()
			return
		}
		s.refuse(fctx, readError(err))
	}
	next := srv.Handler
	srv.Handler = func(fctx *fasthttp.RequestCtx) {
		if e := screen(&fctx.Request.Header); e != nil {
			s.refuse(fctx, e)
			return
		}
		next(fctx)
	}
}

// refuse answers fctx with e and closes the connection.
func (s *Server) refuse(fctx *fasthttp.RequestCtx, e *host.Error) {
	start := fctx.Time() // the handler's start, or for a read failure the connection's or the previous request's
	c := s.app.AcquireCtx(fctx)
	defer s.app.ReleaseCtx(c)
	id := setRequestID(c, s.cfg.AccessLog)
	if s.origins != nil {
		s.corsHeaders(c) // a page from an allowed origin may read why
	}
	_ = s.handleError(c, e) // it only writes to the response
	fctx.SetConnectionClose()
	s.report(c, id, start, e.Code, nil)
}

func framing(msg string) *host.Error { return &host.Error{Code: host.ErrFraming, Message: msg} }

// readError maps what fasthttp's request reader returned to the error
// table. fasthttp exports few of its parse errors; the rest are matched by
// text, and a text that changes degrades to 40011, still 400 and a close
// (the raw tests pin each code).
func readError(err error) *host.Error {
	var small *fasthttp.ErrSmallBuffer
	var ne net.Error
	var chunk fasthttp.ErrBrokenChunk
	msg := err.Error()
	switch {
	case errors.As(err, &small):
		return &host.Error{Code: host.ErrHeadersTooLarge, Message: "request headers are too large"}
	case errors.Is(err, fasthttp.ErrBodyTooLarge):
		return &host.Error{Code: host.ErrBodyTooLarge, Message: "request body is larger than the limit"}
	case errors.Is(err, os.ErrDeadlineExceeded), errors.As(err, &ne) && ne.Timeout():
		return &host.Error{Code: host.ErrRequestTimeout, Message: "request was not received in time"}
	case errors.Is(err, fasthttp.ErrDuplicateContentLength):
		return framing("more than one Content-Length")
	case strings.Contains(msg, "content-length"):
		return framing("Content-Length is not a decimal number")
	case errors.Is(err, fasthttp.ErrUnsupportedTransferEncoding):
		return framing("Transfer-Encoding must be chunked alone, once, in HTTP/1.1")
	case errors.As(err, &chunk), strings.Contains(msg, "hex number"):
		return framing("malformed chunked body")
	}
	return &host.Error{Code: host.ErrBadRequest, Message: "malformed HTTP request"}
}

// screen refuses what fasthttp accepts but a proxy in front of the gateway
// might read otherwise (RFC 9112 §6.1, §6.3, §5.2): Content-Length with
// Transfer-Encoding, a transfer coding other than chunked, obsolete line
// folding; and what Fiber would answer without an Error body: an unknown
// method or HTTP version. It reads the header block as it came on the wire.
func screen(h *fasthttp.RequestHeader) *host.Error {
	if _, ok := knownMethod(string(h.Method())); !ok {
		return &host.Error{Code: host.ErrBadRequest, Message: "unknown HTTP method"}
	}
	switch string(h.Protocol()) {
	case "HTTP/1.1", "HTTP/1.0":
	default:
		return &host.Error{Code: host.ErrBadRequest, Message: "unsupported HTTP version"}
	}
	var length, coding bool
	for rest := h.RawHeaders(); len(rest) > 0; {
		var line []byte
		line, rest, _ = bytes.Cut(rest, []byte{'\n'})
		line = bytes.TrimSuffix(line, []byte{'\r'})
		if len(line) == 0 {
			break
		}
		if line[0] == ' ' || line[0] == '\t' {
			return &host.Error{Code: host.ErrBadRequest, Message: "obsolete line folding in a header"}
		}
		if c := line[0] | 0x20; c != 'c' && c != 't' {
			continue // neither Content-Length nor Transfer-Encoding
		}
		name, value, _ := bytes.Cut(line, []byte{':'})
		switch {
		case bytes.EqualFold(name, []byte(fiber.HeaderContentLength)):
			length = true
		case bytes.EqualFold(name, []byte(fiber.HeaderTransferEncoding)):
			coding = true
			if !bytes.EqualFold(bytes.TrimSpace(value), []byte("chunked")) {
				return framing("Transfer-Encoding must be chunked alone, once, in HTTP/1.1")
			}
		}
	}
	if length && coding {
		return framing("Content-Length and Transfer-Encoding together")
	}
	return nil
}

// since is the time from start, or 0 when start is unknown.
func since(start time.Time) time.Duration {
	if start.IsZero() {
		return 0
	}
	return time.Since(start)
}
