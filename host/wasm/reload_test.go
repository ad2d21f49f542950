package wasm

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/plantgate/plantgate/host"
	"github.com/plantgate/plantgate/host/wasm/wasmtest"
)

var errDenied = &host.Error{Code: 40355, Message: "denied by fixture"}

// newReloader starts a Reloader on dir with one instance per plugin and
// closes it when the test ends.
func newReloader(t *testing.T, dir string, ropts ReloadOptions) (*Reloader, *logRecorder) {
	t.Helper()
	opts, rec := testOptions()
	// A generous deadline: a call must not fail because the machine is
	// busy compiling the next chain (or running the race detector).
	opts.Limits = Limits{Instances: 1, Timeout: 10 * time.Second}
	r, err := NewReloader(context.Background(), Dir(dir), opts, ropts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := r.Close(context.Background()); err != nil {
			t.Error(err)
		}
	})
	return r, rec
}

// dropIn copies fixture into dir as name the safe way: a dotfile, then a
// rename.
func dropIn(t *testing.T, dir, name, fixtureName string) {
	t.Helper()
	data, err := os.ReadFile(fixture(fixtureName))
	if err != nil {
		t.Fatal(err)
	}
	wasmtest.Drop(t, dir, name, data)
}

func files(r *Reloader) string { return strings.Join(pluginFilesOf(r.Plugins()), " ") }

func validateErr(r *Reloader) error {
	return r.Validate(context.Background(), host.Plant{ID: 1, Name: "a"}, "")
}

// TestWatchAddReplaceRemoveRename drives the live chain through the
// directory alone.
func TestWatchAddReplaceRemoveRename(t *testing.T) {
	t.Parallel()
	dir := copyFixtures(t, map[string]string{"10-auth.wasm": "principal"})
	r, _ := newReloader(t, dir, ReloadOptions{RequireAuthorize: true})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// No wait for the watch to start: Watch looks at the directory once
	// when it starts watching, so the first drop is seen whether it lands
	// before that (by the look) or after (by its event).
	go r.Watch(ctx)

	dropIn(t, dir, "20-deny.wasm", "deny")
	took := wasmtest.Eventually(t, "added plugin serves", func() bool { return validateErr(r) != nil })
	t.Logf("drop to serving: %v", took)
	wantError(t, validateErr(r), errDenied)

	dropIn(t, dir, "20-deny.wasm", "allow") // replace
	wasmtest.Eventually(t, "replaced plugin serves", func() bool { return validateErr(r) == nil })
	if got := files(r); got != "10-auth.wasm 20-deny.wasm" {
		t.Fatalf("chain %s", got)
	}

	if err := os.Rename(filepath.Join(dir, "20-deny.wasm"), filepath.Join(dir, "30-allow.wasm")); err != nil {
		t.Fatal(err)
	}
	wasmtest.Eventually(t, "renamed plugin serves", func() bool { return files(r) == "10-auth.wasm 30-allow.wasm" })

	if err := os.Remove(filepath.Join(dir, "30-allow.wasm")); err != nil {
		t.Fatal(err)
	}
	wasmtest.Eventually(t, "removed plugin leaves", func() bool { return files(r) == "10-auth.wasm" })

	dropIn(t, dir, "20-deny.wasm", "deny")
	wasmtest.Eventually(t, "deny back", func() bool { return validateErr(r) != nil })
}

