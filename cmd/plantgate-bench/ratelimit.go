package main

import (
	"context"
	"os"
	"path/filepath"
	"time"
)

// The rate limiter's row: the same chain with plugins/rate-limit added
// (-rate-limit, which `make bench-load` points at bin/opt-plugins) and a
// limit that is never reached, so the figure is what counting costs: the
// issue's target is within 10% of the chain without it.

// neverReached is the limiter's config in the bench: a billion requests a
// second per token.
const neverReached = `{"config": {"limit": 1000000000, "window": "1s", "by": "token"}}`

// startLimited starts a gateway on a copy of the plugins with the rate
// limiter added as 30-rate-limit.wasm.
func startLimited(ctx context.Context, cfg config, e *env, cacheDir string) error {
	dir := filepath.Join(e.dir, "plugins-limited")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	wasms, _ := filepath.Glob(filepath.Join(cfg.plugins, "*.wasm"))
	sidecars, _ := filepath.Glob(filepath.Join(cfg.plugins, "*.json"))
	for _, f := range append(append(wasms, sidecars...), cfg.rateLimit) {
		b, err := os.ReadFile(f)
		if err != nil {
			return err
		}
		name := filepath.Base(f)
		if f == cfg.rateLimit {
			name = "30-rate-limit.wasm"
		}
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			return err
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "30-rate-limit.json"), []byte(neverReached), 0o644); err != nil {
		return err
	}
	var err error
	e.limited, e.lmLog, err = startReady(ctx, cfg, e, dir, cacheDir, "limited", "gateway with the rate limiter", 60*time.Second)
	return err
}
