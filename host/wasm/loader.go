// Package wasm loads, checks and runs Plantgate's policy plugins with
// wazero: WebAssembly modules that speak the wire contract of sdk/abi.
//
// An operator drops plugins into a directory (or pushes them to the store);
// Load turns that Source into a Chain, the gateway's host.Policy, and a
// Reloader swaps in new chains from it while serving:
//
//	chain, err := wasm.Load(ctx, wasm.Dir("/etc/plantgate/plugins.d"), wasm.Options{
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
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"regexp"
	"strings"
)

// fileName is the pattern of a plugin in a plugins directory.
// A role suffix makes it a shadow or a canary (FileRole).
var fileName = regexp.MustCompile(`^[0-9]{2}-[a-z0-9-]+(\.shadow|\.canary)?\.wasm$`)

// Load reads src once and loads its plugins into a Chain, exactly as a
// Reloader loads each of its chains (Dir describes a directory's files).
func Load(ctx context.Context, src Source, opts Options) (*Chain, error) {
	snap, err := src.Snapshot(ctx)
	if err != nil {
		return nil, err
	}
	chain, _, err := loadOnce(ctx, snap, opts, ReloadOptions{}, src.String())
	return chain, err
}

// loadedPlugin is a plugin of a chain and the hash of the files it was
// loaded from.
type loadedPlugin struct {
	key [32]byte
	p   *Plugin
}

// buildPlugins is the one way a chain's plugins are made: it checks every
// file (name, signature, sidecar) and loads it, or carries over the plugin
// of prev whose module and sidecar hash as they do now, warm instances and
// all. made lists the plugins loaded now; on an error they are closed.
func buildPlugins(ctx context.Context, files []File, opts Options, cache *compileCache, prev map[string]loadedPlugin) (next map[string]loadedPlugin, plugins, made []*Plugin, err error) {
	next = make(map[string]loadedPlugin, len(files))
	plugins = make([]*Plugin, 0, len(files))
	for _, f := range files {
		lp, fresh, err := loadFile(ctx, f, opts, cache, prev)
		if err != nil {
			for _, p := range made {
				_ = p.Close(ctx)
			}
			return nil, nil, nil, err
		}
		if fresh {
			made = append(made, lp.p)
		}
		next[f.Name] = lp
		plugins = append(plugins, lp.p)
	}
	if err := checkCanaries(plugins); err != nil {
		for _, p := range made {
			_ = p.Close(ctx)
		}
		return nil, nil, nil, err
	}
	return next, plugins, made, nil
}

// checkCanaries refuses a canary alone in its slot. A canary is a new
// version of the slot's live plugin, enforced only for principals in its
// share; everyone else, and every request whose principal is not known yet,
// gets the live version. Without one, a canary of the authorizing plugin
// would let those requests through its slot unjudged.
func checkCanaries(plugins []*Plugin) error {
	live := map[string]bool{}
	for _, p := range plugins {
		if slot, role := FileRole(p.info.File); role == RoleLive {
			live[slot] = true
		}
	}
	for _, p := range plugins {
		if slot, role := FileRole(p.info.File); role == RoleCanary && !live[slot] {
			return fmt.Errorf("plugin %s: a canary needs the live plugin %s.wasm in its slot: the principals outside its share, and requests whose principal is not known yet, get the live version",
				p.info.File, slot)
		}
	}
	return nil
}

// loadFile loads one plugin, or carries over prev's. fresh reports that the
// plugin was loaded now.
func loadFile(ctx context.Context, f File, opts Options, cache *compileCache, prev map[string]loadedPlugin) (lp loadedPlugin, fresh bool, err error) {
	if err := CheckFileName(f.Name); err != nil {
		return lp, false, err
	}
	// Checked on every load, carried over or not: a trusted key may have
	// been dropped, or a signature file replaced.
	if err := verifyFile(opts.Trust, f); err != nil {
		return lp, false, err
	}
	h := sha256.New()
	fmt.Fprintf(h, "%d:", len(f.Module))
	h.Write(f.Module)
	h.Write(f.Sidecar)
	copy(lp.key[:], h.Sum(nil))
	if p, ok := prev[f.Name]; ok && p.key == lp.key {
		return p, false, nil
	}
	var sc Sidecar
	if f.Sidecar != nil {
		if sc, err = ParseSidecar(f.Sidecar); err != nil {
			return lp, false, fmt.Errorf("plugin %s: %w", strings.TrimSuffix(f.Name, ".wasm")+".json", err)
		}
	}
	o := opts
	o.Limits = sc.Limits.Or(opts.Limits)
	o.headers = sc.Headers
	o.decisions = sc.DecisionCache
	if o.percent, err = rolePercent(f.Name, sc); err != nil {
		return lp, false, err
	}
	if err := roleLimits(f.Name, sc, &o.Limits); err != nil {
		return lp, false, err
	}
	lp.p, err = loadPluginBytes(ctx, f.Name, bytes.Clone(f.Module), sc.Config, o, cache)
	if err != nil {
		return lp, false, err
	}
	return lp, true, nil
}

// CheckFileName reports whether name (a base name) is a plugin file name
// that Load accepts: NN-name.wasm, or NN-name.shadow.wasm and
// NN-name.canary.wasm for a shadow and a canary (FileRole).
func CheckFileName(name string) error {
	if !fileName.MatchString(name) {
		return fmt.Errorf("plugin %s: file name must be NN-name.wasm (or NN-name.shadow.wasm, NN-name.canary.wasm): two digits, a dash, then a-z, 0-9 or -", name)
	}
	return nil
}

// rolePercent checks the sidecar's rollout keys against the file's role
// and returns its percent: a shadow's sampling rate (default
// DefaultShadowSample), a canary's share (required), 0 for a live plugin.
func rolePercent(file string, sc Sidecar) (int, error) {
	json := strings.TrimSuffix(file, ".wasm") + ".json"
	_, role := FileRole(file)
	switch {
	case role != RoleShadow && sc.SamplePercent != 0:
		return 0, fmt.Errorf("plugin %s: \"sample_percent\" is for a shadow (NN-name.shadow.wasm), not a %s plugin", json, role)
	case role != RoleCanary && sc.CanaryPercent != 0:
		return 0, fmt.Errorf("plugin %s: \"canary_percent\" is for a canary (NN-name.canary.wasm), not a %s plugin", json, role)
	case role == RoleCanary && sc.CanaryPercent == 0:
		return 0, fmt.Errorf("plugin %s: a canary needs \"canary_percent\" in its sidecar %s: the share of principals it is enforced for, 1 to 100", file, json)
	case role == RoleShadow && sc.SamplePercent == 0:
		return DefaultShadowSample, nil
	}
	return sc.SamplePercent + sc.CanaryPercent, nil
}
