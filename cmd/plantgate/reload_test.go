package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/plantgate/plantgate/host/wasm/wasmtest"
)

const testToken = "test-token-0123456789abcdef"

// startMain serves the bundled chain from dir with the embedded store and
// an admin listener.
func startMain(t *testing.T, dir string, logs io.Writer) *Main {
	t.Helper()
	if logs == nil {
		logs = io.Discard
	}
	m := &Main{
		Listen: "127.0.0.1:0", AdminListen: "127.0.0.1:0", PluginsDir: dir, BootstrapToken: testToken,
		CacheDir: sharedCache, AccessLog: true, Watch: true, RequestTimeout: 10 * time.Second,
		Logger: slog.New(slog.NewTextHandler(logs, nil)),
	}
	if err := m.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

// fixtureFile is a hand-written ABI fixture of testdata/abi.
func fixtureFile(t testing.TB, name string) []byte {
	t.Helper()
	root, err := wasmtest.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(root, "testdata", "abi", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestHotReloadThroughHTTP: a plugin dropped into the directory of a
// running gateway serves the next requests; a broken one is refused and
// the chain in force keeps serving.
func TestHotReloadThroughHTTP(t *testing.T) {
	t.Parallel()
	dir := pluginsDir(t, "10-bearer-auth.wasm", "20-plant-rules.wasm")
	logs := &syncBuffer{}
	m := startMain(t, dir, logs)
	base := "http://" + m.Addr().String()
	if status, _ := post(t, base, testToken, `{"id":1,"name":"a"}`); status != 200 {
		t.Fatalf("before: %d", status)
	}

	start := time.Now()
	wasmtest.Drop(t, dir, "30-deny.wasm", fixtureFile(t, "deny.wasm"))
	wasmtest.Eventually(t, "dropped deny plugin serves", func() bool {
		status, _ := post(t, base, testToken, `{"id":1,"name":"a"}`)
		return status == 403
	})
	t.Logf("drop to serving (through HTTP): %v", time.Since(start))
	if status, body := post(t, base, testToken, `{"id":1,"name":"a"}`); body != `{"error":40355,"message":"denied by fixture"}` {
		t.Fatalf("after the drop: %d %s", status, body)
	}

	// Copied in place, and broken: refused, the previous chain serves.
	if err := os.WriteFile(filepath.Join(dir, "40-broken.wasm"), []byte("\x00asm\x01\x00"), 0o644); err != nil {
		t.Fatal(err)
	}
	wasmtest.Eventually(t, "refusal logged", func() bool { return strings.Contains(logs.String(), "40-broken.wasm") })
	if !strings.Contains(logs.String(), "plugin chain reload refused; the previous chain stays in force") {
		t.Fatalf("no refusal line:\n%s", logs)
	}
	if status, _ := post(t, base, testToken, `{"id":1,"name":"a"}`); status != 403 {
		t.Fatalf("old chain not serving: %d", status)
	}

	// Removing both brings back the bundled chain.
	os.Remove(filepath.Join(dir, "40-broken.wasm"))
	os.Remove(filepath.Join(dir, "30-deny.wasm"))
	wasmtest.Eventually(t, "back to the bundled chain", func() bool {
		status, _ := post(t, base, testToken, `{"id":1,"name":"a"}`)
		return status == 200
	})

	// Removing the authorize plugin is refused: serve runs with auth.
	os.Remove(filepath.Join(dir, "10-bearer-auth.wasm"))
	if err := m.Reload(context.Background()); err == nil || !strings.Contains(err.Error(), "no authorize plugin would be left") {
		t.Fatalf("Reload without an authorize plugin: %v", err)
	}
	if status, _ := post(t, base, "", `{"id":1,"name":"a"}`); status != 401 {
		t.Fatalf("authorization dropped: %d", status)
	}
}

// TestReloadUnderHTTPLoad replaces a plugin's sidecar again and again
// while clients send requests: none may fail.
//
// Not parallel, and with plugin deadlines of five seconds: on a 2-core machine
// eight clients plus another test compiling plugins can hold a call off
// the CPU past the default 100 ms, which would fail it for a reason that
// has nothing to do with reloading.
func TestReloadUnderHTTPLoad(t *testing.T) {
	dir := pluginsDir(t, "10-bearer-auth.wasm", "20-plant-rules.wasm")
	wasmtest.Drop(t, dir, "10-bearer-auth.json", []byte(`{"limits": {"timeout_ms": 5000}}`))
	m := startMain(t, dir, nil)
	base := "http://" + m.Addr().String()
	// A connection per request: a keep-alive connection the server closes
	// as idle while the client reuses it is a transport race this test is
	// not about.
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	var sent, failed atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				req, _ := http.NewRequest("POST", base+"/plants", strings.NewReader(fmt.Sprintf(`{"id":%d,"name":"fern"}`, w*1_000_000+i+1)))
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("Authorization", "Bearer "+testToken)
				resp, err := client.Do(req)
				sent.Add(1)
				if err != nil {
					failed.Add(1)
					t.Error(err)
					continue
				}
				body, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode != 200 {
					failed.Add(1)
					t.Errorf("%d %s", resp.StatusCode, body)
				}
			}
		})
	}
	for i := range 10 {
		sidecar := fmt.Sprintf(`{"config": {"name_max": %d}, "limits": {"timeout_ms": 5000}}`, 50+i)
		wasmtest.Drop(t, dir, "20-plant-rules.json", []byte(sidecar))
		if err := m.Reload(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	close(stop)
	wg.Wait()
	if failed.Load() != 0 || sent.Load() == 0 {
		t.Fatalf("%d of %d requests failed", failed.Load(), sent.Load())
	}
	t.Logf("%d requests across 10 reloads, none failed", sent.Load())
}
