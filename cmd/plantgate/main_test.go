package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/plantgate/plantgate/host/redis"
	"github.com/plantgate/plantgate/host/redis/redistest"
	"github.com/plantgate/plantgate/host/wasm"
	"github.com/plantgate/plantgate/host/wasm/wasmtest"
)

var (
	bundledDir string // the bundled plugins, built once
	// sharedCache is a compilation cache for the tests that do not measure
	// start-up: each Go plugin is compiled once, not once per test, which
	// would load a 2-core machine enough to time out store calls.
	sharedCache string
)

func TestMain(m *testing.M) {
	if file := os.Getenv(spinChildEnv); file != "" {
		spinChild(file) // TestPluginRunNoCollectionDuringSpin's child; exits
	}
	tmp, err := os.MkdirTemp("", "plantgate-cmd-test")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	bundledDir = filepath.Join(tmp, "plugins")
	sharedCache = filepath.Join(tmp, "cache")
	if err := wasmtest.BuildBundled(bundledDir); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	// Compile once before the parallel tests start, so that each finds the
	// modules in the on-disk cache, as a restarted gateway does.
	chain, err := wasm.Load(context.Background(), wasm.Dir(bundledDir), wasm.Options{CacheDir: sharedCache, Limits: wasm.Limits{Instances: 1}})
	if err != nil {
		fmt.Fprintln(os.Stderr, "warm the compilation cache:", err)
		os.Exit(1)
	}
	chain.Close(context.Background())
	code := m.Run()
	fleetCluster.Close()
	os.RemoveAll(tmp)
	os.Exit(code)
}

// syncBuffer collects log output from concurrent writers.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func post(t testing.TB, base, token, body string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, base+"/plants", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	status, body, _ := send(t, req, token)
	return status, body
}

// send sends req with the bearer token ("" for none) and returns the
// status, the body and the headers.
func send(t testing.TB, req *http.Request, token string) (int, string, http.Header) {
	t.Helper()
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), resp.Header
}

