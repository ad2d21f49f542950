package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/plantgate/plantgate/host/fleet"
	"github.com/plantgate/plantgate/host/metrics"
	"github.com/plantgate/plantgate/host/oidc"
	"github.com/plantgate/plantgate/host/pluginsig"
	"github.com/plantgate/plantgate/host/redis"
	"github.com/plantgate/plantgate/host/tokencache"
	"github.com/plantgate/plantgate/host/wasm"
)

func (m *Main) loadPlugins(ctx context.Context) error {
	// Lookups by plugins also record, at most once a minute per token and
	// off the request path, when a token was last used; cached answers
	// count as uses too.
	var lookup redis.TokenLookup = m.observed
	if m.TokenCacheTTL > 0 {
		cache := tokencache.New(m.observed, m.TokenCacheTTL, 0)
		m.metrics.TokenCache(cache.Stats)
		lookup = cache
	}
	m.usage = redis.NewTokenUsage(lookup, m.store, 0, m.Logger)
	m.startIntrospection(lookup)
	m.shadows = &shadowRecorder{metrics: m.metrics.Shadows(), store: m.store, log: m.Logger}
	m.shadows.gateway.Store(m.Listen) // the fleet id, once it has one
	var tokens wasm.TokenSource = m.usage
	if m.oidc != nil {
		// The request's access token answers a lookup of its digest; the
		// store answers every other.
		tokens = oidc.Tokens{Resolver: m.oidc, Store: m.usage}
	}
	opts := wasm.Options{Tokens: tokens, KV: m.store, Logger: m.Logger, CacheDir: m.cacheDir(), Observer: m.metrics,
		Decisions: m.decisionRecorder(), Shadows: m.shadows}
	src, err := m.pluginSource(&opts)
	if err != nil {
		return err
	}
	if src == nil {
		m.policy = wasm.Empty()
		m.Logger.Warn("no --plugins directory: the policy chain is empty")
		return nil
	}
	start := time.Now()
	// Under --insecure-no-auth no credential is parsed, so an authorize
	// plugin would judge every request without one: refused at start and
	// at every reload, never silently half-applied.
	r, err := wasm.NewReloader(ctx, src, opts, wasm.ReloadOptions{RequireAuthorize: !m.InsecureNoAuth, ForbidAuthorize: m.InsecureNoAuth})
	if errors.Is(err, wasm.ErrNoAuthorize) {
		return m.noAuthorizeError()
	}
	if errors.Is(err, wasm.ErrAuthorizeForbidden) {
		return fmt.Errorf("refusing to start: %w; remove it or --insecure-no-auth", err)
	}
	if err != nil {
		return fmt.Errorf("load plugins: %w", err)
	}
	m.reloader, m.policy = r, r
	m.metrics.SetPools(func() []metrics.Pool {
		infos, stats := r.Plugins(), r.Stats()
		pools := make([]metrics.Pool, 0, len(infos))
		for i, p := range infos {
			if i < len(stats) {
				pools = append(pools, metrics.Pool{Plugin: p.Name, Live: stats[i].Live, Size: p.Limits.Instances})
			}
		}
		return pools
	})
	for _, p := range r.Plugins() {
		m.Logger.Info("plugin loaded", "plugin", p.Name, "file", p.File, "phases", p.Phases)
	}
	m.Logger.Info("plugin chain ready", "plugins", len(r.Plugins()), "took", time.Since(start).Round(time.Millisecond))
	if m.PluginsFromStore {
		m.followStore(r)
	} else if m.Watch {
		wctx, cancel := context.WithCancel(context.Background())
		m.stopWatch, m.watching = cancel, make(chan struct{})
		go func() {
			defer close(m.watching)
			if err := r.Watch(wctx); err != nil {
				m.Logger.Error("not watching the plugins directory; reload with SIGHUP", "err", err)
			}
		}()
	}
	return nil
}

// Reload loads the plugins directory, or the store's chain, again
// (SIGHUP). The previous chain stays in force when the new one is refused;
// the error says why.
func (m *Main) Reload(ctx context.Context) error {
	if m.reloader == nil {
		return errors.New("no --plugins directory to reload")
	}
	_, err := m.reloader.Reload(ctx)
	return err
}

func (m *Main) cacheDir() string { return cacheDirOf(m.CacheDir) }

// cacheDirOf is the compilation cache a --cache-dir value names: "" the
// user cache directory's plantgate folder, "off" none.
func cacheDirOf(flag string) string {
	switch flag {
	case "off":
		return ""
	case "":
		dir, err := os.UserCacheDir()
		if err != nil {
			return ""
		}
		return dir + "/plantgate/wasm"
	}
	return flag
}

// pluginSource picks where the chain comes from (nil: nowhere, the empty
// chain) and sets the signature check. A gateway follows either a
// directory or the store, never both: a chain assembled from two places
// would have no single version for `plugin status` to compare, and an
// operator could not tell which of the two a policy came from.
func (m *Main) pluginSource(opts *wasm.Options) (wasm.Source, error) {
	if len(m.TrustKeys) > 0 {
		ring, err := pluginsig.ReadKeyring(m.TrustKeys)
		if err != nil {
			return nil, fmt.Errorf("--plugin-trust-key: %w", err)
		}
		opts.Trust = ring
		m.Logger.Info("plugin signatures required", "trusted_keys", ring.Len())
	}
	switch {
	case m.PluginsFromStore && m.PluginsDir != "":
		return nil, errors.New("--plugins-from-store and --plugins: give one or the other (a gateway follows either the fleet's chain in the store or a directory)")
	case m.PluginsFromStore && m.RedisURL == "":
		return nil, errors.New("--plugins-from-store needs --redis-url: the fleet's chain lives in the shared store")
	case m.PluginsFromStore:
		return fleet.StoreSource{Store: m.store}, nil
	case m.PluginsDir != "":
		return wasm.Dir(m.PluginsDir), nil
	}
	return nil, nil
}

// followStore keeps r on the store's chain and beats, until Close.
func (m *Main) followStore(r *wasm.Reloader) {
	m.member = fleet.NewMember(m.store, r, m.Listen, m.Logger)
	m.shadows.gateway.Store(m.member.ID())
	ctx, cancel := context.WithCancel(context.Background())
	m.stopWatch, m.watching = cancel, make(chan struct{})
	st, _ := r.Snapshot()
	m.Logger.Info("following the fleet's plugin chain in the store", "id", m.member.ID(), "version", st.Version, "digest", st.Digest,
		"poll", fleet.PollInterval)
	go func() {
		defer close(m.watching)
		m.member.Run(ctx)
	}()
}
