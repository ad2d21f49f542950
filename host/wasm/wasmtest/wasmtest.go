// Package wasmtest builds Go plugins to WebAssembly for tests, the way the
// Makefile does, so tests load real modules and never committed binaries.
package wasmtest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// Bundled maps each bundled plugin's drop-in file name to its package, in
// the order `make plugins` installs them.
var Bundled = map[string]string{
	"10-bearer-auth.wasm": "./plugins/bearer-auth",
	"20-plant-rules.wasm": "./plugins/plant-rules",
}

var (
	rootOnce sync.Once
	root     string
	rootErr  error
)

// ModuleRoot is the directory holding go.mod.
func ModuleRoot() (string, error) {
	rootOnce.Do(func() {
		out, err := exec.Command("go", "env", "GOMOD").Output()
		if err != nil {
			rootErr = fmt.Errorf("go env GOMOD: %w", err)
			return
		}
		root = filepath.Dir(strings.TrimSpace(string(out)))
	})
	return root, rootErr
}

// Build compiles the package pkg (a path relative to the module root, like
// "./plugins/plant-rules") with GOOS=wasip1 GOARCH=wasm -buildmode=c-shared
// into the file out.
func Build(out, pkg string) error {
	dir, err := ModuleRoot()
	if err != nil {
		return err
	}
	cmd := exec.Command("go", "build", "-buildmode=c-shared", "-o", out, pkg)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOOS=wasip1", "GOARCH=wasm")
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("build %s: %v\n%s", pkg, err, b)
	}
	return nil
}

// BuildBundled builds every bundled plugin into dir under its drop-in name.
func BuildBundled(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for file, pkg := range Bundled {
		if err := Build(filepath.Join(dir, file), pkg); err != nil {
			return err
		}
	}
	return nil
}

// Drop writes data into dir as name the way the operator guide says to: to
// a dotfile first, then renamed into place, so a watcher never sees it
// half-written.
func Drop(t testing.TB, dir, name string, data []byte) {
	t.Helper()
	tmp := filepath.Join(dir, ".incoming-"+name)
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(dir, name)); err != nil {
		t.Fatal(err)
	}
}

// Eventually polls cond every 10ms for up to 30s and returns how long it
// took. It is never a timing assertion: a slow machine only polls longer.
func Eventually(t testing.TB, what string, cond func() bool) time.Duration {
	t.Helper()
	start := time.Now()
	for time.Since(start) < 30*time.Second {
		if cond() {
			return time.Since(start)
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("not within 30s: %s", what)
	return 0
}
