package http_test

import (
	"net"
	nethttp "net/http"
	"strings"
	"testing"

	"github.com/plantgate/plantgate/host"
	"github.com/plantgate/plantgate/host/redis/redistest"
)

// TestCreatePlantContract walks every item of the POST /plants contract
// through the real stack: Fiber, the bundled wasm plugins, Redis.
func TestCreatePlantContract(t *testing.T) {
	t.Parallel()
	g := newGateway(t, gatewayOptions{})
	type tc struct {
		name   string
		req    *nethttp.Request
		status int
		body   string
		header map[string]string
		stored map[string]string // id → canonical record afterwards ("" = absent)
	}
	post := func(body string) *nethttp.Request { return newPost(body, "Bearer "+writerToken, "application/json") }
	bad := func(code int32, msg string) string { return errorBody(code, msg) }
	withHeader := func(r *nethttp.Request, k, v string) *nethttp.Request { r.Header.Set(k, v); return r }
	// Ordered: later cases rely on the plants earlier ones stored.
	cases := []tc{
		{name: "create", req: post(`{"id":1,"name":"Monstera","tag":"tropical"}`), status: 200, body: `{"name":"Monstera","tag":"tropical"}`,
			header: map[string]string{"Content-Type": "application/json"}, stored: map[string]string{"1": `{"id":1,"name":"Monstera","tag":"tropical"}`}},
		{name: "tag omitted when absent", req: post(`{"id":2,"name":"Fern"}`), status: 200, body: `{"name":"Fern"}`, stored: map[string]string{"2": `{"id":2,"name":"Fern"}`}},
		{name: "identical re-create is a safe retry", req: post(`{"name":"Monstera","id":1,"tag":"tropical"}`), status: 200, body: `{"name":"Monstera","tag":"tropical"}`},
		{name: "re-create with other content", req: post(`{"id":1,"name":"Monstera","tag":"other"}`), status: 400, body: bad(40003, "plant 1 already exists with other content"),
			stored: map[string]string{"1": `{"id":1,"name":"Monstera","tag":"tropical"}`}},
		{name: "re-create without the tag", req: post(`{"id":1,"name":"Monstera"}`), status: 400, body: bad(40003, "plant 1 already exists with other content")},
		{name: "1.0 is an integer", req: post(`{"id":3.0,"name":"Ivy"}`), status: 200, body: `{"name":"Ivy"}`, stored: map[string]string{"3": `{"id":3,"name":"Ivy"}`}},
		{name: "1e3 is an integer", req: post(`{"id":1e3,"name":"Ivy"}`), status: 200, body: `{"name":"Ivy"}`, stored: map[string]string{"1000": `{"id":1000,"name":"Ivy"}`}},
		{name: "max int64 round-trips", req: post(`{"id":9223372036854775807,"name":"Max"}`), status: 200, body: `{"name":"Max"}`,
			stored: map[string]string{"9223372036854775807": `{"id":9223372036854775807,"name":"Max"}`}},
		{name: "extra properties allowed", req: post(`{"id":4,"name":"Aloe","color":"green","nested":{"a":[1]}}`), status: 200, body: `{"name":"Aloe"}`,
			stored: map[string]string{"4": `{"id":4,"name":"Aloe"}`}},
		{name: "unicode and escapes", req: post(`{"id":5,"name":"Fleur \u00e9t\u00e9 \"\u2603\""}`), status: 200, body: `{"name":"Fleur été \"☃\""}`},

		{name: "malformed JSON", req: post(`{"id":6,"name":`), status: 400, body: bad(40001, "malformed JSON: unexpected end of input"), stored: map[string]string{"6": ""}},
		{name: "not an object", req: post(`[{"id":6,"name":"a"}]`), status: 400, body: bad(40002, "request body must be a JSON object, got array")},
		{name: "missing id", req: post(`{"name":"a"}`), status: 400, body: bad(40002, "id is required")},
		{name: "missing name", req: post(`{"id":6}`), status: 400, body: bad(40002, "name is required"), stored: map[string]string{"6": ""}},
		{name: "id of the wrong type", req: post(`{"id":"6","name":"a"}`), status: 400, body: bad(40002, "id must be an integer, got string")},
		{name: "name null", req: post(`{"id":6,"name":null}`), status: 400, body: bad(40002, "name must be a string, got null")},
		{name: "id beyond int64", req: post(`{"id":9223372036854775808,"name":"a"}`), status: 400,
			body: bad(40002, "id must be between -9223372036854775808 and 9223372036854775807, got 9223372036854775808")},
		{name: "id with a fraction", req: post(`{"id":6.5,"name":"a"}`), status: 400, body: bad(40002, "id must be an integer, got 6.5")},
		{name: "duplicate JSON keys", req: post(`{"id":6,"name":"a","name":"b"}`), status: 400, body: bad(40007, "malformed JSON: duplicate key in object at byte 19"), stored: map[string]string{"6": ""}},
		{name: "invalid UTF-8", req: post("{\"id\":6,\"name\":\"\xff\"}"), status: 400, body: bad(40008, "request body is not valid UTF-8 (first invalid byte at offset 16)")},
		{name: "empty body", req: post(``), status: 400, body: bad(40006, "request body is empty; want a JSON NewPlant object")},
		{name: "missing content type", req: newPost(`{"id":6,"name":"a"}`, "Bearer "+writerToken, ""), status: 400, body: bad(40004, "Content-Type is required: application/json")},
		{name: "wrong content type", req: newPost(`{"id":6,"name":"a"}`, "Bearer "+writerToken, "text/plain"), status: 400, body: bad(40004, "Content-Type must be application/json")},
		{name: "jsonx is not json", req: newPost(`{"id":6,"name":"a"}`, "Bearer "+writerToken, "application/jsonx"), status: 400, body: bad(40004, "Content-Type must be application/json")},
		{name: "latin1 charset", req: newPost(`{"id":6,"name":"a"}`, "Bearer "+writerToken, "application/json; charset=latin1"), status: 400,
			body: bad(40004, "Content-Type application/json takes no parameter but charset=utf-8")},
		{name: "utf-8 charset is fine", req: newPost(`{"id":7,"name":"Sage"}`, "Bearer "+writerToken, "application/json; charset=UTF-8"), status: 200, body: `{"name":"Sage"}`},
		{name: "gzip refused", req: withHeader(post(`{"id":6,"name":"a"}`), "Content-Encoding", "gzip"), status: 400, body: bad(40009, "Content-Encoding is not supported; send the body uncompressed")},

		{name: "plant-rules: empty name after trimming", req: post(`{"id":6,"name":"   "}`), status: 400, body: bad(40051, "name must be 1–100 characters after trimming, got 0"), stored: map[string]string{"6": ""}},
		{name: "plant-rules: id below 1", req: post(`{"id":0,"name":"a"}`), status: 400, body: bad(40050, "id must be at least 1, got 0")},
		{name: "plant-rules: long tag", req: post(`{"id":6,"name":"a","tag":"` + strings.Repeat("t", 51) + `"}`), status: 400, body: bad(40053, "tag must be 1–50 characters after trimming, got 51")},
		{name: "plant-rules: control character", req: post(`{"id":6,"name":"a\u0007b"}`), status: 400, body: bad(40052, "name must not contain control characters, found U+0007 at character 2")},

		{name: "missing credential", req: newPost(`{"id":6,"name":"a"}`, "", "application/json"), status: 401, body: bad(40101, "a bearer credential is required"),
			header: map[string]string{"WWW-Authenticate": `Bearer realm="plantgate"`}, stored: map[string]string{"6": ""}},
		{name: "other scheme", req: newPost(`{"id":6,"name":"a"}`, "Basic dXNlcjpwYXNz", "application/json"), status: 401, body: bad(40101, "a bearer credential is required"),
			header: map[string]string{"WWW-Authenticate": `Bearer realm="plantgate"`}},
		{name: "malformed credential", req: newPost(`{"id":6,"name":"a"}`, "Bearer a b", "application/json"), status: 400,
			body:   bad(40010, "bearer credential must be one token of letters, digits and -._~+/ followed by optional ="),
			header: map[string]string{"WWW-Authenticate": `Bearer realm="plantgate", error="invalid_request"`}},
		{name: "unknown token", req: newPost(`{"id":6,"name":"a"}`, "Bearer not-a-known-token", "application/json"), status: 401, body: bad(40151, "invalid token"),
			header: map[string]string{"WWW-Authenticate": `Bearer realm="plantgate", error="invalid_token"`}, stored: map[string]string{"6": ""}},
		{name: "token without the scope", req: newPost(`{"id":6,"name":"a"}`, "Bearer "+readerToken, "application/json"), status: 403, body: bad(40350, "token lacks scope plants:write"),
			header: map[string]string{"WWW-Authenticate": `Bearer realm="plantgate", error="insufficient_scope"`}, stored: map[string]string{"6": ""}},
		{name: "authorize runs before the body is decoded", req: newPost(`not json`, "", "text/plain"), status: 401, body: bad(40101, "a bearer credential is required")},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := g.do(c.req)
			if got.status != c.status || got.body != c.body {
				t.Fatalf("got %d %s\nwant %d %s", got.status, got.body, c.status, c.body)
			}
			if got.status != 200 && got.header.Get("Content-Type") != "application/json" {
				t.Errorf("Content-Type %q, want application/json", got.header.Get("Content-Type"))
			}
			for k, v := range c.header {
				if got.header.Get(k) != v {
					t.Errorf("header %s = %q, want %q", k, got.header.Get(k), v)
				}
			}
			for id, want := range c.stored {
				if s := g.stored(id); s != want {
					t.Errorf("stored plant %s = %q, want %q", id, s, want)
				}
			}
		})
	}
}

