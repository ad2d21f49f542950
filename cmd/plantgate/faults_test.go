package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/plantgate/plantgate/host/redis"
	"github.com/plantgate/plantgate/host/redis/redistest"
	"github.com/plantgate/plantgate/host/wasm/wasmtest"
)

// TestServeStartsWithRedisDown starts the gateway while Redis is down: it
// serves, /readyz and creates answer 503 with Retry-After, and it becomes
// ready by itself (bootstrap token included) once Redis comes up. Then no
// key in Redis holds a token: only digests are stored.
func TestServeStartsWithRedisDown(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t, redistest.WithAppendOnly())
	srv.Kill()
	logs := &syncBuffer{}
	const bootstrap = "bootstrap-token-redis-down-0123456789"
	m := &Main{
		Listen:         "127.0.0.1:0",
		RedisURL:       srv.URL(),
		PluginsDir:     pluginsDir(t, "10-bearer-auth.wasm", "20-plant-rules.wasm"),
		BootstrapToken: bootstrap,
		CacheDir:       t.TempDir(),
		Logger:         slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
	}
	if err := m.Run(context.Background()); err != nil {
		t.Fatalf("Run with Redis down: %v", err)
	}
	defer m.Close()
	base := "http://" + m.Addr().String()

	status, body, retry := get(t, base+"/readyz")
	if status != 503 || body != `{"error":50303,"message":"gateway is not ready"}` || retry != "1" {
		t.Fatalf("readyz with Redis down: %d %s Retry-After=%q", status, body, retry)
	}
	req, _ := http.NewRequest(http.MethodPost, base+"/plants", strings.NewReader(`{"id":1,"name":"a"}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+bootstrap)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 503 || resp.Header.Get("Retry-After") != "1" {
		t.Fatalf("create with Redis down: %d Retry-After=%q", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
	if !strings.Contains(logs.String(), "STORE UNREACHABLE at start-up") {
		t.Fatalf("no loud log line:\n%s", logs)
	}

	srv.Restart(t)
	deadline := time.Now().Add(15 * time.Second)
	for {
		if status, _, _ := get(t, base+"/readyz"); status == 200 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("not ready 15s after Redis came up:\n%s", logs)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if status, body := post(t, base, bootstrap, `{"id":1,"name":"a"}`); status != 200 || body != `{"name":"a"}` {
		t.Fatalf("create after recovery: %d %s", status, body)
	}
	if l := logs.String(); !strings.Contains(l, "store reachable: ready") || !strings.Contains(l, "bootstrap token ensured") {
		t.Fatalf("logs lack the recovery:\n%s", l)
	}

	// Secrets: a created token and the bootstrap token appear nowhere in
	// Redis, in any key or value, nor in the logs.
	ctx := context.Background()
	st, err := redis.Open(ctx, srv.URL(), redis.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	var out strings.Builder
	if err := createToken(ctx, st, &out, "ci", []string{"plants:write"}, 0); err != nil {
		t.Fatal(err)
	}
	token := strings.TrimSpace(out.String())
	dump := dumpRedis(t, srv.Addr())
	for _, secret := range []string{token, bootstrap, strings.TrimPrefix(token, tokenPrefix)} {
		if strings.Contains(dump, secret) {
			t.Fatalf("Redis holds a token in clear:\n%s", dump)
		}
		if strings.Contains(logs.String(), secret) {
			t.Fatalf("a log line holds a token")
		}
	}
	if !strings.Contains(dump, "ci") || !strings.Contains(dump, "bootstrap") {
		t.Fatalf("the dump lacks the token records:\n%s", dump)
	}
}

func get(t *testing.T, url string) (int, string, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), resp.Header.Get("Retry-After")
}

// dumpRedis returns every key and value of every type in the server.
func dumpRedis(t *testing.T, addr string) string {
	t.Helper()
	c := goredis.NewClient(&goredis.Options{Addr: addr})
	defer c.Close()
	ctx := context.Background()
	keys, err := c.Keys(ctx, "*").Result()
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for _, k := range keys {
		typ, _ := c.Type(ctx, k).Result()
		var v any
		switch typ {
		case "string":
			v, err = c.Get(ctx, k).Result()
		case "hash":
			v, err = c.HGetAll(ctx, k).Result()
		case "set":
			v, err = c.SMembers(ctx, k).Result()
		case "zset":
			v, err = c.ZRange(ctx, k, 0, -1).Result()
		case "list":
			v, err = c.LRange(ctx, k, 0, -1).Result()
		}
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&b, "%s %s %v\n", k, typ, v)
	}
	return b.String()
}

// TestBinaryShutdownInFlight sends SIGTERM to the real binary while creates
// are held in flight by a Redis whose writes are paused: every in-flight
// create is answered 200, new connections are refused while they are still
// held, and the process exits 0 in bounded time.
//
// Each step waits on a signal rather than a sleep: CLIENT PAUSE's OK means
// the stall is in force (WRITE mode keeps INFO and the token reads
// answering), the plugins' allow counters on the admin listener mean every
// create's handler is running past its plugins, blocked_clients means a
// create reached Redis and is held there, and the stall lasts until the
// test lifts it with CLIENT UNPAUSE once the listener refuses connections.
func TestBinaryShutdownInFlight(t *testing.T) {
	t.Parallel()
	bin := buildBinary(t)
	srv := redistest.Start(t)
	const token = "shutdown-token-0123456789"
	port, adminPort := freePort(t), freePort(t)
	plugins := pluginsDir(t, "10-bearer-auth.wasm", "20-plant-rules.wasm")
	// The stall lasts as long as the test needs on a loaded machine: the
	// store's reply wait (read_timeout), the request deadline and the
	// token lookup inside bearer-auth's call are all made longer than it.
	if err := os.WriteFile(plugins+"/10-bearer-auth.json", []byte(`{"limits":{"timeout_ms":30000}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "serve", "--listen", "127.0.0.1:"+port, "--admin-listen", "127.0.0.1:"+adminPort,
		"--redis-url", srv.URL()+"?read_timeout=60s", "--request-timeout", "60s", "--token-cache-ttl", "1h",
		"--plugins", plugins, "--bootstrap-token", token, "--shutdown-timeout", "30s")
	cmd.Env = append(os.Environ(), "PLANTGATE_CACHE_DIR="+t.TempDir())
	stderr := &syncBuffer{}
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	t.Cleanup(func() { cmd.Process.Kill() })
	base, admin := "http://127.0.0.1:"+port, "http://127.0.0.1:"+adminPort
	waitReady(t, base, done, stderr)

	const inflight = 8
	// One connection each, opened (and the token cached) before the stall,
	// so each create is one request on an open connection.
	clients := make([]*http.Client, inflight)
	for i := range clients {
		clients[i] = &http.Client{Transport: &http.Transport{}}
		if status, body := postWith(t, clients[i], base, token, fmt.Sprintf(`{"id":%d,"name":"warm"}`, 100+i)); status != 200 {
			t.Fatalf("warm-up: %d %s", status, body)
		}
	}
	rc := goredis.NewClient(&goredis.Options{Addr: srv.Addr()})
	defer rc.Close()
	ctx := context.Background()
	if err := rc.Do(ctx, "CLIENT", "PAUSE", 60_000, "WRITE").Err(); err != nil {
		t.Fatal(err)
	}
	unpause := sync.OnceFunc(func() { rc.Do(ctx, "CLIENT", "UNPAUSE") })
	defer unpause()

	type result struct {
		status int
		body   string
	}
	results := make([]result, inflight)
	var finished atomic.Int32
	var wg sync.WaitGroup
	for i := range inflight {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i].status, results[i].body = postWith(t, clients[i], base, token, fmt.Sprintf(`{"id":%d,"name":"inflight"}`, i+1))
			finished.Add(1)
		}()
	}
	validated := fmt.Sprintf(`plantgate_plugin_calls_total{outcome="allow",phase="validate",plugin="plant-rules"} %d`+"\n", 2*inflight)
	wasmtest.Eventually(t, "every create past its plugins", func() bool {
		_, m, _ := get(t, admin+"/metrics")
		return strings.Contains(m, validated)
	})
	wasmtest.Eventually(t, "a create held by Redis", func() bool {
		info, err := rc.Info(ctx, "clients").Result()
		return err == nil && !strings.Contains(info, "blocked_clients:0\r\n")
	})

	start := time.Now()
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	wasmtest.Eventually(t, "the listener to refuse connections", func() bool {
		c, err := net.DialTimeout("tcp", "127.0.0.1:"+port, time.Second)
		if err != nil {
			return true
		}
		c.Close()
		return false
	})
	if n := finished.Load(); n != 0 {
		t.Fatalf("%d creates finished while Redis held them: the stall did not hold", n)
	}
	unpause()
	wg.Wait()
	for i, r := range results {
		if r.status != 200 || r.body != `{"name":"inflight"}` {
			t.Errorf("in-flight create %d: %d %s", i, r.status, r.body)
		}
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("exit after SIGTERM: %v\n%s", err, stderr)
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("still running 30s after SIGTERM\n%s", stderr)
	}
	t.Logf("exited %v after SIGTERM", time.Since(start).Round(time.Millisecond))
	if strings.Contains(stderr.String(), token) {
		t.Fatal("a log line holds the token")
	}
}

