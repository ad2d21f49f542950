package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/plantgate/plantgate/host/redis"
	"github.com/plantgate/plantgate/host/redis/redistest"
	"github.com/plantgate/plantgate/host/wasm/wasmtest"
)

// TestMetricsAfterKnownTraffic sends a known set of requests and reloads,
// then reads exact counter values from the admin listener's /metrics.
func TestMetricsAfterKnownTraffic(t *testing.T) {
	t.Parallel()
	dir := pluginsDir(t, "10-bearer-auth.wasm", "20-plant-rules.wasm")
	m := &Main{
		Listen: "127.0.0.1:0", AdminListen: "127.0.0.1:0", PluginsDir: dir, BootstrapToken: testToken,
		CacheDir: sharedCache, Logger: slog.New(slog.DiscardHandler),
	}
	if err := m.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	base, admin := "http://"+m.Addr().String(), "http://"+m.AdminAddr().String()

	for _, r := range []struct {
		token, body string
		status      int
	}{
		{testToken, `{"id":1,"name":"Monstera"}`, 200},
		{testToken, `{"id":2,"name":"Fern","tag":"green"}`, 200},
		{testToken, `{"id":3,"name":""}`, 400},                 // plant-rules denies
		{"", `{"id":4,"name":"x"}`, 401},                       // no credential: no plugin runs
		{"wrong-token-0123456789", `{"id":5,"name":"x"}`, 401}, // bearer-auth denies
	} {
		if status, body := post(t, base, r.token, r.body); status != r.status {
			t.Fatalf("%s: %d %s", r.body, status, body)
		}
	}
	if status, _, _ := get(t, base+"/nowhere"); status != 404 {
		t.Fatal("GET /nowhere")
	}
	if status, _, _ := get(t, base+"/metrics"); status != 404 {
		t.Fatal("the public listener serves /metrics")
	}
	if status, _, _ := get(t, admin+"/healthz"); status != 200 {
		t.Fatal("admin /healthz")
	}
	if status, _, _ := get(t, admin+"/readyz"); status != 200 {
		t.Fatal("admin /readyz")
	}
	if status, _, _ := get(t, admin+"/debug/pprof/"); status != 404 {
		t.Fatalf("the profiler is served without --pprof: %d", status)
	}
	if err := m.Reload(context.Background()); err != nil { // unchanged
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "30-bad.wasm"), []byte("not wasm"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := m.Reload(context.Background()); err == nil { // refused
		t.Fatal("a bad module was accepted")
	}

	status, body, _ := get(t, admin+"/metrics")
	if status != 200 {
		t.Fatalf("/metrics: %d", status)
	}
	for _, want := range []string{
		`plantgate_http_requests_total{route="/plants",status="200"} 2`,
		`plantgate_http_requests_total{route="/plants",status="400"} 1`,
		`plantgate_http_requests_total{route="/plants",status="401"} 2`,
		`plantgate_http_requests_total{route="other",status="404"} 2`,
		`plantgate_http_request_duration_seconds_count{route="/plants"} 5`,
		`plantgate_plugin_calls_total{outcome="allow",phase="authorize",plugin="bearer-auth"} 3`,
		`plantgate_plugin_calls_total{outcome="deny",phase="authorize",plugin="bearer-auth"} 1`,
		`plantgate_plugin_calls_total{outcome="allow",phase="validate",plugin="plant-rules"} 2`,
		`plantgate_plugin_calls_total{outcome="deny",phase="validate",plugin="plant-rules"} 1`,
		`plantgate_plugin_call_duration_seconds_count{phase="authorize",plugin="bearer-auth"} 4`,
		`plantgate_store_duration_seconds_count{op="create_plant"} 2`,
		`plantgate_store_duration_seconds_count{op="token"} 4`,
		`plantgate_chain_reloads_total{outcome="applied"} 0`,
		`plantgate_chain_reloads_total{outcome="unchanged"} 1`,
		`plantgate_chain_reloads_total{outcome="refused"} 1`,
		`plantgate_plugin_pool_size{plugin="bearer-auth"} `,
		`plantgate_plugin_instances{plugin="plant-rules"} `,
		`plantgate_build_info{`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	for _, absent := range []string{"plantgate_store_errors_total{", "outcome=\"fault\""} {
		if strings.Contains(body, absent) {
			t.Errorf("/metrics has %s", absent)
		}
	}
	if t.Failed() {
		t.Log(body)
	}
}

// TestPprof: --pprof adds the profiler to the admin listener, never to the
// public one, and is refused without an admin listener to put it on.
func TestPprof(t *testing.T) {
	t.Parallel()
	m := &Main{Listen: "127.0.0.1:0", Pprof: true, InsecureNoAuth: true, Logger: slog.New(slog.DiscardHandler)}
	if err := m.Run(context.Background()); err == nil || err.Error() != "--pprof serves on the admin listener: set --admin-listen too" {
		m.Close()
		t.Fatalf("--pprof without --admin-listen: %v", err)
	}
	m.Close()

	m = &Main{Listen: "127.0.0.1:0", AdminListen: "127.0.0.1:0", Pprof: true, InsecureNoAuth: true, Logger: slog.New(slog.DiscardHandler)}
	if err := m.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	status, body, _ := get(t, "http://"+m.AdminAddr().String()+"/debug/pprof/goroutine?debug=1")
	if status != 200 || !strings.Contains(body, "goroutine profile: total") {
		t.Fatalf("admin /debug/pprof/goroutine: %d %.80s", status, body)
	}
	if status, _, _ := get(t, "http://"+m.Addr().String()+"/debug/pprof/goroutine"); status != 404 {
		t.Fatalf("the public listener serves the profiler: %d", status)
	}
}

// TestTokenCache: with --token-cache-ttl a busy token is read from the store
// once per TTL (the store's token counter and the cache's hit counter say
// so), and a revocation in the store takes effect once the TTL has passed.
func TestTokenCache(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	const ttl = 300 * time.Millisecond
	// The counts below need every create to pass: on a loaded machine the
	// plugins' default 100 ms call deadline (which a cold call's token read
	// must fit in) is not what this test is about, so give them longer.
	plugins := pluginsDir(t, "10-bearer-auth.wasm", "20-plant-rules.wasm")
	for _, sidecar := range []string{"10-bearer-auth.json", "20-plant-rules.json"} {
		if err := os.WriteFile(filepath.Join(plugins, sidecar), []byte(`{"limits":{"timeout_ms":3000}}`), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	m := &Main{
		Listen: "127.0.0.1:0", AdminListen: "127.0.0.1:0", RedisURL: srv.URL(),
		PluginsDir: plugins, BootstrapToken: testToken,
		CacheDir: sharedCache, TokenCacheTTL: time.Hour, Logger: slog.New(slog.DiscardHandler),
	}
	if err := m.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	base, admin := "http://"+m.Addr().String(), "http://"+m.AdminAddr().String()
	for i := range 5 {
		if status, body := post(t, base, testToken, fmt.Sprintf(`{"id":%d,"name":"Fern"}`, i+1)); status != 200 {
			t.Fatalf("create %d: %d %s", i+1, status, body)
		}
	}
	status, body, _ := get(t, admin+"/metrics")
	for _, want := range []string{
		`plantgate_token_cache_lookups_total{result="hit"} 4`,
		`plantgate_token_cache_lookups_total{result="miss"} 1`,
		// Start-up's bootstrap check reads the store itself, not the cache.
		`plantgate_store_duration_seconds_count{op="token"} 1`,
	} {
		if status != 200 || !strings.Contains(body, want+"\n") {
			t.Fatalf("/metrics lacks %q:\n%s", want, body)
		}
	}

	// A short TTL: the revocation shows once the cached entry is stale.
	m2 := &Main{
		Listen: "127.0.0.1:0", RedisURL: srv.URL(),
		PluginsDir: plugins,
		CacheDir:   sharedCache, TokenCacheTTL: ttl, Logger: slog.New(slog.DiscardHandler),
	}
	if err := m2.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer m2.Close()
	base2 := "http://" + m2.Addr().String()
	if status, body := post(t, base2, testToken, `{"id":100,"name":"Ivy"}`); status != 200 {
		t.Fatalf("create: %d %s", status, body)
	}
	st, err := redis.Open(context.Background(), srv.URL(), redis.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if n, err := st.RevokeToken(context.Background(), "bootstrap"); err != nil || n != 1 {
		t.Fatalf("revoke: %d %v", n, err)
	}
	id := 100
	var last string
	wasmtest.Eventually(t, "the revocation takes effect", func() bool {
		id++
		var status int
		status, last = post(t, base2, testToken, fmt.Sprintf(`{"id":%d,"name":"Ivy"}`, id))
		return status == 401
	})
	if last != `{"error":40152,"message":"token revoked"}` {
		t.Fatalf("after the TTL: %s", last)
	}
}