// TestReloadCorruptKeepsServing: a module that fails its checks is refused
// with a log line naming it, and the old chain goes on serving.
func TestReloadCorruptKeepsServing(t *testing.T) {
	t.Parallel()
	dir := copyFixtures(t, map[string]string{"10-auth.wasm": "principal"})
	r, rec := newReloader(t, dir, ReloadOptions{})
	ctx := context.Background()
	for name, content := range map[string]string{
		"20-bad.wasm":     "\x00asm\x01\x00\x00\x00\x01", // cut short, as a half-copied file is
		"30-abi3.wasm":    "",                            // replaced below by a fixture
		"10-auth.json":    `{"limits": {"instances": 0}}`,
		"Not-A-Name.wasm": "x",
	} {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(dir, name)
			if name == "30-abi3.wasm" {
				dropIn(t, dir, name, "abi3")
			} else if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
				t.Fatal(err)
			}
			defer os.Remove(path)
			changed, err := r.Reload(ctx)
			if changed || err == nil || !strings.Contains(err.Error(), name) {
				t.Fatalf("Reload = %v, %v; want a refusal naming %s", changed, err, name)
			}
			if p, err := r.Authorize(ctx, host.AuthorizeRequest{}); err != nil || p != "fixture-user" {
				t.Fatalf("old chain: %q, %v", p, err)
			}
			recs := rec.records()
			if got := recs[len(recs)-1]; got.Msg != "plugin chain reload refused; the previous chain stays in force" || !strings.Contains(got.Attrs["err"], name) {
				t.Fatalf("log %q does not name %s", got, name)
			}
		})
	}
	if changed, err := r.Reload(ctx); changed || err != nil {
		t.Fatalf("clean directory: %v %v", changed, err)
	}
}

// TestReloadRequiresAuthorize: removing the last authorize plugin is
// refused unless serving without authorization was asked for.
func TestReloadRequiresAuthorize(t *testing.T) {
	t.Parallel()
	dir := copyFixtures(t, map[string]string{"10-auth.wasm": "principal"})
	r, _ := newReloader(t, dir, ReloadOptions{RequireAuthorize: true})
	if err := os.Remove(filepath.Join(dir, "10-auth.wasm")); err != nil {
		t.Fatal(err)
	}
	_, err := r.Reload(context.Background())
	if err == nil || !strings.Contains(err.Error(), "no authorize plugin would be left") {
		t.Fatalf("Reload: %v", err)
	}
	if !r.Authorizes() || files(r) != "10-auth.wasm" {
		t.Fatalf("chain changed: %s", files(r))
	}
	if _, err := NewReloader(context.Background(), Dir(dir), Options{}, ReloadOptions{RequireAuthorize: true}); err == nil {
		t.Fatal("NewReloader accepted a chain without an authorize plugin")
	}
}

