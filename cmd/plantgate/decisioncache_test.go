package main

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/plantgate/plantgate/host/redis"
	"github.com/plantgate/plantgate/host/redis/redistest"
	"github.com/plantgate/plantgate/host/wasm"
)

// TestKeptDecisionSeesRevoke runs the gateway on a real redis-server with
// bearer-auth's shipped sidecar (plugins/bearer-auth/10-bearer-auth.json,
// which declares a decision cache) and a token cache: repeated creates are
// answered from the kept decision, and once the token cache's TTL has
// passed after a revoke, the very next request is refused, through the
// real Fiber stack.
func TestKeptDecisionSeesRevoke(t *testing.T) {
	t.Parallel()
	side, err := os.ReadFile("../../plugins/bearer-auth/10-bearer-auth.json")
	if err != nil {
		t.Fatal(err)
	}
	const ttl = 300 * time.Millisecond
	m, base, st, newToken := keptDecisionGateway(t, string(side), ttl)
	ctx := context.Background()
	token := newToken("ci", "plants:write")

	for i := range 20 {
		if status, body := post(t, base, token, `{"id":1,"name":"Fern"}`); status != 200 || body != `{"name":"Fern"}` {
			t.Fatalf("create %d: %d %s", i, status, body)
		}
	}
	if keptBy(m, "bearer-auth") == 0 {
		t.Fatal("20 creates with one token: no decision kept")
	}

	if n, err := st.RevokeToken(ctx, "ci"); err != nil || n != 1 {
		t.Fatalf("revoke: %d %v", n, err)
	}
	time.Sleep(ttl + 50*time.Millisecond)
	if status, body := post(t, base, token, `{"id":1,"name":"Fern"}`); status != 401 || body != `{"error":40152,"message":"token revoked"}` {
		t.Fatalf("create with a revoked token, the token cache's TTL after the revoke: %d %s", status, body)
	}
	// The revoked answer is kept in turn, and stays a refusal.
	if status, body := post(t, base, token, `{"id":1,"name":"Fern"}`); status != 401 || body != `{"error":40152,"message":"token revoked"}` {
		t.Fatalf("again: %d %s", status, body)
	}
}

// keptDecisionGateway runs the gateway in process on a real redis-server,
// with bearer-auth's sidecar and the token cache's TTL given (a decision
// is kept only from a token cache's answer). It returns the gateway, its
// base URL, the store and a maker of tokens with the scopes given.
func keptDecisionGateway(t *testing.T, sidecar string, tokenTTL time.Duration) (*Main, string, *redis.Store, func(name string, scopes ...string) string) {
	t.Helper()
	srv := redistest.Start(t)
	dir := pluginsDir(t, "10-bearer-auth.wasm", "20-plant-rules.wasm")
	writeFile(t, filepath.Join(dir, "10-bearer-auth.json"), sidecar)
	m := &Main{
		Listen: "127.0.0.1:0", RedisURL: srv.URL(), PluginsDir: dir, CacheDir: sharedCache,
		TokenCacheTTL: tokenTTL, Logger: slog.New(slog.DiscardHandler),
	}
	ctx := context.Background()
	if err := m.Run(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Close() })
	st, err := redis.Open(ctx, srv.URL(), redis.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	token := func(name string, scopes ...string) string {
		t.Helper()
		var out bytes.Buffer
		if err := createToken(ctx, st, &out, name, scopes, 0); err != nil {
			t.Fatal(err)
		}
		return strings.TrimSpace(out.String())
	}
	return m, "http://" + m.Addr().String(), st, token
}

// keptBy is how many decisions the plugin named has kept.
func keptBy(m *Main, plugin string) uint64 {
	var kept uint64
	m.reloader.Each(func(p wasm.PluginInfo, st wasm.Stats, _ int64) {
		if p.Name == plugin {
			kept = st.Kept
		}
	})
	return kept
}
