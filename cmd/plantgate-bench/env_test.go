package main

import (
	"os"
	"path/filepath"
	"testing"
)

// TestTrustedPlugins: every module is copied with a sidecar that turns
// limits.interrupt off and keeps the config and other limits it had.
func TestTrustedPlugins(t *testing.T) {
	src, dst := t.TempDir(), filepath.Join(t.TempDir(), "trusted")
	files := map[string]string{
		"10-a.wasm": "\x00asm-a",
		"20-b.wasm": "\x00asm-b",
		"20-b.json": `{"config": {"name_max": 60}, "limits": {"instances": 2, "interrupt": true}}`,
	}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(src, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := trustedPlugins(src, dst)
	if err != nil || got != dst {
		t.Fatalf("trustedPlugins = %q, %v", got, err)
	}
	want := map[string]string{
		"10-a.wasm": "\x00asm-a",
		"10-a.json": `{"limits":{"interrupt":false}}`,
		"20-b.wasm": "\x00asm-b",
		"20-b.json": `{"config":{"name_max":60},"limits":{"instances":2,"interrupt":false}}`,
	}
	entries, _ := os.ReadDir(dst)
	if len(entries) != len(want) {
		t.Fatalf("%d files in %s, want %d", len(entries), dst, len(want))
	}
	for name, body := range want {
		b, err := os.ReadFile(filepath.Join(dst, name))
		if err != nil || string(b) != body {
			t.Errorf("%s = %q, %v; want %q", name, b, err, body)
		}
	}
}
