// Package wasm loads, checks and runs Plantgate's policy plugins with
// wazero: WebAssembly modules that speak the wire contract of sdk/abi.
//
// An operator drops plugins into a directory; Load turns it into a Chain,
// the gateway's host.Policy:
//
//	chain, err := wasm.Load(ctx, "/etc/plantgate/plugins.d", wasm.Options{
//		CacheDir: "/var/cache/plantgate",
//		Tokens:   store,
//		Logger:   logger,
//	})
//	if err != nil {
//		return err // names the file and what is wrong with it
//	}
//	defer chain.Close(ctx)
//
// # Notes
//
//   - Each plugin has its own wazero runtime (so its own memory limit), and
//     all share one compilation cache.
//   - Each plugin has a bounded pool of instances, all made at load. A call
//     waits for a free instance until its context is done, then fails with
//     host.ErrPluginBusy. An instance runs one call at a time.
//   - Every failure fails closed: a trap, a Go panic, a call past its
//     deadline, a fault decision or a decision that breaks the ABI denies
//     the request with host.ErrPluginFault or host.ErrPluginBadDecision and
//     a generic message; the reason goes to the log, and the instance is
//     closed and made again on demand.
//   - An instance is also recycled after Limits.MaxCalls calls or when its
//     memory passes three quarters of Limits.MemoryMiB.
package wasm

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
)

// fileName is the pattern of a plugin in a plugins directory.
var fileName = regexp.MustCompile(`^[0-9]{2}-[a-z0-9-]+\.wasm$`)

// Load loads the plugins directory dir into a Chain.
//
// Every NN-name.wasm file (NN two digits, name of a-z, 0-9 and -) is a
// plugin, run in file-name order. An optional NN-name.json beside it is its
// Sidecar: its config and limits. A .wasm file of another name and a .json
// file without its .wasm are errors; other files and subdirectories are
// ignored. A directory without plugins is the Empty chain.
func Load(ctx context.Context, dir string, opts Options) (*Chain, error) {
	opts = opts.withDefaults()
	files, err := pluginFiles(dir)
	if err != nil {
		return nil, err
	}
	cache, err := newCompileCache(opts.CacheDir)
	if err != nil {
		return nil, err
	}
	defer cache.release(ctx)
	var plugins []*Plugin
	for _, file := range files {
		path := filepath.Join(dir, file)
		sc, err := ReadSidecar(path)
		if err == nil {
			o := opts
			o.Limits = sc.Limits.Or(opts.Limits)
			o.headers = sc.Headers
			var p *Plugin
			if p, err = loadPlugin(ctx, path, sc.Config, o, cache); err == nil {
				plugins = append(plugins, p)
				continue
			}
		}
		_ = NewChain(plugins...).Close(ctx)
		return nil, err
	}
	return NewChain(plugins...), nil
}

// pluginFiles lists the plugin files of dir in order and checks the names
// of its .wasm and .json files.
func pluginFiles(dir string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("plugins directory: %w", err)
	}
	var wasms, jsons []string
	for _, e := range entries {
		if e.IsDir() {
			continue
		}
		switch name := e.Name(); filepath.Ext(name) {
		case ".wasm":
			if err := CheckFileName(name); err != nil {
				return nil, err
			}
			wasms = append(wasms, name)
		case ".json":
			jsons = append(jsons, name)
		}
	}
	for _, name := range jsons {
		wasm := strings.TrimSuffix(name, ".json") + ".wasm"
		if !slices.Contains(wasms, wasm) {
			return nil, fmt.Errorf("plugin %s: no %s beside it", name, wasm)
		}
	}
	slices.Sort(wasms)
	return wasms, nil
}

// CheckFileName reports whether name (a base name) is a plugin file name
// that Load accepts: NN-name.wasm.
func CheckFileName(name string) error {
	if !fileName.MatchString(name) {
		return fmt.Errorf("plugin %s: file name must be NN-name.wasm: two digits, a dash, then a-z, 0-9 or -", name)
	}
	return nil
}