func TestRoutes(t *testing.T) {
	t.Parallel()
	g := newGateway(t, gatewayOptions{})
	get := func(path string) *nethttp.Request {
		r, _ := nethttp.NewRequest(nethttp.MethodGet, "http://plantgate.test"+path, nil)
		return r
	}
	del, _ := nethttp.NewRequest(nethttp.MethodDelete, "http://plantgate.test/plants", nil)
	put, _ := nethttp.NewRequest(nethttp.MethodPut, "http://plantgate.test/plants", nil)
	cases := []struct {
		name   string
		req    *nethttp.Request
		status int
		body   string
		header map[string]string
	}{
		{name: "unknown route", req: get("/nope"), status: 404, body: errorBody(40401, "no such route")},
		{name: "unknown nested route", req: get("/plants/1/leaves"), status: 404, body: errorBody(40401, "no such route")},
		{name: "GET /plants is the list", req: get("/plants"), status: 401, body: errorBody(40101, "a bearer credential is required")},
		{name: "PUT /plants", req: put, status: 405, body: errorBody(40501, "method not allowed on this route"), header: map[string]string{"Allow": "GET, HEAD, POST"}},
		{name: "DELETE /plants", req: del, status: 405, body: errorBody(40501, "method not allowed on this route"), header: map[string]string{"Allow": "GET, HEAD, POST"}},
		{name: "healthz", req: get("/healthz"), status: 200, body: `{"status":"ok"}`},
		{name: "readyz", req: get("/readyz"), status: 200, body: `{"status":"ready"}`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := g.do(c.req)
			if got.status != c.status || got.body != c.body {
				t.Fatalf("got %d %s, want %d %s", got.status, got.body, c.status, c.body)
			}
			for k, v := range c.header {
				if got.header.Get(k) != v {
					t.Errorf("header %s = %q, want %q", k, got.header.Get(k), v)
				}
			}
		})
	}
	t.Run("openapi document served", func(t *testing.T) {
		got := g.do(get("/openapi.yaml"))
		if got.status != 200 || !strings.HasPrefix(got.body, "openapi: 3.1.0\n") || got.header.Get("Content-Type") != "application/yaml" {
			t.Fatalf("got %d %q %.40q", got.status, got.header.Get("Content-Type"), got.body)
		}
	})
}