// pluginsDir returns a fresh drop-in directory holding the named bundled plugins.
func pluginsDir(t testing.TB, files ...string) string {
	t.Helper()
	dir := t.TempDir()
	for _, f := range files {
		b, err := os.ReadFile(filepath.Join(bundledDir, f))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, f), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// TestServeWithRealRedis runs the whole gateway in process against a real
// redis-server: bootstrap token, token create/list/revoke, and logs that
// never hold a credential.
func TestServeWithRealRedis(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t, redistest.WithAppendOnly())
	logs := &syncBuffer{}
	const bootstrap = "bootstrap-token-for-tests-0123456789"
	m := &Main{
		Listen:         "127.0.0.1:0",
		RedisURL:       srv.URL(),
		PluginsDir:     pluginsDir(t, "10-bearer-auth.wasm", "20-plant-rules.wasm"),
		BootstrapToken: bootstrap,
		CacheDir:       sharedCache,
		AccessLog:      true,
		Logger:         slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
	}
	ctx := context.Background()
	if err := m.Run(ctx); err != nil {
		t.Fatal(err)
	}
	base := "http://" + m.Addr().String()

	if status, body := post(t, base, bootstrap, `{"id":1,"name":"Monstera","tag":"tropical"}`); status != 200 || body != `{"name":"Monstera","tag":"tropical"}` {
		t.Fatalf("create with bootstrap token: %d %s", status, body)
	}

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
	if !strings.HasPrefix(token, tokenPrefix) || len(token) != len(tokenPrefix)+43 {
		t.Fatalf("token %q: want %s and 43 base64url characters", token, tokenPrefix)
	}
	if status, body := post(t, base, token, `{"id":2,"name":"Fern"}`); status != 200 || body != `{"name":"Fern"}` {
		t.Fatalf("create with a new token: %d %s", status, body)
	}

	out.Reset()
	if err := listTokens(ctx, st, &out); err != nil {
		t.Fatal(err)
	}
	list := out.String()
	for _, want := range []string{"NAME", "bootstrap", "plants:read plants:write", "ci", "plants:write", "active"} {
		if !strings.Contains(list, want) {
			t.Errorf("token list lacks %q:\n%s", want, list)
		}
	}
	if strings.Contains(list, token) || strings.Contains(list, bootstrap) {
		t.Fatal("token list shows a token")
	}

	// The use is recorded in the background, at most once a minute.
	var ciLine string
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		out.Reset()
		if err := listTokens(ctx, st, &out); err != nil {
			t.Fatal(err)
		}
		for line := range strings.SplitSeq(out.String(), "\n") {
			if strings.HasPrefix(line, "ci ") {
				ciLine = line
			}
		}
		if f := strings.Fields(ciLine); len(f) == 6 && f[3] != "never" {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if f := strings.Fields(ciLine); len(f) != 6 || f[3] == "never" || f[4] != "never" || f[5] != "active" {
		t.Fatalf("ci's last use not listed: %q", ciLine)
	}

	if n, err := st.RevokeToken(ctx, "ci"); err != nil || n != 1 {
		t.Fatalf("revoke: %d %v", n, err)
	}
	if status, body := post(t, base, token, `{"id":3,"name":"Ivy"}`); status != 401 || body != `{"error":40152,"message":"token revoked"}` {
		t.Fatalf("create with a revoked token: %d %s", status, body)
	}

	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	if l := logs.String(); strings.Contains(l, token) || strings.Contains(l, bootstrap) {
		t.Fatalf("logs hold a credential:\n%s", l)
	}
	if l := logs.String(); !strings.Contains(l, "persistence=") || !strings.Contains(l, "principal=ci") {
		t.Fatalf("logs lack the store's persistence or the principal:\n%s", l)
	}
}

func TestServeRefusesWithoutAuthorization(t *testing.T) {
	t.Parallel()
	dir := pluginsDir(t, "20-plant-rules.wasm")
	m := &Main{Listen: "127.0.0.1:0", PluginsDir: dir, CacheDir: sharedCache, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	err := m.Run(context.Background())
	m.Close()
	want := fmt.Sprintf("no authorize plugin is loaded (plugins dir %q); refusing to serve unauthenticated traffic: add one (e.g. bin/plugins/10-bearer-auth.wasm) or pass --insecure-no-auth", dir)
	if err == nil || err.Error() != want {
		t.Fatalf("Run: %v\nwant %s", err, want)
	}
}

func TestServeInsecureNoAuth(t *testing.T) {
	t.Parallel()
	m := &Main{Listen: "127.0.0.1:0", PluginsDir: pluginsDir(t, "20-plant-rules.wasm"), InsecureNoAuth: true, CacheDir: sharedCache,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	if err := m.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	base := "http://" + m.Addr().String()
	if status, body := post(t, base, "", `{"id":1,"name":"a"}`); status != 200 || body != `{"name":"a"}` {
		t.Fatalf("got %d %s", status, body)
	}
	if status, body := post(t, base, "", `{"id":2,"name":""}`); status != 400 || body != `{"error":40051,"message":"name must be 1–100 characters after trimming, got 0"}` {
		t.Fatalf("got %d %s", status, body)
	}
}

func TestCLIErrors(t *testing.T) {
	t.Parallel()
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"plantgate", "token", "list"}, errNoStore.Error()},
		{[]string{"plantgate", "serve", "--log-level", "loud"}, `--log-level "loud": want debug, info, warn or error`},
		{[]string{"plantgate", "serve", "--log-format", "xml"}, `--log-format "xml": want text or json`},
	}
	for _, c := range cases {
		app := newApp()
		app.Writer, app.ErrWriter = io.Discard, io.Discard
		err := app.Run(context.Background(), c.args)
		if err == nil || err.Error() != c.want {
			t.Errorf("%v: %v, want %s", c.args, err, c.want)
		}
	}
	var out bytes.Buffer
	err := createToken(context.Background(), nil, &out, "x", []string{"plants:everything"}, 0)
	if err == nil || err.Error() != `unknown scope "plants:everything": want one of plants:delete, plants:read, plants:write` {
		t.Errorf("createToken with an unknown scope: %v", err)
	}
}

