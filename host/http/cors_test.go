package http_test

import (
	nethttp "net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/plantgate/plantgate/host"
	gatehttp "github.com/plantgate/plantgate/host/http"
)

const (
	appOrigin   = "https://app.example.com"
	otherOrigin = "https://evil.example.net"
)

// corsOnly is the Access-Control-* and Vary headers of an answer, the
// ones CORS is about, so that a test can say all of them exactly.
func corsOnly(h nethttp.Header) map[string]string {
	got := map[string]string{}
	for k, v := range h {
		if strings.HasPrefix(k, "Access-Control-") || k == "Vary" {
			got[k] = strings.Join(v, " | ")
		}
	}
	return got
}

func corsRequest(method, path, origin, authorization string, header ...string) *nethttp.Request {
	var req *nethttp.Request
	if method == nethttp.MethodPost {
		req = newPost(`{"id":7,"name":"Fern"}`, authorization, "application/json")
	} else {
		req, _ = nethttp.NewRequest(method, "http://plantgate.test"+path, nil)
		if authorization != "" {
			req.Header.Set("Authorization", authorization)
		}
	}
	if origin != "" {
		req.Header.Set("Origin", origin)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	return req
}

// TestCORS sends preflights and actual requests from an allowed origin,
// another origin and none through the real stack (Fiber, the bundled
// plugins, Redis) and asserts every CORS header of each answer.
func TestCORS(t *testing.T) {
	t.Parallel()
	g := newGateway(t, gatewayOptions{corsOrigins: []string{appOrigin, "http://localhost:5173"}})
	const expose = "WWW-Authenticate, Retry-After, RateLimit, RateLimit-Policy, Link, X-Request-ID"
	allowed := map[string]string{"Access-Control-Allow-Origin": appOrigin, "Access-Control-Expose-Headers": expose, "Vary": "Origin"}
	vary := map[string]string{"Vary": "Origin"}
	preflight := func(path, origin string) *nethttp.Request {
		return corsRequest(nethttp.MethodOptions, path, origin, "",
			"Access-Control-Request-Method", "POST", "Access-Control-Request-Headers", "authorization,content-type")
	}
	for _, tc := range []struct {
		name   string
		req    *nethttp.Request
		status int
		body   string
		cors   map[string]string
		header map[string]string
	}{
		{"preflight /plants", preflight("/plants", appOrigin), 204, "", map[string]string{
			"Access-Control-Allow-Origin":  appOrigin,
			"Access-Control-Allow-Methods": "GET, HEAD, POST",
			"Access-Control-Allow-Headers": "Authorization, Content-Type, X-Request-ID, traceparent, tracestate",
			"Access-Control-Max-Age":       "600",
			"Vary":                         "Origin",
		}, nil},
		{"preflight /plants/{id}", preflight("/plants/7", "http://localhost:5173"), 204, "", map[string]string{
			"Access-Control-Allow-Origin":  "http://localhost:5173",
			"Access-Control-Allow-Methods": "GET, HEAD, DELETE",
			"Access-Control-Allow-Headers": "Authorization, Content-Type, X-Request-ID, traceparent, tracestate",
			"Access-Control-Max-Age":       "600",
			"Vary":                         "Origin",
		}, nil},
		{"preflight from another origin", preflight("/plants", otherOrigin), 403,
			errorBody(host.ErrOriginNotAllowed, "this origin may not call the API from a browser"), vary,
			map[string]string{"WWW-Authenticate": ""}},
		{"preflight from a look-alike origin", preflight("/plants", appOrigin+".evil.example.net"), 403,
			errorBody(host.ErrOriginNotAllowed, "this origin may not call the API from a browser"), vary, nil},
		{"preflight with the origin's path", preflight("/plants", appOrigin+"/"), 403,
			errorBody(host.ErrOriginNotAllowed, "this origin may not call the API from a browser"), vary, nil},
		{"preflight to no route", preflight("/nope", appOrigin), 404, errorBody(host.ErrNotFound, "no such route"), allowed, nil},
		{"OPTIONS that is no preflight", corsRequest(nethttp.MethodOptions, "/plants", appOrigin, ""), 405,
			errorBody(host.ErrMethodNotAllowed, "method not allowed on this route"), allowed, map[string]string{"Allow": "GET, HEAD, POST"}},
		{"create", corsRequest(nethttp.MethodPost, "/plants", appOrigin, "Bearer "+writerToken), 200, `{"name":"Fern"}`, allowed, nil},
		{"no credential", corsRequest(nethttp.MethodPost, "/plants", appOrigin, ""), 401,
			errorBody(host.ErrMissingCredential, "a bearer credential is required"), allowed,
			map[string]string{"WWW-Authenticate": `Bearer realm="plantgate"`}},
		{"unknown token", corsRequest(nethttp.MethodGet, "/plants/7", appOrigin, "Bearer not-a-known-token"), 401,
			errorBody(40151, "invalid token"), allowed, nil},
		{"bad limit", corsRequest(nethttp.MethodGet, "/plants?limit=0", appOrigin, "Bearer "+readerToken), 400,
			errorBody(host.ErrBadLimit, "limit must be an integer from 1 to 100"), allowed, nil},
		{"no plant", corsRequest(nethttp.MethodGet, "/plants/8", appOrigin, "Bearer "+readerToken), 404,
			errorBody(host.ErrPlantNotFound, "no plant with id 8"), allowed, nil},
		{"read", corsRequest(nethttp.MethodGet, "/plants/7", appOrigin, "Bearer "+readerToken), 200, `{"id":7,"name":"Fern"}`, allowed, nil},
		{"another origin's request is served, unmarked", corsRequest(nethttp.MethodGet, "/plants/7", otherOrigin, "Bearer "+readerToken), 200,
			`{"id":7,"name":"Fern"}`, vary, nil},
		{"no origin", corsRequest(nethttp.MethodGet, "/plants/7", "", "Bearer "+readerToken), 200, `{"id":7,"name":"Fern"}`, vary, nil},
	} {
		r := g.do(tc.req)
		if r.status != tc.status || r.body != tc.body {
			t.Errorf("%s: %d %s, want %d %s", tc.name, r.status, r.body, tc.status, tc.body)
		}
		if got := corsOnly(r.header); !mapsEqual(got, tc.cors) {
			t.Errorf("%s: CORS headers %v, want %v", tc.name, got, tc.cors)
		}
		for k, v := range tc.header {
			if got := r.header.Get(k); got != v {
				t.Errorf("%s: %s %q, want %q", tc.name, k, got, v)
			}
		}
	}
}

func mapsEqual(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// TestCORSOff: without origins, a preflight is an OPTIONS like any other
// (405 and Allow) and no answer has a CORS header or Vary, as before CORS.
func TestCORSOff(t *testing.T) {
	t.Parallel()
	g := newGateway(t, gatewayOptions{})
	r := g.do(corsRequest(nethttp.MethodOptions, "/plants", appOrigin, "", "Access-Control-Request-Method", "POST"))
	if r.status != 405 || r.body != errorBody(host.ErrMethodNotAllowed, "method not allowed on this route") || r.header.Get("Allow") != "GET, HEAD, POST" {
		t.Fatalf("preflight without CORS: %d %s %v", r.status, r.body, r.header)
	}
	if got := corsOnly(r.header); len(got) != 0 {
		t.Fatalf("CORS headers %v", got)
	}
	if got := corsOnly(g.do(corsRequest(nethttp.MethodPost, "/plants", appOrigin, "Bearer "+writerToken)).header); len(got) != 0 {
		t.Fatalf("CORS headers %v", got)
	}
}

// TestCORSOnRefusedReads: an answer given before routing (framing refused
// on a raw socket) carries the allowed origin's headers too. (When
// fasthttp cannot parse the header block at all, there is no Origin to
// answer.)
func TestCORSOnRefusedReads(t *testing.T) {
	t.Parallel()
	g := newGateway(t, gatewayOptions{corsOrigins: []string{appOrigin}})
	addr := g.serve(t)
	r := rawExchange(t, addr, "POST /plants HTTP/1.1\r\nHost: x\r\nOrigin: "+appOrigin+"\r\nContent-Length: 7\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n")
	if r.status != 400 || r.body != errorBody(host.ErrFraming, "Content-Length and Transfer-Encoding together") || r.after != "closed" {
		t.Fatalf("%d %s, after %s", r.status, r.body, r.after)
	}
	if got := r.header.Get("Access-Control-Allow-Origin"); got != appOrigin {
		t.Fatalf("Access-Control-Allow-Origin %q", got)
	}
}

// TestParseOrigin: origins as operators write them, and what is refused.
func TestParseOrigin(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"https://app.example.com":      "https://app.example.com",
		"HTTPS://App.Example.COM":      "https://app.example.com",
		"https://app.example.com:443":  "https://app.example.com",
		"http://localhost:80":          "http://localhost",
		"http://localhost:5173":        "http://localhost:5173",
		"https://app.example.com:8443": "https://app.example.com:8443",
		"http://[::1]:3000":            "http://[::1]:3000",
		"http://127.0.0.1:3000":        "http://127.0.0.1:3000",
	} {
		if got, err := gatehttp.ParseOrigin(in); err != nil || got != want {
			t.Errorf("ParseOrigin(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for in, want := range map[string]string{
		"*":                          `origin "*": a wildcard is not accepted; name each origin whose pages may call the API, e.g. https://app.example.com`,
		"null":                       `origin "null": sandboxed frames and file: pages all send null, so allowing it allows any of them`,
		"https://*.example.com":      `origin "https://*.example.com": wildcards are not accepted; name each origin`,
		"https://app.example.com/":   `origin "https://app.example.com/": an origin has no path, query or user, not even a trailing /; want scheme://host[:port]`,
		"https://app.example.com/x":  `origin "https://app.example.com/x": an origin has no path, query or user, not even a trailing /; want scheme://host[:port]`,
		"https://app.example.com?":   `origin "https://app.example.com?": an origin has no path, query or user, not even a trailing /; want scheme://host[:port]`,
		"https://u@app.example.com":  `origin "https://u@app.example.com": an origin has no path, query or user, not even a trailing /; want scheme://host[:port]`,
		"app.example.com":            `origin "app.example.com": want scheme://host[:port] with scheme http or https`,
		"ftp://app.example.com":      `origin "ftp://app.example.com": want scheme://host[:port] with scheme http or https`,
		"https://":                   `origin "https://": no host; want scheme://host[:port]`,
		"https://app.example.com:x1": `origin "https://app.example.com:x1": parse "https://app.example.com:x1": invalid port ":x1" after host`,
	} {
		if _, err := gatehttp.ParseOrigin(in); err == nil || err.Error() != want {
			t.Errorf("ParseOrigin(%q): %v, want %s", in, err, want)
		}
	}
}

// TestCORSOriginsChecked: New refuses an origin a browser never sends.
func TestCORSOriginsChecked(t *testing.T) {
	t.Parallel()
	g := newGateway(t, gatewayOptions{})
	for _, tc := range []struct{ origin, want string }{
		{"*", `http server: origin "*": a wildcard is not accepted; name each origin whose pages may call the API, e.g. https://app.example.com`},
		{"https://App.example.com", `http server: origin "https://App.example.com": browsers send it as "https://app.example.com"; configure that`},
	} {
		_, err := gatehttp.New(gatehttp.Config{Store: g.store, Policy: g.chain, CORSOrigins: []string{tc.origin}})
		if err == nil || err.Error() != tc.want {
			t.Errorf("%s: %v", tc.origin, err)
		}
	}
}

// TestTLSGuideAgrees: docs/tls.md quotes what the gateway sends; the
// quotes must be the gateway's.
func TestTLSGuideAgrees(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile(filepath.Join(moduleRoot, "docs", "tls.md"))
	if err != nil {
		t.Fatal(err)
	}
	doc := strings.Join(strings.Fields(string(b)), " ") // line breaks as spaces
	for _, want := range []string{
		errorBody(host.ErrOriginNotAllowed, "this origin may not call the API from a browser"),
		errorBody(host.ErrBadRequest, "this listener speaks HTTPS: use an https:// URL"),
		"Access-Control-Allow-Headers: Authorization, Content-Type, X-Request-ID, traceparent, tracestate",
		"Access-Control-Expose-Headers: WWW-Authenticate, Retry-After, RateLimit, RateLimit-Policy, Link, X-Request-ID",
		"Access-Control-Max-Age: 600",
	} {
		if !strings.Contains(doc, want) {
			t.Errorf("docs/tls.md does not say %s", want)
		}
	}
}

// TestCORSOnUnavailable: a 503 (the store down) carries the allowed
// origin's headers, so the page can read Retry-After.
func TestCORSOnUnavailable(t *testing.T) {
	t.Parallel()
	g := newGateway(t, gatewayOptions{corsOrigins: []string{appOrigin}})
	g.mr.Close()
	r := g.do(corsRequest(nethttp.MethodGet, "/readyz", appOrigin, ""))
	if r.status != 503 || r.body != errorBody(host.ErrStoreUnavailable, "plant store unavailable") || r.header.Get("Retry-After") != "1" {
		t.Fatalf("%d %s %v", r.status, r.body, r.header)
	}
	want := map[string]string{"Access-Control-Allow-Origin": appOrigin, "Vary": "Origin",
		"Access-Control-Expose-Headers": "WWW-Authenticate, Retry-After, RateLimit, RateLimit-Policy, Link, X-Request-ID"}
	if got := corsOnly(r.header); !mapsEqual(got, want) {
		t.Fatalf("CORS headers %v, want %v", got, want)
	}
}
