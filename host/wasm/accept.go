package wasm

import (
	"context"
	"fmt"
)

// accept builds a chain from files and applies the rules a chain must pass
// before it serves, past its signatures and version: every plugin's name,
// signature, sidecar and load-time checks (buildPlugins), the canary rule,
// and ropts's authorize rule. src names the source in the refusal. It is
// the one acceptance check: Load, every Reloader load and Check run it. On
// an error the plugins loaded now are closed.
func accept(ctx context.Context, files []File, opts Options, ropts ReloadOptions, cache *compileCache, prev map[string]loadedPlugin, src string) (next map[string]loadedPlugin, chain *Chain, made []*Plugin, err error) {
	next, plugins, made, err := buildPlugins(ctx, files, opts, cache, prev)
	if err != nil {
		return nil, nil, nil, err
	}
	chain = NewChain(plugins...)
	switch {
	case ropts.RequireAuthorize && !chain.Authorizes():
		err = fmt.Errorf("%w in %s; refusing a chain that lets every request through (serve runs without --insecure-no-auth)", ErrNoAuthorize, src)
	case ropts.ForbidAuthorize && chain.Authorizes():
		err = authorizeForbidden(plugins, src)
	}
	if err != nil {
		for _, p := range made {
			_ = p.Close(ctx)
		}
		return nil, nil, nil, err
	}
	return next, chain, made, nil
}

// Check applies to snap every rule a gateway with opts and ropts applies
// before it serves a chain, apart from the version rule (that needs the
// version in force): the chain signature and every plugin's (when
// opts.Trust holds keys), names, sidecars, load-time checks with every
// module instantiated, the canary rule and the authorize rule. It returns
// the error the gateway would log, or the chain's plugins; nothing it
// loaded outlives the call. src names the chain in a refusal.
//
// Fleet commands run it before they publish, so that a chain the gateways
// would refuse is never published.
func Check(ctx context.Context, snap Snapshot, opts Options, ropts ReloadOptions, src string) ([]PluginInfo, error) {
	chain, made, err := loadOnce(ctx, snap, opts, ropts, src)
	if err != nil {
		return nil, err
	}
	infos := chain.Plugins()
	for _, p := range made {
		_ = p.Close(ctx)
	}
	return infos, nil
}

// loadOnce is a chain's first and only load (Load, Check): the chain
// signature, then accept, with a compilation cache of its own.
func loadOnce(ctx context.Context, snap Snapshot, opts Options, ropts ReloadOptions, src string) (*Chain, []*Plugin, error) {
	opts = opts.withDefaults()
	if err := checkChain(opts.Trust, snap); err != nil {
		return nil, nil, err
	}
	cache, err := newCompileCache(opts.CacheDir)
	if err != nil {
		return nil, nil, err
	}
	defer cache.release(ctx)
	_, chain, made, err := accept(ctx, snap.Files, opts, ropts, cache, nil, src)
	return chain, made, err
}
