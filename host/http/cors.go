package http

import (
	"fmt"
	"net/url"
	"strings"

	"github.com/gofiber/fiber/v2"

	"github.com/plantgate/plantgate/host"
)

// CORS (the Fetch standard's CORS protocol) lets the pages of the
// configured origins call the API from a browser. It is answered here, by
// the host, before the plugin chain: a preflight carries no credential, so
// no authorize plugin could let it through.
//
// Written here rather than taken from Fiber's middleware/cors, which sends
// Access-Control-Allow-Methods, -Allow-Headers, -Max-Age and
// -Expose-Headers to origins it does not allow and answers their
// preflights 204; here another origin gets no CORS header at all, and its
// preflight the Error body.
//
//   - A preflight (OPTIONS with Origin and Access-Control-Request-Method)
//     from an allowed origin, to an API path, is answered 204 with the
//     path's methods, the request headers a client sends, and how long a
//     browser may keep the answer. It needs no credential.
//   - A preflight from any other origin is answered 403 (error 40301).
//   - Every other answer to an allowed origin, errors included, carries
//     Access-Control-Allow-Origin (that origin, never *) and
//     Access-Control-Expose-Headers; the request itself still needs its
//     credential and goes through the chain as always.
//   - Every answer carries Vary: Origin, so that a cache between browser and
//     gateway never gives one origin's answer to another.
//   - No Access-Control-Allow-Credentials: the API's credential is the
//     Authorization header, which fetch() sends without credentials mode;
//     no cookie ever authenticates a request.

const (
	// corsAllowHeaders are the request headers a page may send: the
	// credential, the body's type, a request id and W3C trace context.
	corsAllowHeaders = "Authorization, Content-Type, X-Request-ID, traceparent, tracestate"
	// corsExposeHeaders are the response headers a page may read beyond
	// the CORS-safelisted ones: the challenge, when to retry, quota,
	// the next page of GET /plants, the request id.
	corsExposeHeaders = "WWW-Authenticate, Retry-After, RateLimit, RateLimit-Policy, Link, X-Request-ID"
	// corsMaxAge is how long, in seconds, a browser may keep a preflight
	// answer (Chromium keeps at most 7200, Firefox 86400).
	corsMaxAge = "600"
)

// ParseOrigin checks an origin as an operator writes it
// (scheme://host[:port], http or https) and returns it as a browser sends
// it in the Origin header: scheme and host in lower case, a default port
// left out. Wildcards and "null" are refused: each origin is named.
func ParseOrigin(s string) (string, error) {
	switch {
	case s == "*":
		return "", fmt.Errorf("origin %q: a wildcard is not accepted; name each origin whose pages may call the API, e.g. https://app.example.com", s)
	case strings.EqualFold(s, "null"):
		return "", fmt.Errorf("origin %q: sandboxed frames and file: pages all send null, so allowing it allows any of them", s)
	case strings.Contains(s, "*"):
		return "", fmt.Errorf("origin %q: wildcards are not accepted; name each origin", s)
	}
	u, err := url.Parse(s)
	if err != nil {
		return "", fmt.Errorf("origin %q: %w", s, err)
	}
	scheme := strings.ToLower(u.Scheme)
	switch {
	case scheme != "http" && scheme != "https":
		return "", fmt.Errorf("origin %q: want scheme://host[:port] with scheme http or https", s)
	case u.Host == "" || u.Hostname() == "":
		return "", fmt.Errorf("origin %q: no host; want scheme://host[:port]", s)
	case u.User != nil || u.Path != "" || u.RawQuery != "" || u.Fragment != "" || u.ForceQuery || strings.HasSuffix(s, "#"):
		return "", fmt.Errorf("origin %q: an origin has no path, query or user, not even a trailing /; want scheme://host[:port]", s)
	}
	host, port := strings.ToLower(u.Hostname()), u.Port()
	if strings.Contains(host, ":") {
		host = "[" + host + "]"
	}
	if port == "" || scheme == "https" && port == "443" || scheme == "http" && port == "80" {
		return scheme + "://" + host, nil
	}
	return scheme + "://" + host + ":" + strings.TrimLeft(port, "0"), nil
}

// corsHeaders writes the headers every answer carries: Vary, and for an
// allowed origin Access-Control-Allow-Origin and -Expose-Headers. It
// returns whether the request's origin is allowed.
func (s *Server) corsHeaders(c *fiber.Ctx) bool {
	h := &c.Response().Header
	h.Set(fiber.HeaderVary, fiber.HeaderOrigin)
	origin := c.Request().Header.Peek(fiber.HeaderOrigin)
	if _, ok := s.origins[string(origin)]; !ok {
		return false
	}
	h.SetBytesV(fiber.HeaderAccessControlAllowOrigin, origin)
	h.Set(fiber.HeaderAccessControlExposeHeaders, corsExposeHeaders)
	return true
}

// cors is the middleware: it answers preflights and marks every answer.
func (s *Server) cors(c *fiber.Ctx) error {
	allowed := s.corsHeaders(c)
	rh := &c.Request().Header
	if c.Method() != fiber.MethodOptions || len(rh.Peek(fiber.HeaderOrigin)) == 0 || len(rh.Peek(fiber.HeaderAccessControlRequestMethod)) == 0 {
		return c.Next() // not a preflight
	}
	if !allowed {
		return &host.Error{Code: host.ErrOriginNotAllowed, Message: "this origin may not call the API from a browser"}
	}
	r := s.routes.find(c.Path())
	if r == nil {
		return c.Next() // 404, with the origin's headers
	}
	h := &c.Response().Header
	h.Del(fiber.HeaderAccessControlExposeHeaders) // read on actual answers only
	h.Set(fiber.HeaderAccessControlAllowMethods, r.allow)
	h.Set(fiber.HeaderAccessControlAllowHeaders, corsAllowHeaders)
	h.Set(fiber.HeaderAccessControlMaxAge, corsMaxAge)
	c.Status(fiber.StatusNoContent)
	return nil
}
