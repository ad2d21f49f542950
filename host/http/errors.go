package http

import (
	"bytes"
	"errors"
	"fmt"
	"mime"
	"runtime/debug"
	"strconv"
	"strings"

	"github.com/gofiber/fiber/v2"
	"github.com/gofiber/fiber/v2/middleware/recover"

	"github.com/plantgate/plantgate/host"
	"github.com/plantgate/plantgate/host/jsonenc"
)

// Realm is the protection space named in every WWW-Authenticate challenge.
const Realm = "plantgate"

// RetryAfterSeconds is sent with every 503: the failures behind it (store
// down, plugins busy) usually clear within a second or two.
const RetryAfterSeconds = "1"

// handleError is the one place where an error becomes an HTTP response.
// Every response it writes is the documented Error body; its status is the
// code's hundreds. Errors that are not *host.Error are bugs or transport
// failures: they are logged and answered with a generic 500, never echoed.
func (s *Server) handleError(c *fiber.Ctx, err error) error {
	e := asHostError(err)
	if e.Message == "" { // the Error body promises a message; a plugin may have sent none
		e = &host.Error{Code: e.Code, Message: "request denied by policy"}
	}
	status := e.Status()
	if status >= 500 {
		s.logFailure(c, e.Code, err)
	}
	h := &c.Response().Header
	switch {
	case e.Code == host.ErrMissingCredential:
		h.Set(fiber.HeaderWWWAuthenticate, `Bearer realm="`+Realm+`"`)
	case e.Code == host.ErrMalformedAuth:
		h.Set(fiber.HeaderWWWAuthenticate, `Bearer realm="`+Realm+`", error="invalid_request"`)
	case status == fiber.StatusUnauthorized:
		h.Set(fiber.HeaderWWWAuthenticate, `Bearer realm="`+Realm+`", error="invalid_token"`)
	case e.Code == host.ErrOriginNotAllowed: // no credential was asked for
	case status == fiber.StatusForbidden:
		h.Set(fiber.HeaderWWWAuthenticate, `Bearer realm="`+Realm+`", error="insufficient_scope"`)
	case status == fiber.StatusServiceUnavailable && len(h.Peek(fiber.HeaderRetryAfter)) == 0: // a plugin's own wins
		h.Set(fiber.HeaderRetryAfter, RetryAfterSeconds)
	case status == fiber.StatusMethodNotAllowed:
		h.Set(fiber.HeaderAllow, s.routes.allow(c.Path()))
	}
	h.SetContentType(fiber.MIMEApplicationJSON)
	c.Status(status)
	return c.Send(AppendError(nil, e))
}

// logFailure writes the error line of a 5xx answer; those of quietCodes at
// most once per quietLogEvery each, saying how many were held back.
func (s *Server) logFailure(c *fiber.Ctx, code int32, err error) {
	// Copies: the record may outlive the request's buffers (see report).
	method, path := methodName(c.Method()), strings.Clone(c.Path())
	quiet, ok := s.quietLogs[code]
	if !ok {
		s.cfg.Logger.Error("request failed", "method", method, "path", path, "code", code, "err", err)
		return
	}
	if ok, suppressed := quiet.allow(); ok {
		s.cfg.Logger.Error("request failed", "method", method, "path", path, "code", code, "err", err, "suppressed", suppressed)
	}
}

// recoverPanics turns a panic below it into an error, which observe
// answers 500 50003 (it is no *host.Error), and logs the panic with its
// stack: a bug met by one request must not end the process and every
// request in flight with it.
func (s *Server) recoverPanics() fiber.Handler {
	return recover.New(recover.Config{EnableStackTrace: true, StackTraceHandler: func(c *fiber.Ctx, e any) {
		s.cfg.Logger.Error("panic serving a request", "method", methodName(c.Method()), "path", strings.Clone(c.Path()),
			"panic", fmt.Sprint(e), "stack", string(debug.Stack()))
	}})
}

