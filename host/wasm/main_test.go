package wasm

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/plantgate/plantgate/host"
)

// Go-built fixtures, built by TestMain into a temporary directory and never
// committed: testdata/goplugins/<name> for each name.
var (
	goFixtures = map[string]string{} // name → .wasm path
	// goFixtureErr holds why a fixture did not build. Only the raw gopanic
	// fixture must build for TestMain to run; one on the SDK, which is
	// written alongside, fails the tests that use it.
	goFixtureErr = map[string]error{}
)

// cacheDir is a compilation cache shared by every test, so each Go fixture
// is compiled once.
var cacheDir string

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	dir, err := os.MkdirTemp("", "plantgate-wasm-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	cacheDir = filepath.Join(dir, "cache")
	// Built side by side: each is a separate go build.
	var wg sync.WaitGroup
	var mu sync.Mutex
	for name, b := range goBuilds {
		out := filepath.Join(dir, name+".wasm")
		goFixtures[name] = out
		wg.Go(func() {
			err := buildGoFixture(out, b.pkg, b.env, b.flags...)
			mu.Lock()
			goFixtureErr[name] = err
			mu.Unlock()
		})
	}
	buildRegoFixtures(dir, &wg, &mu)
	wg.Wait()
	if err := goFixtureErr["gopanic"]; err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return m.Run()
}

// goBuilds are the Go-built fixtures: packages under testdata/goplugins,
// and the ordinary build mistakes made with the guide's example.
var goBuilds = map[string]struct {
	pkg   string
	env   []string
	flags []string
}{
	"gopanic":  {pkg: "./testdata/goplugins/panic", env: wasip1, flags: cShared},
	"sdkpanic": {pkg: "./testdata/goplugins/sdkpanic", env: wasip1, flags: cShared},
	"oom":      {pkg: "./testdata/goplugins/oom", env: wasip1, flags: cShared},
	"inmain":   {pkg: "./testdata/goplugins/inmain", env: wasip1, flags: cShared},
	"nosdk":    {pkg: "./testdata/goplugins/nosdk", env: wasip1, flags: cShared},
	// Mistakes: GOOS=js, and a wasip1 command (no -buildmode=c-shared).
	"jsbuild":   {pkg: "./sdk/examples/tag-denylist", env: []string{"GOOS=js", "GOARCH=wasm"}},
	"gocommand": {pkg: "./sdk/examples/tag-denylist", env: wasip1},
}

var (
	wasip1  = []string{"GOOS=wasip1", "GOARCH=wasm"}
	cShared = []string{"-buildmode=c-shared"}
)

// buildGoFixture builds the package pkg (relative to the module root) at
// out, with env added to the environment and flags to go build.
func buildGoFixture(out, pkg string, env []string, flags ...string) error {
	cmd := exec.Command("go", append(append([]string{"build"}, flags...), "-o", out, pkg)...)
	cmd.Dir = filepath.Join("..", "..")
	cmd.Env = append(append(os.Environ(), "CGO_ENABLED=0"), env...)
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("build Go fixture %s: %v\n%s", pkg, err, b)
	}
	return nil
}

// fixture returns the path of an ABI fixture: testdata/abi/<name>.wasm, or
// a Go-built one.
func fixture(name string) string {
	if path, ok := goFixtures[name]; ok {
		return path
	}
	return filepath.Join("..", "..", "testdata", "abi", name+".wasm")
}

// logRecorder keeps every log record a test's plugins write.
type logRecorder struct {
	mu   sync.Mutex
	recs []logRecord
}

type logRecord struct {
	Level slog.Level
	Msg   string
	Attrs map[string]string
}

func (r *logRecorder) records() []logRecord {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.recs)
}

// count returns how many records have message msg.
func (r *logRecorder) count(msg string) int {
	n := 0
	for _, rec := range r.records() {
		if rec.Msg == msg {
			n++
		}
	}
	return n
}

// find returns the first record with message msg.
func (r *logRecorder) find(t *testing.T, msg string) logRecord {
	t.Helper()
	for _, rec := range r.records() {
		if rec.Msg == msg {
			return rec
		}
	}
	t.Fatalf("no log record %q in %v", msg, r.records())
	return logRecord{}
}