// TestReloadCarriesOverUnchanged: only changed files are loaded again.
func TestReloadCarriesOverUnchanged(t *testing.T) {
	t.Parallel()
	dir := copyFixtures(t, map[string]string{"10-auth.wasm": "principal", "20-rules.wasm": "allow"})
	r, _ := newReloader(t, dir, ReloadOptions{})
	before := r.loaded["10-auth.wasm"].p
	dropIn(t, dir, "20-rules.wasm", "deny")
	if changed, err := r.Reload(context.Background()); !changed || err != nil {
		t.Fatalf("Reload: %v %v", changed, err)
	}
	if r.loaded["10-auth.wasm"].p != before {
		t.Fatal("the unchanged plugin was loaded again")
	}
	if changed, err := r.Reload(context.Background()); changed || err != nil {
		t.Fatalf("second Reload: %v %v", changed, err)
	}
	// Same bytes under a changed sidecar: loaded again.
	if err := os.WriteFile(filepath.Join(dir, "10-auth.json"), []byte(`{"limits": {"instances": 2}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if changed, err := r.Reload(context.Background()); !changed || err != nil {
		t.Fatalf("Reload after a sidecar change: %v %v", changed, err)
	}
	if r.loaded["10-auth.wasm"].p == before || r.Plugins()[0].Limits.Instances != 2 {
		t.Fatal("a changed sidecar was not applied")
	}
	wasmtest.Eventually(t, "replaced plugin closed", func() bool { return before.pool.closing.Load() })
}

// TestReloadUnderLoad swaps chains while calls run on every core: not one
// call may fail. Not parallel: its load would push other tests' calls past
// their 100 ms deadlines under the race detector.
func TestReloadUnderLoad(t *testing.T) {
	dir := copyFixtures(t, map[string]string{"10-auth.wasm": "principal", "20-a.wasm": "allow"})
	r, _ := newReloader(t, dir, ReloadOptions{})
	ctx := context.Background()
	var calls, failures atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				p, err := r.Authorize(ctx, host.AuthorizeRequest{Method: "POST", Path: "/plants"})
				if err == nil {
					err = r.Validate(ctx, host.Plant{ID: 1, Name: "a"}, p)
				}
				calls.Add(1)
				if err != nil {
					failures.Add(1)
					t.Error(err)
				}
			}
		})
	}
	for i := range 20 {
		fx := []string{"principal", "allow"}[i%2]
		dropIn(t, dir, "20-a.wasm", fx)
		if changed, err := r.Reload(ctx); !changed || err != nil {
			t.Errorf("reload %d: %v %v", i, changed, err)
		}
	}
	close(stop)
	wg.Wait()
	if failures.Load() != 0 || calls.Load() == 0 {
		t.Fatalf("%d of %d calls failed", failures.Load(), calls.Load())
	}
	t.Logf("%d calls across 20 reloads, none failed", calls.Load())
}

// TestReloaderClose: calls after Close fail closed with ErrNotReady.
func TestReloaderClose(t *testing.T) {
	t.Parallel()
	dir := copyFixtures(t, map[string]string{"10-auth.wasm": "principal"})
	opts, _ := testOptions()
	r, err := NewReloader(context.Background(), Dir(dir), opts, ReloadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	p := r.loaded["10-auth.wasm"].p
	if err := r.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Authorize(context.Background(), host.AuthorizeRequest{}); host.Code(err) != host.ErrNotReady {
		t.Fatalf("Authorize after Close: %v", err)
	}
	if r.Authorizes() || !p.pool.closing.Load() {
		t.Fatal("plugins not closed")
	}
	if _, err := r.Reload(context.Background()); err == nil {
		t.Fatal("Reload after Close")
	}
}

// TestReloadLogVersion: the "plugin chain reloaded" line names the store's
// chain version when the source has versions, and no version at all for a
// plugins directory (which has none: it is not a chain generation).
func TestReloadLogVersion(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	dropIn(t, dir, "10-allow.wasm", "allow")
	r, rec := newReloader(t, dir, ReloadOptions{})
	dropIn(t, dir, "20-deny.wasm", "deny")
	if changed, err := r.Reload(context.Background()); !changed || err != nil {
		t.Fatalf("Reload: changed %v, %v", changed, err)
	}
	got := rec.find(t, "plugin chain reloaded")
	if _, ok := got.Attrs["version"]; ok || got.Attrs["source"] != dir || got.Attrs["plugins"] != "[10-allow.wasm 20-deny.wasm]" {
		t.Errorf("directory: attrs %v, want source and plugins and no version", got.Attrs)
	}

	opts, vrec := testOptions()
	opts.Limits = Limits{Instances: 1, Timeout: 10 * time.Second}
	allow, _ := os.ReadFile(fixture("allow"))
	deny, _ := os.ReadFile(fixture("deny"))
	src := &versioned{}
	src.set(Snapshot{Version: 3, Files: []File{{Name: "10-allow.wasm", Module: allow}}})
	ctx := context.Background()
	vr, err := NewReloader(ctx, src, opts, ReloadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer vr.Close(ctx)
	src.set(Snapshot{Version: 4, Files: []File{{Name: "10-allow.wasm", Module: allow}, {Name: "20-deny.wasm", Module: deny}}})
	if changed, err := vr.Reload(ctx); !changed || err != nil {
		t.Fatalf("versioned Reload: changed %v, %v", changed, err)
	}
	if got := vrec.find(t, "plugin chain reloaded"); got.Attrs["version"] != "4" {
		t.Errorf("versioned: attrs %v, want version 4", got.Attrs)
	}
}
