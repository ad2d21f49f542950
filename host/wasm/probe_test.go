package wasm

import (
	"context"
	"path/filepath"
	"testing"
)

// TestConfigRequired: a module whose plantgate_config_required answers
// non-zero is refused without a config, naming the sidecar to give it, and
// loads with one.
func TestConfigRequired(t *testing.T) {
	t.Parallel()
	dir := copyFixtures(t, map[string]string{"10-needsconfig.wasm": "needsconfig"})
	file := filepath.Join(dir, "10-needsconfig.wasm")
	opts, _ := testOptions()
	opts.Limits = Limits{Instances: 1}.Or(DefaultLimits())
	_, err := LoadPlugin(context.Background(), file, nil, opts)
	want := `plugin 10-needsconfig.wasm: requires a config (plantgate_config_required answered 1) and has none: give its sidecar 10-needsconfig.json a "config" (docs/abi.md#config)`
	if err == nil || err.Error() != want {
		t.Fatalf("load without a config: %v, want %s", err, want)
	}
	p, err := LoadPlugin(context.Background(), file, []byte(`{}`), opts)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close(context.Background())
	if !p.Info().ConfigRequired || !p.Info().HasConfig {
		t.Fatalf("info %+v, want ConfigRequired and HasConfig", p.Info())
	}
	// A module without the export needs none.
	if p := load(t, "allow", nil, Limits{}, opts); p.Info().ConfigRequired {
		t.Fatal("allow: ConfigRequired")
	}
}