type logHandler struct {
	r     *logRecorder
	attrs []slog.Attr
}

func (h *logHandler) Enabled(context.Context, slog.Level) bool { return true }

func (h *logHandler) Handle(_ context.Context, rec slog.Record) error {
	attrs := make(map[string]string)
	for _, a := range h.attrs {
		attrs[a.Key] = a.Value.String()
	}
	rec.Attrs(func(a slog.Attr) bool {
		attrs[a.Key] = a.Value.String()
		return true
	})
	h.r.mu.Lock()
	h.r.recs = append(h.r.recs, logRecord{rec.Level, rec.Message, attrs})
	h.r.mu.Unlock()
	return nil
}

func (h *logHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return &logHandler{h.r, append(slices.Clip(h.attrs), as...)}
}

func (h *logHandler) WithGroup(string) slog.Handler { return h }

// testOptions returns Options that log into a recorder and share the test
// compilation cache.
func testOptions() (Options, *logRecorder) {
	rec := &logRecorder{}
	return Options{CacheDir: cacheDir, Logger: slog.New(&logHandler{r: rec})}, rec
}

// load loads a fixture with limits (zero fields: one instance and the
// defaults) and closes it when the test ends.
func load(t testing.TB, name string, config []byte, limits Limits, opts Options) *Plugin {
	t.Helper()
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.CacheDir == "" {
		opts.CacheDir = cacheDir
	}
	opts.Limits = limits.Or(Limits{Instances: 1})
	if err := goFixtureErr[name]; err != nil {
		t.Fatal(err)
	}
	p, err := LoadPlugin(context.Background(), fixture(name), config, opts)
	if err != nil {
		t.Fatalf("load %s: %v", name, err)
	}
	t.Cleanup(func() {
		if p.pool.closing.Load() {
			return // the test closed it and checked the result
		}
		if err := p.Close(context.Background()); err != nil {
			t.Errorf("close %s: %v", name, err)
		}
	})
	return p
}

// wantError checks that err is exactly the *host.Error want (nil for none).
func wantError(t *testing.T, err error, want *host.Error) {
	t.Helper()
	if want == nil {
		if err != nil {
			t.Fatalf("err = %v, want nil", err)
		}
		return
	}
	e, ok := err.(*host.Error)
	if !ok || *e != *want {
		t.Fatalf("err = %#v, want %#v", err, want)
	}
}

// copyFixtures fills a new plugins directory: each key of files is a file
// name, each value a fixture name (copied) or, for other names, the file's
// content.
func copyFixtures(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, src := range files {
		data := []byte(src)
		if strings.HasSuffix(name, ".wasm") {
			var err error
			if data, err = os.ReadFile(fixture(src)); err != nil {
				t.Fatal(err)
			}
		}
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// fakeTokens is a TokenSource over a map, with an injectable error and an
// optional gate that holds every lookup until it is closed.
type fakeTokens struct {
	tokens  map[[32]byte]host.Token
	err     error
	entered chan struct{} // receives one value per lookup, when not nil
	gate    chan struct{} // lookups wait for it to close, when not nil

	mu          sync.Mutex
	hadDeadline bool
}

func (f *fakeTokens) Token(ctx context.Context, digest [32]byte) (host.Token, error) {
	_, ok := ctx.Deadline()
	f.mu.Lock()
	f.hadDeadline = ok
	f.mu.Unlock()
	if f.entered != nil {
		f.entered <- struct{}{}
	}
	if f.gate != nil {
		select {
		case <-f.gate:
		case <-ctx.Done():
			return host.Token{}, ctx.Err()
		}
	}
	if f.err != nil {
		return host.Token{}, f.err
	}
	t, ok := f.tokens[digest]
	if !ok {
		return host.Token{}, host.Errorf(host.ErrTokenNotFound, "no such token")
	}
	return t, nil
}

// digestOf is the "digest" the tokenlookup fixture sends: the credential's
// own 32 bytes.
func digestOf(credential string) (d [32]byte) {
	copy(d[:], credential)
	return d
}

var testTime = time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
