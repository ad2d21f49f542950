package http_test

import (
	"context"
	nethttp "net/http"
	"strings"
	"testing"

	"github.com/alicebob/miniredis/v2"
	goredis "github.com/redis/go-redis/v9"

	"github.com/plantgate/plantgate/host/redis"
)

// get sends GET path with the admin token and extra headers (name, value
// pairs).
func (g *gateway) get(path, token string, headers ...string) response {
	g.t.Helper()
	req, _ := nethttp.NewRequest(nethttp.MethodGet, "http://plantgate.test"+path, nil)
	req.Header.Set("Authorization", "Bearer "+token)
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	return g.do(req)
}

// TestRequestContext: an authorize plugin after bearer-auth sees the
// request id, the client address, the headers its sidecar asks for (and no
// other), and the principal bearer-auth's token lookup established; a
// validate plugin sees the principal too.
func TestRequestContext(t *testing.T) {
	t.Parallel()
	g := newGateway(t, gatewayOptions{
		extra:    []string{"30-context.wasm=" + contextPlugin},
		sidecars: map[string]string{"30-context.json": `{"headers": ["X-Echo", "x-tenant"]}`},
	})
	got := g.get("/plants", adminToken, "X-Echo", "context", "X-Tenant", "blue", "X-Request-ID", "req-42", "X-Other", "hidden")
	want := errorBody(40398, `rid=req-42 client=0.0.0.0 tenant="blue"/true principal=admin scopes="plants:delete plants:read plants:write"`)
	if got.status != 403 || got.body != want {
		t.Fatalf("authorize: got %d %s, want 403 %s", got.status, got.body, want)
	}
	got = g.get("/plants", readerToken, "X-Echo", "context", "X-Request-ID", "req-43")
	want = errorBody(40398, `rid=req-43 client=0.0.0.0 tenant=""/false principal=reader scopes="plants:read"`)
	if got.status != 403 || got.body != want {
		t.Fatalf("without X-Tenant: got %d %s, want 403 %s", got.status, got.body, want)
	}
	got = g.post(`{"id":5,"name":"echo"}`)
	want = errorBody(40398, `caller=writer scopes="plants:write" can_write=true`)
	if got.status != 403 || got.body != want {
		t.Fatalf("validate: got %d %s, want 403 %s", got.status, got.body, want)
	}
}

// TestPrincipalOnlyAfterLookup: a plugin before bearer-auth sees no
// principal; the one bearer-auth establishes reaches only later plugins.
func TestPrincipalOnlyAfterLookup(t *testing.T) {
	t.Parallel()
	g := newGateway(t, gatewayOptions{
		extra:    []string{"05-context.wasm=" + contextPlugin},
		sidecars: map[string]string{"05-context.json": `{"headers": ["X-Echo"]}`},
	})
	got := g.get("/plants", adminToken, "X-Echo", "context", "X-Request-ID", "req-1")
	want := errorBody(40398, `rid=req-1 client=0.0.0.0 tenant=""/false principal= scopes=""`)
	if got.status != 403 || got.body != want {
		t.Fatalf("got %d %s, want 403 %s", got.status, got.body, want)
	}
}

// TestResponseHeaders: an allow or a deny may carry headers of the
// allow-list, which reach the client; any other header makes the decision
// invalid (500 50002) and is never sent.
func TestResponseHeaders(t *testing.T) {
	t.Parallel()
	g := newGateway(t, gatewayOptions{
		extra:    []string{"30-context.wasm=" + contextPlugin},
		sidecars: map[string]string{"30-context.json": `{"headers": ["X-Echo"]}`},
	})
	got := g.get("/plants", adminToken, "X-Echo", "headers")
	if got.status != 200 || got.header.Get("RateLimit") != `"default";r=7;t=3` || got.header.Get("RateLimit-Policy") != `"default";q=10;w=5` {
		t.Fatalf("allow: got %d %q %q", got.status, got.header.Get("RateLimit"), got.header.Get("RateLimit-Policy"))
	}
	got = g.get("/plants", adminToken, "X-Echo", "deny-headers")
	if got.status != 429 || got.body != errorBody(42951, "slow down") || got.header.Get("Retry-After") != "9" {
		t.Fatalf("deny: got %d %s Retry-After %q", got.status, got.body, got.header.Get("Retry-After"))
	}

	bad := newGateway(t, gatewayOptions{extra: []string{"30-setcookie.wasm=setcookie.wasm"}})
	got = bad.get("/plants", adminToken)
	if got.status != 500 || got.body != errorBody(50002, "policy plugin returned an invalid decision; request denied") || got.header.Get("Set-Cookie") != "" {
		t.Fatalf("Set-Cookie: got %d %s Set-Cookie %q", got.status, got.body, got.header.Get("Set-Cookie"))
	}
}