// TestStoreUnavailable stops Redis under the gateway: creates answer 503 with
// Retry-After, readiness drops, and the token lookup inside bearer-auth
// fails closed with its own 503.
func TestStoreUnavailable(t *testing.T) {
	t.Parallel()
	g := newGateway(t, gatewayOptions{})
	if got := g.post(`{"id":1,"name":"a"}`); got.status != 200 {
		t.Fatalf("before: %d %s", got.status, got.body)
	}
	g.mr.Close()
	got := g.post(`{"id":2,"name":"b"}`)
	if got.status != 503 || got.body != errorBody(50350, "token store unavailable") || got.header.Get("Retry-After") != "1" {
		t.Fatalf("create with store down: %d %s Retry-After=%q", got.status, got.body, got.header.Get("Retry-After"))
	}
	r, _ := nethttp.NewRequest(nethttp.MethodGet, "http://plantgate.test/readyz", nil)
	if got := g.do(r); got.status != 503 || got.body != errorBody(50301, "plant store unavailable") || got.header.Get("Retry-After") != "1" {
		t.Fatalf("readyz with store down: %d %s", got.status, got.body)
	}
	if strings.Contains(g.logText(), writerToken) {
		t.Fatal("a log line holds the credential")
	}
}

// TestStoreUnavailableOnCreate keeps the token store reachable but makes the
// plant write fail: the create itself answers 50301.
func TestStoreUnavailableOnCreate(t *testing.T) {
	t.Parallel()
	g := newGateway(t, gatewayOptions{})
	g.mr.SetError("LOADING Redis is loading the dataset in memory")
	defer g.mr.SetError("")
	got := g.post(`{"id":1,"name":"a"}`)
	// With every command failing the token lookup fails first; both are 503s.
	if got.status != 503 || got.header.Get("Retry-After") != "1" {
		t.Fatalf("got %d %s", got.status, got.body)
	}
}

