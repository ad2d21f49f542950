package http_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"io"
	"log/slog"
	nethttp "net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	goredis "github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel/trace"

	"github.com/plantgate/plantgate/host"
	gatehttp "github.com/plantgate/plantgate/host/http"
	"github.com/plantgate/plantgate/host/redis"
	"github.com/plantgate/plantgate/host/telemetry"
	"github.com/plantgate/plantgate/host/wasm"
	"github.com/plantgate/plantgate/host/wasm/wasmtest"
)

// The bundled plugins are built once, here, from plugins/ exactly as the
// Makefile builds them; every test then loads them through the drop-in
// directory with a shared compilation cache.
var (
	bundledDir string // holds 10-bearer-auth.wasm and 20-plant-rules.wasm
	cacheDir   string
	moduleRoot string
	// hostilePlugin is testdata/goplugins/hostile built: a validate plugin
	// that panics, crashes, loops, exhausts memory or probes its sandbox on
	// demand (see its doc comment).
	hostilePlugin string
	// operationPlugin is testdata/goplugins/operation built: an authorize
	// plugin that denies 40399 naming the operation it was shown.
	operationPlugin string
	// contextPlugin, kvPlugin: testdata/goplugins/context and kv built (ABI
	// 2 request context and KV; see their doc comments); rateLimitPlugin:
	// plugins/rate-limit built.
	contextPlugin, kvPlugin, rateLimitPlugin string
)

func TestMain(m *testing.M) {
	os.Exit(runMain(m))
}

func runMain(m *testing.M) int {
	tmp, err := os.MkdirTemp("", "plantgate-http-test")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(tmp)
	bundledDir = filepath.Join(tmp, "plugins")
	cacheDir = filepath.Join(tmp, "cache")
	if moduleRoot, err = wasmtest.ModuleRoot(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if err := wasmtest.BuildBundled(bundledDir); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	// Compile once into the shared cache before the parallel tests start;
	// otherwise each would compile the same modules at once (slow under -race).
	chain, err := wasm.Load(context.Background(), wasm.Dir(bundledDir), wasm.Options{CacheDir: cacheDir, Limits: wasm.Limits{Instances: 1}})
	if err != nil {
		fmt.Fprintln(os.Stderr, "warm the compilation cache:", err)
		return 1
	}
	chain.Close(context.Background())
	hostilePlugin = filepath.Join(tmp, "hostile.wasm")
	if err := wasmtest.Build(hostilePlugin, "./testdata/goplugins/hostile"); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	operationPlugin = filepath.Join(tmp, "operation.wasm")
	if err := wasmtest.Build(operationPlugin, "./testdata/goplugins/operation"); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	for out, pkg := range map[*string]string{&contextPlugin: "context", &kvPlugin: "kv", &rateLimitPlugin: "../../plugins/rate-limit"} {
		*out = filepath.Join(tmp, filepath.Base(pkg)+".wasm")
		if err := wasmtest.Build(*out, "./testdata/goplugins/"+pkg); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
	}
	return m.Run()
}

// Tokens every gateway knows.
const (
	writerToken  = "writer-token-0123456789abcdef"
	readerToken  = "reader-token-0123456789abcdef"
	deleterToken = "deleter-token-0123456789abcdef"
	adminToken   = "admin-token-0123456789abcdef" // every scope, like the bootstrap token
)

type gateway struct {
	t      testing.TB
	srv    *gatehttp.Server
	store  *redis.Store
	mr     *miniredis.Miniredis // nil against a real redis-server
	raddr  string               // the Redis address, for reading stored state
	chain  *wasm.Chain
	logs   *bytes.Buffer
	logsMu *sync.Mutex
}

type gatewayOptions struct {
	redisURL  string   // "" = a fresh miniredis
	extra     []string // testdata/abi fixtures (or absolute paths) to copy into the plugins dir, as "NN-name.wasm=fixture.wasm"
	bodyLimit int
	// readTimeout is the server's ReadTimeout; 0 = the default.
	readTimeout time.Duration
	// keyPrefix is the store's; "" = one of its own. Gateways given the same
	// redisURL and keyPrefix share a store, as a fleet does.
	keyPrefix string
	// authOnly leaves out the bundled plant-rules (whose ids start at 1),
	// for tests that need negative ids or empty tags.
	authOnly bool
	// observe is the server's Observe hook; nil = none.
	observe func(route string, status int, took time.Duration)
	// bundled is the directory the bundled plugins are copied from; "" =
	// the ones TestMain built from plugins/.
	bundled string
	// sidecars are written into the plugins dir: file name → content.
	sidecars map[string]string
	// kv backs the plugins' KV; nil = the gateway's store.
	kv host.KV
	// decisions receives the chain's decisions; tracer makes the request
	// spans (and wraps the store in telemetry.Store). nil = none.
	decisions host.DecisionRecorder
	tracer    trace.Tracer
	// corsOrigins is the server's CORSOrigins; handshakeFailed its
	// HandshakeFailed hook.
	corsOrigins     []string
	handshakeFailed func(error)
	// trustTraceparent is Config.TrustTraceparent.
	trustTraceparent bool
}

// newGateway serves the real stack: Fiber, the bundled wasm plugins (plus
// extra fixtures) and a Redis store on miniredis or a real server.
func newGateway(t testing.TB, o gatewayOptions) *gateway {
	t.Helper()
	ctx := context.Background()
	g := &gateway{t: t, logs: new(bytes.Buffer), logsMu: new(sync.Mutex)}
	logger := slog.New(slog.NewTextHandler(lockedWriter{g.logsMu, g.logs}, &slog.HandlerOptions{Level: slog.LevelDebug}))

	url := o.redisURL
	if url == "" {
		g.mr = miniredis.RunT(t)
		url = "redis://" + g.mr.Addr()
	}
	ropts, err := goredis.ParseURL(url)
	if err != nil {
		t.Fatal(err)
	}
	g.raddr = ropts.Addr
	prefix := o.keyPrefix
	if prefix == "" {
		prefix = fmt.Sprintf("test%d:", time.Now().UnixNano())
	}
	st, err := redis.Open(ctx, url, redis.Options{KeyPrefix: prefix})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	g.store = st
	for name, tok := range map[string]string{"writer": writerToken, "reader": readerToken, "deleter": deleterToken, "admin": adminToken} {
		scopes := map[string][]string{
			"writer":  {host.ScopePlantsWrite},
			"reader":  {host.ScopePlantsRead},
			"deleter": {host.ScopePlantsDelete},
			"admin":   host.AllScopes(),
		}[name]
		if err := st.PutToken(ctx, host.Token{Digest: sha256.Sum256([]byte(tok)), Name: name, Scopes: scopes, Created: time.Now()}); err != nil {
			t.Fatal(err)
		}
	}

	dir := t.TempDir()
	from := bundledDir
	if o.bundled != "" {
		from = o.bundled
	}
	for f := range wasmtest.Bundled {
		if o.authOnly && f != "10-bearer-auth.wasm" {
			continue
		}
		copyFile(t, filepath.Join(from, f), filepath.Join(dir, f))
	}
	for _, e := range o.extra {
		dst, src, _ := strings.Cut(e, "=")
		if !filepath.IsAbs(src) {
			src = filepath.Join(moduleRoot, "testdata", "abi", src)
		}
		copyFile(t, src, filepath.Join(dir, dst))
	}
	for name, content := range o.sidecars {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// A 1 s plugin deadline rather than the default 100 ms: these tests run
	// many gateways in parallel on small CI machines, where a guest call can
	// wait on the CPU for longer than 100 ms and fail as a fault.
	var kv host.KV = st
	if o.kv != nil {
		kv = o.kv
	}
	var store host.Store = st
	if o.tracer != nil {
		store = telemetry.Store(st, o.tracer)
	}
	chain, err := wasm.Load(ctx, wasm.Dir(dir), wasm.Options{CacheDir: cacheDir, Tokens: store, KV: kv, Logger: logger, Limits: wasm.Limits{Instances: 2, Timeout: time.Second}, Decisions: o.decisions})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { chain.Close(context.Background()) })
	g.chain = chain
	g.srv, err = gatehttp.New(gatehttp.Config{Store: store, Policy: chain, Logger: logger, AccessLog: true, BodyLimit: o.bodyLimit, RequestTimeout: 2 * time.Second, ReadTimeout: o.readTimeout, CursorKey: st.CursorKey, Observe: o.observe, Tracer: o.tracer,
		CORSOrigins: o.corsOrigins, HandshakeFailed: o.handshakeFailed, TrustTraceparent: o.trustTraceparent})
	if err != nil {
		t.Fatal(err)
	}
	return g
}

type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (l lockedWriter) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(b)
}