// TestKV: the KV host functions through the real stack, with the values
// where the store keeps them; two plugins never see each other's keys;
// the per-call budget; and a store failure the plugin sees.
func TestKV(t *testing.T) {
	t.Parallel()
	g := newGateway(t, gatewayOptions{
		keyPrefix: "kvtest:",
		extra:     []string{"30-kva.wasm=" + kvPlugin, "31-kvb.wasm=" + kvPlugin},
		sidecars:  map[string]string{"30-kva.json": `{"headers": ["X-KV"]}`, "31-kvb.json": `{"headers": ["X-KV"]}`},
	})
	for _, c := range []struct{ cmd, want string }{
		{"set k v1", "set: ok"},
		{"get k", "get: v1"},
		{"incr n", "incr: 1"},
		{"incr n", "incr: 2"},
		{"del k", "del: true"},
		{"del k", "del: false"},
		{"get k", "get: sdk: key not found"},
		{"budget", "budget: call 9: sdk: KV budget of this call spent"},
		{"set k v2", "set: ok"},
	} {
		if got := g.get("/plants", adminToken, "X-KV", c.cmd); got.status != 403 || got.body != errorBody(40397, c.want) {
			t.Fatalf("%s: got %d %s, want 403 %s", c.cmd, got.status, got.body, errorBody(40397, c.want))
		}
	}
	// Stored under kva's namespace, with the key its own hash tag.
	if v, err := g.mr.Get("kvtest:kv:3:kva:{k}"); err != nil || v != "v2" {
		t.Fatalf("stored value = %q, %v; want v2", v, err)
	}
	// kvb runs the same code with the same key, and sees nothing of kva's:
	// to reach it, kva must allow (no X-KV reaches kvb while kva denies), so
	// look from a kvb that runs alone.
	solo := newGateway(t, gatewayOptions{
		redisURL:  "redis://" + g.mr.Addr(),
		keyPrefix: "kvtest:",
		extra:     []string{"31-kvb.wasm=" + kvPlugin},
		sidecars:  map[string]string{"31-kvb.json": `{"headers": ["X-KV"]}`},
	})
	if got := solo.get("/plants", adminToken, "X-KV", "get k"); got.body != errorBody(40397, "get: sdk: key not found") {
		t.Fatalf("kvb reads kva's key: %s", got.body)
	}
	c := goredis.NewClient(&goredis.Options{Addr: g.mr.Addr()})
	defer c.Close()
	if keys, _ := c.Keys(context.Background(), "kvtest:kv:*").Result(); len(keys) != 3 {
		t.Fatalf("kv keys %q, want kva's value, counter and budget keys only", keys)
	}

}

// kvStore is a store for the plugins' KV apart from the gateway's, on a
// miniredis the test can stop.
func kvStore(t *testing.T) (*redis.Store, *miniredis.Miniredis) {
	t.Helper()
	mr := miniredis.RunT(t)
	kv, err := redis.Open(context.Background(), "redis://"+mr.Addr(), redis.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { kv.Close() })
	return kv, mr
}

// TestKVStoreDown: a KV store failure reaches the plugin as an error it
// sees (sdk.ErrUnavailable), while the token store still answers.
func TestKVStoreDown(t *testing.T) {
	t.Parallel()
	kv, mr := kvStore(t)
	g := newGateway(t, gatewayOptions{
		kv:       kv,
		extra:    []string{"30-kv.wasm=" + kvPlugin},
		sidecars: map[string]string{"30-kv.json": `{"headers": ["X-KV"]}`},
	})
	if got := g.get("/plants", adminToken, "X-KV", "set k v"); got.body != errorBody(40397, "set: ok") {
		t.Fatalf("store up: got %d %s", got.status, got.body)
	}
	mr.Close() // the KV's store goes away mid-life
	for _, cmd := range []string{"get k", "set k v", "incr n", "del k"} {
		op, _, _ := strings.Cut(cmd, " ")
		if got := g.get("/plants", adminToken, "X-KV", cmd); got.status != 503 || got.body != errorBody(50397, op+": sdk: store unavailable") || got.header.Get("Retry-After") != "1" {
			t.Fatalf("%s with the store down: got %d %s", cmd, got.status, got.body)
		}
	}
	if !strings.Contains(g.logText(), `msg="plugin KV call failed" plugin=kv op=get`) {
		t.Fatalf("no warning logged:\n%s", g.logText())
	}
}

// TestRequestContextOnSocket: on a real TCP connection the plugin sees the
// peer's address, and a header the sidecar asks for is sent as the first
// of its values, whatever case the client wrote its name in.
func TestRequestContextOnSocket(t *testing.T) {
	t.Parallel()
	g := newGateway(t, gatewayOptions{
		extra:    []string{"30-context.wasm=" + contextPlugin},
		sidecars: map[string]string{"30-context.json": `{"headers": ["X-Echo", "X-Tenant"]}`},
	})
	addr := g.serve(t)
	status, body := rawRequest(t, addr, "GET /plants HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer "+readerToken+
		"\r\nx-echo: context\r\nx-TENANT: red\r\nX-Tenant: green\r\nX-Request-ID: sock-1\r\n\r\n")
	want := errorBody(40398, `rid=sock-1 client=127.0.0.1 tenant="red"/true principal=reader scopes="plants:read"`)
	if status != 403 || body != want {
		t.Fatalf("got %d %s, want 403 %s", status, body, want)
	}
}
