package wasm

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestReloaderSnapshot: the generation counts applied reloads only, a
// refusal is kept with its time and survives a later applied reload, and the
// plugins come with their sidecar config as written.
func TestReloaderSnapshot(t *testing.T) {
	t.Parallel()
	dir := copyFixtures(t, map[string]string{"10-auth.wasm": "principal", "20-conf.wasm": "configure"})
	const config = `{"api_key": "s3cret", "n": 1}`
	if err := os.WriteFile(filepath.Join(dir, "20-conf.json"), []byte(`{"config": `+config+`}`), 0o644); err != nil {
		t.Fatal(err)
	}
	r, _ := newReloader(t, dir, ReloadOptions{})
	ctx := context.Background()

	st, plugins := r.Snapshot()
	if st.Generation != 1 || st.Since.IsZero() || !st.LastReload.IsZero() || st.LastOutcome != "" || st.Refusal != "" {
		t.Fatalf("at start: %+v", st)
	}
	if len(plugins) != 2 || plugins[0].Info.File != "10-auth.wasm" || plugins[0].Config != nil ||
		plugins[1].Info.Name != "conf" || string(plugins[1].Config) != config || plugins[1].Stats.Live != 1 {
		t.Fatalf("plugins: %+v", plugins)
	}

	if _, err := r.Reload(ctx); err != nil {
		t.Fatal(err)
	}
	if st, _ = r.Snapshot(); st.Generation != 1 || st.LastOutcome != ReloadUnchanged || st.LastReload.IsZero() {
		t.Fatalf("after an unchanged reload: %+v", st)
	}

	bad := filepath.Join(dir, "30-bad.wasm")
	if err := os.WriteFile(bad, []byte("not wasm"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Reload(ctx); err == nil {
		t.Fatal("a bad module was accepted")
	}
	st, _ = r.Snapshot()
	if st.Generation != 1 || st.LastOutcome != ReloadRefused || !strings.Contains(st.Refusal, "30-bad.wasm") || !st.RefusedAt.Equal(st.LastReload) {
		t.Fatalf("after a refusal: %+v", st)
	}
	refusedAt := st.RefusedAt

	if err := os.Remove(bad); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"20-conf.wasm", "20-conf.json"} {
		if err := os.Remove(filepath.Join(dir, f)); err != nil {
			t.Fatal(err)
		}
	}
	if changed, err := r.Reload(ctx); !changed || err != nil {
		t.Fatalf("Reload = %v, %v", changed, err)
	}
	st, plugins = r.Snapshot()
	if st.Generation != 2 || st.LastOutcome != ReloadApplied || !st.RefusedAt.Equal(refusedAt) || st.Since.Before(refusedAt) || len(plugins) != 1 {
		t.Fatalf("after an applied reload: %+v, %d plugins", st, len(plugins))
	}

	if err := r.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if st, plugins = r.Snapshot(); st.Generation != 0 || plugins != nil {
		t.Fatalf("closed: %+v %v", st, plugins)
	}
}
