package http_test

import (
	"strconv"
	"testing"
)

// TestRateLimit: plugins/rate-limit after bearer-auth, through the real
// stack on the embedded store: the token's budget, then a 429 with
// Retry-After and the RateLimit fields; another token has its own budget.
func TestRateLimit(t *testing.T) {
	t.Parallel()
	g := newGateway(t, gatewayOptions{
		extra:    []string{"30-rate-limit.wasm=" + rateLimitPlugin},
		sidecars: map[string]string{"30-rate-limit.json": `{"config": {"limit": 3, "window": "24h"}}`},
	})
	for i := range 3 {
		if got := g.get("/plants", readerToken); got.status != 200 {
			t.Fatalf("request %d: got %d %s", i+1, got.status, got.body)
		}
	}
	got := g.get("/plants", readerToken)
	retry := got.header.Get("Retry-After")
	secs, err := strconv.Atoi(retry)
	if got.status != 429 || err != nil || secs < 1 || secs > 86400 ||
		got.body != errorBody(42950, "rate limit of 3 requests per 86400 s reached; retry in "+retry+" s") ||
		got.header.Get("RateLimit") != `"default";r=0;t=`+retry || got.header.Get("RateLimit-Policy") != `"default";q=3;w=86400` {
		t.Fatalf("4th: got %d %s, headers %v", got.status, got.body, got.header)
	}
	if got := g.get("/plants", adminToken); got.status != 200 {
		t.Fatalf("another token: got %d %s", got.status, got.body)
	}
}

// TestRateLimitStoreDown: the limiter fails closed when its store fails.
func TestRateLimitStoreDown(t *testing.T) {
	t.Parallel()
	kv, mr := kvStore(t)
	mr.Close()
	g := newGateway(t, gatewayOptions{
		kv:       kv,
		extra:    []string{"30-rate-limit.wasm=" + rateLimitPlugin},
		sidecars: map[string]string{"30-rate-limit.json": `{"config": {"limit": 3}}`},
	})
	if got := g.get("/plants", readerToken); got.status != 503 || got.body != errorBody(50351, "rate limit store unavailable") || got.header.Get("Retry-After") != "1" {
		t.Fatalf("got %d %s", got.status, got.body)
	}
}
