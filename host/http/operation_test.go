package http_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	nethttp "net/http"
	"strings"
	"sync"
	"testing"

	"github.com/plantgate/plantgate/host"
	gatehttp "github.com/plantgate/plantgate/host/http"
)

// TestOperation pins the one route resolver's answers, the ones the
// gateway shows authorize plugins and `plugin run` shows them too: HEAD
// names the GET route, the id is what strconv.ParseInt reads in base 10,
// a segment that is no int64 is the operation without an id (id 0), and
// a path the router does not route to a plant operation is none.
func TestOperation(t *testing.T) {
	t.Parallel()
	const (
		list, create      = "GET /plants", "POST /plants"
		get, del          = "GET /plants/{id}", "DELETE /plants/{id}"
		maxID, minID      = int64(9223372036854775807), int64(-9223372036854775808)
		noID, noOperation = false, false
	)
	cases := []struct {
		method, path string
		route        string
		id           int64
		hasID, ok    bool
	}{
		{"GET", "/plants", list, 0, false, true},
		{"HEAD", "/plants", list, 0, false, true},
		{"POST", "/plants", create, 0, false, true},
		{"DELETE", "/plants", "", 0, false, noOperation}, // 405
		{"PUT", "/plants", "", 0, false, noOperation},
		{"GET", "/plants/7", get, 7, true, true},
		{"HEAD", "/plants/7", get, 7, true, true},
		{"DELETE", "/plants/7", del, 7, true, true},
		{"POST", "/plants/7", "", 0, false, noOperation}, // 405
		{"PATCH", "/plants/7", "", 0, false, noOperation},
		{"GET", "/plants/007", get, 7, true, true},
		{"GET", "/plants/+7", get, 7, true, true},
		{"GET", "/plants/-0", get, 0, true, true},
		{"GET", "/plants/+0", get, 0, true, true},
		{"DELETE", "/plants/-42", del, -42, true, true},
		{"GET", "/plants/9223372036854775807", get, maxID, true, true},
		{"GET", "/plants/-9223372036854775808", get, minID, true, true},
		{"GET", "/plants/00000000000000000000009223372036854775807", get, maxID, true, true},
		// Not an int64: still the operation (400 40017 after the chain), id 0
		// and never strconv's clamped value.
		{"GET", "/plants/9223372036854775808", get, 0, noID, true},
		{"DELETE", "/plants/-9223372036854775809", del, 0, noID, true},
		{"GET", "/plants/99999999999999999999999", get, 0, noID, true},
		{"GET", "/plants/x", get, 0, noID, true},
		{"GET", "/plants/%37", get, 0, noID, true}, // the path is not unescaped
		{"GET", "/plants/7%2F8", get, 0, noID, true},
		{"GET", "/plants/1.0", get, 0, noID, true},
		{"GET", "/plants/1e3", get, 0, noID, true},
		{"GET", "/plants/0x10", get, 0, noID, true},
		{"GET", "/plants/1_000", get, 0, noID, true},
		{"GET", "/plants/+", get, 0, noID, true},
		{"GET", "/plants/-", get, 0, noID, true},
		{"GET", "/plants/++7", get, 0, noID, true},
		// Paths the strict, case-sensitive router answers 404.
		{"GET", "/plants/", "", 0, false, noOperation},
		{"GET", "/plants/7/", "", 0, false, noOperation},
		{"GET", "/plants/7/x", "", 0, false, noOperation},
		{"GET", "/plants//7", "", 0, false, noOperation},
		{"GET", "//plants/7", "", 0, false, noOperation},
		{"GET", "/PLANTS/7", "", 0, false, noOperation},
		{"POST", "/PLANTS", "", 0, false, noOperation},
		{"POST", "/plants/", "", 0, false, noOperation},
		{"GET", "/plantsx", "", 0, false, noOperation},
		{"GET", "/plants?limit=2", "", 0, false, noOperation}, // a path, not a request target
		{"GET", "", "", 0, false, noOperation},
		{"get", "/plants", "", 0, false, noOperation}, // methods are case-sensitive
	}
	for _, c := range cases {
		route, id, hasID, ok := gatehttp.Operation(c.method, c.path)
		if route != c.route || id != c.id || hasID != c.hasID || ok != c.ok {
			t.Errorf("Operation(%q, %q) = %q, %d, %v, %v; want %q, %d, %v, %v",
				c.method, c.path, route, id, hasID, ok, c.route, c.id, c.hasID, c.ok)
		}
	}
}

