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