func postWith(t *testing.T, c *http.Client, base, token, body string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, base+"/plants", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := c.Do(req)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestServeRefusesBrokenPlugins drops a broken module beside the bundled
// plugins: serve refuses to start, naming the file and what is wrong.
func TestServeRefusesBrokenPlugins(t *testing.T) {
	t.Parallel()
	root, err := wasmtest.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	cases := map[string]string{
		"abi3.wasm":         "built for ABI version 3, this host speaks 1 to 2",
		"missingphase.wasm": `serves the validate phase but does not export "plantgate_validate"`,
		"badsig.wasm":       `export "plantgate_validate" has signature (i32) -> i64, want (i32, i32) -> i64`,
		"notwasm.wasm":      "not a WebAssembly module",
	}
	for fixture, want := range cases {
		t.Run(fixture, func(t *testing.T) {
			t.Parallel()
			dir := pluginsDir(t, "10-bearer-auth.wasm", "20-plant-rules.wasm")
			b, err := os.ReadFile(filepath.Join(root, "testdata", "abi", fixture))
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, "30-broken.wasm"), b, 0o644); err != nil {
				t.Fatal(err)
			}
			m := &Main{Listen: "127.0.0.1:0", PluginsDir: dir, CacheDir: t.TempDir(), Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
			err = m.Run(context.Background())
			m.Close()
			if err == nil || !strings.Contains(err.Error(), "30-broken.wasm") || !strings.Contains(err.Error(), want) {
				t.Fatalf("Run: %v; want an error naming 30-broken.wasm and %q", err, want)
			}
		})
	}
}