// asHostError maps any error to the error table. Fiber's own errors come
// from routing (fasthttp's read errors go through readError instead).
func asHostError(err error) *host.Error {
	var e *host.Error
	if errors.As(err, &e) {
		return e
	}
	var fe *fiber.Error
	if errors.As(err, &fe) {
		switch fe.Code {
		case fiber.StatusNotFound:
			return &host.Error{Code: host.ErrNotFound, Message: "no such route"}
		case fiber.StatusMethodNotAllowed:
			return &host.Error{Code: host.ErrMethodNotAllowed, Message: "method not allowed on this route"}
		case fiber.StatusRequestEntityTooLarge:
			return &host.Error{Code: host.ErrBodyTooLarge, Message: "request body is larger than the limit"}
		case fiber.StatusRequestHeaderFieldsTooLarge:
			return &host.Error{Code: host.ErrHeadersTooLarge, Message: "request headers are too large"}
		case fiber.StatusRequestTimeout:
			return &host.Error{Code: host.ErrRequestTimeout, Message: "request was not received in time"}
		case fiber.StatusBadRequest:
			return &host.Error{Code: host.ErrBadRequest, Message: "malformed HTTP request"}
		}
	}
	return &host.Error{Code: host.ErrInternal, Message: "internal error"}
}

// checkRepresentation refuses what the body decoder must never see: a
// Content-Type other than JSON in UTF-8 and any content coding (a gzip body
// is refused, never decompressed, so its size cannot explode past the limit).
// The body is then read raw, with c.Request().Body(): Fiber's c.Body()
// decodes by Content-Encoding, without a bound.
func checkRepresentation(c *fiber.Ctx) error {
	raw := c.Request().Header.ContentType()
	if !plainJSON(raw) {
		if err := checkMediaType(string(raw)); err != nil {
			return err
		}
	}
	if !identityOnly(c.Request().Header.PeekAll(fiber.HeaderContentEncoding)) {
		return &host.Error{Code: host.ErrContentEncoding, Message: "Content-Encoding is not supported; send the body uncompressed"}
	}
	return nil
}

// plainJSON reports whether ct is one of the usual spellings that
// checkMediaType accepts, checked without its parse's allocations.
func plainJSON(ct []byte) bool {
	return bytes.EqualFold(ct, []byte("application/json")) || bytes.EqualFold(ct, []byte("application/json; charset=utf-8"))
}

// checkMediaType accepts application/json with no parameter but
// charset=utf-8.
func checkMediaType(ct string) error {
	if ct == "" {
		return &host.Error{Code: host.ErrContentType, Message: "Content-Type is required: application/json"}
	}
	mt, params, err := mime.ParseMediaType(ct)
	if err != nil || mt != fiber.MIMEApplicationJSON {
		return &host.Error{Code: host.ErrContentType, Message: "Content-Type must be application/json"}
	}
	for k, v := range params {
		if k != "charset" || !strings.EqualFold(v, "utf-8") {
			return &host.Error{Code: host.ErrContentType, Message: "Content-Type application/json takes no parameter but charset=utf-8"}
		}
	}
	return nil
}

// identityOnly reports whether every coding in every Content-Encoding field
// is identity (or an empty list element, which RFC 9110 §5.6.1 says to
// ignore). Every field and every list element counts: a check of the first
// value alone once let "identity" then "gzip" through to a decoder that
// used the last, and 100 KB of gzip became 100 MB in memory.
func identityOnly(fields [][]byte) bool {
	for _, f := range fields {
		for coding := range bytes.SplitSeq(f, []byte{','}) {
			if c := bytes.TrimSpace(coding); len(c) > 0 && !bytes.EqualFold(c, []byte("identity")) {
				return false
			}
		}
	}
	return true
}

// AppendError appends the Error body {"error":code,"message":"…"} to dst.
func AppendError(dst []byte, e *host.Error) []byte {
	dst = append(dst, `{"error":`...)
	dst = strconv.AppendInt(dst, int64(e.Code), 10)
	dst = append(dst, `,"message":`...)
	dst = jsonenc.AppendString(dst, e.Message)
	return append(dst, '}')
}