func (g *gateway) logText() string {
	g.logsMu.Lock()
	defer g.logsMu.Unlock()
	return g.logs.String()
}

func copyFile(t testing.TB, src, dst string) {
	t.Helper()
	b, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dst, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// response is what a test asserts on.
type response struct {
	status int
	header nethttp.Header
	body   string
}

// do sends one request through Fiber's real stack (app.Test serves it over an
// in-memory connection with fasthttp's parser) and checks the response
// against the OpenAPI document before returning it.
func (g *gateway) do(req *nethttp.Request) response {
	g.t.Helper()
	var reqBody []byte
	if req.Body != nil {
		reqBody, _ = io.ReadAll(req.Body)
		req.Body = io.NopCloser(bytes.NewReader(reqBody))
	}
	resp, err := g.srv.App().Test(req, -1)
	if err != nil {
		g.t.Fatalf("%s %s: %v", req.Method, req.URL.Path, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		g.t.Fatal(err)
	}
	req.Body = io.NopCloser(bytes.NewReader(reqBody))
	checkOpenAPI(g.t, req, resp, body)
	return response{status: resp.StatusCode, header: resp.Header, body: string(body)}
}

// post is POST /plants with a JSON body and the writer's credential.
func (g *gateway) post(body string) response {
	g.t.Helper()
	return g.do(newPost(body, "Bearer "+writerToken, "application/json"))
}

func newPost(body, authorization, contentType string) *nethttp.Request {
	req, _ := nethttp.NewRequest(nethttp.MethodPost, "http://plantgate.test/plants", strings.NewReader(body))
	if authorization != "" {
		req.Header.Set("Authorization", authorization)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	return req
}

// stored returns the canonical record the store holds for id, or "".
func (g *gateway) stored(id string) string {
	g.t.Helper()
	c := goredis.NewClient(&goredis.Options{Addr: g.raddr})
	defer c.Close()
	keys, err := c.Keys(context.Background(), "*:{p[0-9][0-9]}:plant:"+id).Result()
	if err != nil {
		g.t.Fatal(err)
	}
	if len(keys) == 0 {
		return ""
	}
	v, err := c.Get(context.Background(), keys[0]).Result()
	if err != nil {
		g.t.Fatal(err)
	}
	return v
}

func errorBody(code int32, msg string) string {
	return string(gatehttp.AppendError(nil, &host.Error{Code: code, Message: msg}))
}