// TestBinary builds bin/plantgate and runs it as an operator would:
// `serve --redis-url … --plugins … --bootstrap-token …` against a real
// redis-server; it serves, then exits cleanly on SIGTERM.
func TestBinary(t *testing.T) {
	t.Parallel()
	bin := buildBinary(t)
	srv := redistest.Start(t)
	const token = "T"
	port, adminPort := freePort(t), freePort(t)
	plugins := pluginsDir(t, "10-bearer-auth.wasm", "20-plant-rules.wasm")
	cmd := exec.Command(bin, "serve", "--listen", "127.0.0.1:"+port, "--redis-url", srv.URL(), "--plugins", plugins, "--bootstrap-token", token,
		"--admin-listen", "127.0.0.1:"+adminPort)
	// Watching off: only SIGHUP reloads, which is what this test checks.
	cmd.Env = append(os.Environ(), "PLANTGATE_CACHE_DIR="+sharedCache, "PLANTGATE_LOG_FORMAT=json", "PLANTGATE_WATCH=false")
	stderr := &syncBuffer{}
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	t.Cleanup(func() { cmd.Process.Kill() })
	base := "http://127.0.0.1:" + port
	waitReady(t, base, done, stderr)
	if status, body := post(t, base, token, `{"id":7,"name":"Basil","tag":"herb"}`); status != 200 || body != `{"name":"Basil","tag":"herb"}` {
		t.Fatalf("create: %d %s", status, body)
	}

	// SIGHUP reloads the chain: a plugin dropped in serves afterwards.
	wasmtest.Drop(t, plugins, "30-deny.wasm", fixtureFile(t, "deny.wasm"))
	if status, _ := post(t, base, token, `{"id":8,"name":"Sage"}`); status != 200 {
		t.Fatalf("reloaded without SIGHUP (watching is off): %d", status)
	}
	if err := cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	wasmtest.Eventually(t, "SIGHUP reload", func() bool {
		status, _ := post(t, base, token, `{"id":9,"name":"Mint"}`)
		return status == 403
	})
	if status, body, _ := get(t, "http://127.0.0.1:"+adminPort+"/metrics"); status != 200 || !strings.Contains(body, `plantgate_chain_reloads_total{outcome="applied"} 1`) {
		t.Fatalf("admin /metrics: %d\n%s", status, body)
	}
	// The stamped build, on the admin listener only: the public /readyz
	// tells the internet nothing about which release to attack.
	wantReady := `{"status":"ready","version":"` + testVersion + `","revision":"` + testRevision + `"}`
	if status, body, _ := get(t, "http://127.0.0.1:"+adminPort+"/readyz"); status != 200 || body != wantReady {
		t.Fatalf("admin /readyz: %d %s, want 200 %s", status, body, wantReady)
	}
	if _, body, _ := get(t, "http://127.0.0.1:"+adminPort+"/metrics"); !strings.Contains(body,
		`plantgate_build_info{go_version="`+runtime.Version()+`",revision="`+testRevision+`",version="`+testVersion+`"} 1`) {
		t.Fatalf("admin /metrics lacks the stamped build:\n%s", body)
	}

	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("exit after SIGTERM: %v\n%s", err, stderr)
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("still running 30s after SIGTERM\n%s", stderr)
	}
	if !strings.Contains(stderr.String(), `"msg":"shutting down"`) {
		t.Fatalf("no shutdown line in the log:\n%s", stderr)
	}
}

var (
	binOnce sync.Once
	binPath string
	binErr  error
)

const (
	buildinfoPkg = "github.com/plantgate/plantgate/host/buildinfo"
	testVersion  = "v0.0.0-test"
	testRevision = "0123456789abcdef0123456789abcdef01234567"
)

// buildBinary builds bin/plantgate once per test run, into the test's
// temporary directory.
func buildBinary(t testing.TB) string {
	t.Helper()
	binOnce.Do(func() {
		root, err := wasmtest.ModuleRoot()
		if err != nil {
			binErr = err
			return
		}
		binPath = filepath.Join(filepath.Dir(bundledDir), "plantgate")
		// Stamped as `make build` stamps it, where Go records no VCS data,
		// so --version shows that the stamp is what names the build.
		build := exec.Command("go", "build", "-ldflags", "-X "+buildinfoPkg+".version="+testVersion+" -X "+buildinfoPkg+".revision="+testRevision,
			"-o", binPath, "./cmd/plantgate")
		build.Dir = root
		build.Env = append(os.Environ(), "GOFLAGS=-buildvcs=false")
		if b, err := build.CombinedOutput(); err != nil {
			binErr = fmt.Errorf("build: %v\n%s", err, b)
		}
	})
	if binErr != nil {
		t.Fatal(binErr)
	}
	return binPath
}

func waitReady(t testing.TB, base string, done chan error, logs *syncBuffer) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case err := <-done:
			t.Fatalf("exited before ready: %v\n%s", err, logs)
		default:
		}
		if resp, err := http.Get(base + "/readyz"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("not ready within 60s\n%s", logs)
}

// freePort returns a loopback TCP port that was free a moment ago and that
// no other test of this process (nor a redis-server it started) has been
// handed.
func freePort(t testing.TB) string {
	t.Helper()
	port, err := redistest.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	return strconv.Itoa(port)
}

// TestCloseRightAfterRun shuts down before the server goroutine may have
// begun accepting, and after a Run that failed to listen: Close returns.
func TestCloseRightAfterRun(t *testing.T) {
	t.Parallel()
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	for range 20 {
		m := &Main{Listen: "127.0.0.1:0", PluginsDir: pluginsDir(t, "20-plant-rules.wasm"), InsecureNoAuth: true, CacheDir: sharedCache, Logger: quiet, ShutdownTimeout: 5 * time.Second}
		if err := m.Run(context.Background()); err != nil {
			t.Fatal(err)
		}
		if err := m.Close(); err != nil {
			t.Fatalf("Close right after Run: %v", err)
		}
	}
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	m := &Main{Listen: busy.Addr().String(), PluginsDir: pluginsDir(t, "20-plant-rules.wasm"), InsecureNoAuth: true, CacheDir: sharedCache, Logger: quiet}
	if err := m.Run(context.Background()); err == nil || !strings.Contains(err.Error(), "listen on "+busy.Addr().String()) {
		t.Fatalf("Run on a busy port: %v", err)
	}
	if err := m.Close(); err != nil {
		t.Fatalf("Close after a failed Run: %v", err)
	}
}