// operationTargets are request targets around every edge of the resolver:
// id spellings, out-of-range ids, escapes, near-miss paths and a query.
var operationTargets = []string{
	"/plants", "/plants?limit=2", "/plants/", "/PLANTS", "//plants", "/plantsx",
	"/plants/7", "/plants/007", "/plants/+7", "/plants/-0", "/plants/-42",
	"/plants/9223372036854775807", "/plants/-9223372036854775808",
	"/plants/9223372036854775808", "/plants/99999999999999999999999",
	"/plants/x", "/plants/%37", "/plants/7%2F8", "/plants/1e3", "/plants/7?x=1",
	"/plants/7/", "/plants/7/x", "/plants//7", "/PLANTS/7", "/plants/../plants/7",
}

// recordingPolicy denies every authorize call with 403 40399 and keeps the
// request it was shown.
type recordingPolicy struct {
	mu   sync.Mutex
	seen []host.AuthorizeRequest
}

func (p *recordingPolicy) Authorize(_ context.Context, r host.AuthorizeRequest) (string, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	r.Method, r.Path = strings.Clone(r.Method), strings.Clone(r.Path) // borrowed from the request
	p.seen = append(p.seen, r)
	return "", &host.Error{Code: 40399, Message: "recorded"}
}

func (p *recordingPolicy) Validate(context.Context, host.Plant, string) error { return nil }
func (p *recordingPolicy) Authorizes() bool                                   { return true }

// take returns what Authorize was shown since the last take.
func (p *recordingPolicy) take() []host.AuthorizeRequest {
	p.mu.Lock()
	defer p.mu.Unlock()
	seen := p.seen
	p.seen = nil
	return seen
}

// TestServerResolvesAsOperation: for every method and each target, the
// server either shows the authorize chain exactly the operation Operation
// names for the target's path (and answers its deny), or, where Operation
// names none, answers 404 or 405 without running the chain. So the gateway
// and `plugin run`, which resolves through Operation, cannot disagree.
func TestServerResolvesAsOperation(t *testing.T) {
	t.Parallel()
	policy := &recordingPolicy{}
	srv, err := gatehttp.New(gatehttp.Config{Store: panickyStore{}, Policy: policy, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	for _, method := range []string{"GET", "HEAD", "POST", "DELETE", "PUT", "PATCH", "OPTIONS"} {
		for _, target := range operationTargets {
			path, _, _ := strings.Cut(target, "?")
			route, id, hasID, ok := gatehttp.Operation(method, path)
			req, _ := nethttp.NewRequest(method, "http://x"+target, strings.NewReader(`{"id":1,"name":"a"}`))
			req.Header.Set("Authorization", "Bearer any-token")
			req.Header.Set("Content-Type", "application/json")
			resp, err := srv.App().Test(req, -1)
			if err != nil {
				t.Fatalf("%s %s: %v", method, target, err)
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			seen := policy.take()
			want := host.AuthorizeRequest{Method: method, Path: path, Credential: "any-token", Route: route, PathID: id, HasPathID: hasID}
			switch {
			case ok && (resp.StatusCode != 403 || len(seen) != 1 || seen[0] != want):
				t.Errorf("%s %s: %d, chain shown %+v; want 403 after showing %+v", method, target, resp.StatusCode, seen, want)
			case !ok && (resp.StatusCode != 404 && resp.StatusCode != 405 || len(seen) != 0):
				t.Errorf("%s %s: Operation names no operation, but the server answered %d, chain shown %+v; want 404 or 405 and no chain",
					method, target, resp.StatusCode, seen)
			}
		}
	}
}

// TestPluginSeesOperation: a real authorize plugin (the operation echo) is
// shown the route and path id Operation names, for the id spellings the
// resolver must read as the server does.
func TestPluginSeesOperation(t *testing.T) {
	t.Parallel()
	g := newGateway(t, gatewayOptions{extra: []string{"05-operation.wasm=" + operationPlugin}})
	for _, method := range []string{"GET", "DELETE"} {
		for _, path := range []string{"/plants/007", "/plants/+7", "/plants/-0", "/plants/9223372036854775808", "/plants/%37"} {
			route, id, hasID, ok := gatehttp.Operation(method, path)
			if !ok {
				t.Fatalf("Operation(%q, %q): no operation", method, path)
			}
			want := errorBody(40399, fmt.Sprintf("method=%s path=%s route=%q id=%d has_id=%v", method, path, route, id, hasID))
			if r := g.call(method, path, adminToken); r.status != 403 || r.body != want {
				t.Errorf("%s %s: %d %s\nwant 403 %s", method, path, r.status, r.body, want)
			}
		}
	}
}
