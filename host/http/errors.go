package http

import (
	"errors"
	"mime"
	"strconv"
	"strings"

	"github.com/gofiber/fiber/v2"

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
		s.cfg.Logger.Error("request failed", "method", c.Method(), "path", c.Path(), "code", e.Code, "err", err)
	}
	h := &c.Response().Header
	switch {
	case e.Code == host.ErrMissingCredential:
		h.Set(fiber.HeaderWWWAuthenticate, `Bearer realm="`+Realm+`"`)
	case e.Code == host.ErrMalformedAuth:
		h.Set(fiber.HeaderWWWAuthenticate, `Bearer realm="`+Realm+`", error="invalid_request"`)
	case status == fiber.StatusUnauthorized:
		h.Set(fiber.HeaderWWWAuthenticate, `Bearer realm="`+Realm+`", error="invalid_token"`)
	case status == fiber.StatusForbidden:
		h.Set(fiber.HeaderWWWAuthenticate, `Bearer realm="`+Realm+`", error="insufficient_scope"`)
	case status == fiber.StatusServiceUnavailable:
		h.Set(fiber.HeaderRetryAfter, RetryAfterSeconds)
	case status == fiber.StatusMethodNotAllowed:
		h.Set(fiber.HeaderAllow, allowedMethods(c.Path()))
	}
	h.SetContentType(fiber.MIMEApplicationJSON)
	c.Status(status)
	return c.Send(AppendError(nil, e))
}

// asHostError maps any error to the error table. Fiber's own errors come
// from routing and from fasthttp reading the request.
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
			return &host.Error{Code: host.ErrBadRequest, Message: "request headers are too large"}
		case fiber.StatusRequestTimeout:
			return &host.Error{Code: host.ErrBadRequest, Message: "request was not received in time"}
		case fiber.StatusBadRequest:
			return &host.Error{Code: host.ErrBadRequest, Message: "malformed HTTP request"}
		}
	}
	return &host.Error{Code: host.ErrInternal, Message: "internal error"}
}

// allowedMethods is the Allow header for a path that exists under other methods.
func allowedMethods(path string) string {
	if path == "/plants" {
		return fiber.MethodPost
	}
	return fiber.MethodGet + ", " + fiber.MethodHead
}

// checkRepresentation refuses what the body decoder must never see: a
// Content-Type other than JSON in UTF-8 and any content coding (a gzip body
// is refused, never decompressed, so its size cannot explode past the limit).
func checkRepresentation(c *fiber.Ctx) error {
	ct := string(c.Request().Header.ContentType())
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
	if enc := c.Request().Header.ContentEncoding(); len(enc) > 0 && !strings.EqualFold(string(enc), "identity") {
		return &host.Error{Code: host.ErrContentEncoding, Message: "Content-Encoding is not supported; send the body uncompressed"}
	}
	return nil
}

// AppendError appends the Error body {"error":code,"message":"…"} to dst.
func AppendError(dst []byte, e *host.Error) []byte {
	dst = append(dst, `{"error":`...)
	dst = strconv.AppendInt(dst, int64(e.Code), 10)
	dst = append(dst, `,"message":`...)
	dst = jsonenc.AppendString(dst, e.Message)
	return append(dst, '}')
}

// AppendPlant appends the Plant body {"name":…,"tag":…} to dst, the tag only
// when the plant has one. The declared response shape has no id.
func AppendPlant(dst []byte, p host.Plant) []byte {
	dst = append(dst, `{"name":`...)
	dst = jsonenc.AppendString(dst, p.Name)
	if p.HasTag {
		dst = append(dst, `,"tag":`...)
		dst = jsonenc.AppendString(dst, p.Tag)
	}
	return append(dst, '}')
}
