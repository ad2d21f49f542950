package main

import (
	"bytes"
	"context"
	"io"
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
	srv := redistest.Start(t)
	dir := pluginsDir(t, "10-bearer-auth.wasm", "20-plant-rules.wasm")
	side, err := os.ReadFile("../../plugins/bearer-auth/10-bearer-auth.json")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "10-bearer-auth.json"), side, 0o644); err != nil {
		t.Fatal(err)
	}
	const ttl = 300 * time.Millisecond
	m := &Main{
		Listen:        "127.0.0.1:0",
		RedisURL:      srv.URL(),
		PluginsDir:    dir,
		CacheDir:      sharedCache,
		TokenCacheTTL: ttl,
		Logger:        slog.New(slog.NewTextHandler(io.Discard, nil)),
	}
	ctx := context.Background()
	if err := m.Run(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Close() })
	base := "http://" + m.Addr().String()
	st, err := redis.Open(ctx, srv.URL(), redis.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	var out bytes.Buffer
	if err := createToken(ctx, st, &out, "ci", []string{"plants:write"}, 0); err != nil {
		t.Fatal(err)
	}
	token := strings.TrimSpace(out.String())

	for i := range 20 {
		if status, body := post(t, base, token, `{"id":1,"name":"Fern"}`); status != 200 || body != `{"name":"Fern"}` {
			t.Fatalf("create %d: %d %s", i, status, body)
		}
	}
	var kept uint64
	m.reloader.Each(func(p wasm.PluginInfo, st wasm.Stats, _ int64) {
		if p.Name == "bearer-auth" {
			kept = st.Kept
		}
	})
	if kept == 0 {
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