// TestPluginFaultFailsClosed puts a trapping validate plugin after the
// bundled ones: the request fails closed with 500 and no guest text, the
// plant is not stored, and the next request through a healthy chain works.
func TestPluginFaultFailsClosed(t *testing.T) {
	t.Parallel()
	for _, fixture := range []string{"trap.wasm", "loop.wasm", "membomb.wasm", "garbage.wasm"} {
		t.Run(fixture, func(t *testing.T) {
			t.Parallel()
			g := newGateway(t, gatewayOptions{extra: []string{"30-fault.wasm=" + fixture}})
			for i := range 3 {
				got := g.post(`{"id":1,"name":"a"}`)
				if got.status != 500 || (got.body != errorBody(50001, "policy plugin failed; request denied") && got.body != errorBody(50002, "policy plugin returned an invalid decision; request denied")) {
					t.Fatalf("request %d: %d %s", i, got.status, got.body)
				}
				if s := g.stored("1"); s != "" {
					t.Fatalf("a denied plant was stored: %s", s)
				}
			}
		})
	}
}

// TestRealRedis runs the happy path, the conflict and a store outage against
// a redis-server the test starts itself.
func TestRealRedis(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t, redistest.WithAppendOnly())
	g := newGateway(t, gatewayOptions{redisURL: srv.URL()})
	if got := g.post(`{"id":42,"name":"Basil","tag":"herb"}`); got.status != 200 || got.body != `{"name":"Basil","tag":"herb"}` {
		t.Fatalf("create: %d %s\ngateway log:\n%s", got.status, got.body, g.logText())
	}
	if s := g.stored("42"); s != `{"id":42,"name":"Basil","tag":"herb"}` {
		t.Fatalf("stored %q", s)
	}
	if got := g.post(`{"id":42,"name":"Basil","tag":"herb"}`); got.status != 200 {
		t.Fatalf("retry: %d %s", got.status, got.body)
	}
	if got := g.post(`{"id":42,"name":"Basil"}`); got.status != 400 || got.body != errorBody(host.ErrConflict, "plant 42 already exists with other content") {
		t.Fatalf("conflict: %d %s", got.status, got.body)
	}
	srv.Kill()
	if got := g.post(`{"id":43,"name":"Mint"}`); got.status != 503 || got.header.Get("Retry-After") != "1" {
		t.Fatalf("redis down: %d %s", got.status, got.body)
	}
	srv.Restart(t)
	if got := g.post(`{"id":43,"name":"Mint"}`); got.status != 200 {
		t.Fatalf("after restart: %d %s", got.status, got.body)
	}
}

// TestBodyLimit sends bodies over the limit on a real socket, with and
// without Content-Length: each is answered with the Error body, not dropped.
func TestBodyLimit(t *testing.T) {
	t.Parallel()
	g := newGateway(t, gatewayOptions{bodyLimit: 1024})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go g.srv.Serve(ln)
	t.Cleanup(func() { g.srv.App().Shutdown() })
	big := `{"id":9,"name":"` + strings.Repeat("x", 2000) + `"}`
	fits := `{"id":9,"name":"` + strings.Repeat("x", 90) + `"}`
	cases := []struct {
		name, raw string
		status    int
		body      string
	}{
		{name: "content-length over the limit", status: 400, body: errorBody(40005, "request body is larger than the limit"),
			raw: "POST /plants HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + writerToken + "\r\nContent-Type: application/json\r\nContent-Length: " + itoa(len(big)) + "\r\n\r\n" + big},
		{name: "chunked over the limit", status: 400, body: errorBody(40005, "request body is larger than the limit"),
			raw: "POST /plants HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + writerToken + "\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n" +
				chunk(big[:1000]) + chunk(big[1000:]) + "0\r\n\r\n"},
		{name: "chunked within the limit", status: 200, body: `{"name":"` + strings.Repeat("x", 90) + `"}`,
			raw: "POST /plants HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + writerToken + "\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n" +
				chunk(fits[:50]) + chunk(fits[50:]) + "0\r\n\r\n"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			status, body := rawRequest(t, ln.Addr().String(), c.raw)
			if status != c.status || body != c.body {
				t.Fatalf("got %d %s, want %d %s", status, body, c.status, c.body)
			}
		})
	}
}
