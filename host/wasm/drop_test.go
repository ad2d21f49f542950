package wasm

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"testing"

	"github.com/plantgate/plantgate/host/wasm/wasmtest"
)

// TestWatchModuleAndSidecarAtomic: a module and its sidecar dropped one
// after the other, in either order, make one new generation whose plugin
// has the config; no reload is refused on the way.
func TestWatchModuleAndSidecarAtomic(t *testing.T) {
	t.Parallel()
	for _, order := range [][]string{{"json", "wasm"}, {"wasm", "json"}} {
		t.Run(order[0]+" then "+order[1], func(t *testing.T) {
			t.Parallel()
			dir := copyFixtures(t, map[string]string{"10-auth.wasm": "principal"})
			r, rec := newReloader(t, dir, ReloadOptions{RequireAuthorize: true})
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			go r.Watch(ctx)
			before, _ := r.Snapshot()

			module, err := os.ReadFile(fixture("configure"))
			if err != nil {
				t.Fatal(err)
			}
			content := map[string][]byte{"wasm": module, "json": []byte(`{"config": {"rule": "x"}}`)}
			for _, ext := range order {
				// Written in place, not renamed: what a plain cp does.
				if err := os.WriteFile(filepath.Join(dir, "20-conf."+ext), content[ext], 0o644); err != nil {
					t.Fatal(err)
				}
			}
			wasmtest.Eventually(t, "the new plugin serves", func() bool { return files(r) == "10-auth.wasm 20-conf.wasm" })
			// Nothing more to load: a manual reload changes nothing, so
			// the generation seen is the last one.
			if changed, err := r.Reload(ctx); changed || err != nil {
				t.Fatalf("Reload after the drop = %v, %v", changed, err)
			}
			after, plugins := r.Snapshot()
			if after.Generation != before.Generation+1 {
				t.Fatalf("generation %d → %d, want one new generation", before.Generation, after.Generation)
			}
			if got := string(plugins[1].Config); got != `{"rule": "x"}` {
				t.Fatalf("plugin config %q, want the sidecar's", got)
			}
			if n := rec.count("plugin chain reload refused; the previous chain stays in force"); n != 0 {
				t.Fatalf("%d refused reloads on the way: %v", n, rec.records())
			}
		})
	}
}

// TestReloadRefusalWarnsRecoveryInforms: a refused reload is a warning (the
// gateway serves on), the reload that loads again an info line saying so.
func TestReloadRefusalWarnsRecoveryInforms(t *testing.T) {
	t.Parallel()
	dir := copyFixtures(t, map[string]string{"10-auth.wasm": "principal"})
	r, rec := newReloader(t, dir, ReloadOptions{})
	ctx := context.Background()
	side := filepath.Join(dir, "10-auth.json")
	if err := os.WriteFile(side, []byte(`{"limits": {"instances": 0}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Reload(ctx); err == nil {
		t.Fatal("bad sidecar loaded")
	}
	if got := rec.find(t, "plugin chain reload refused; the previous chain stays in force"); got.Level != slog.LevelWarn {
		t.Fatalf("refusal logged at %v, want WARN", got.Level)
	}
	if err := os.WriteFile(side, []byte(`{"limits": {"instances": 2}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if changed, err := r.Reload(ctx); !changed || err != nil {
		t.Fatalf("fixed sidecar: %v %v", changed, err)
	}
	if got := rec.find(t, "plugin chain recovered: the new chain loaded after a refused reload"); got.Level != slog.LevelInfo {
		t.Fatalf("recovery logged at %v, want INFO", got.Level)
	}
}
