package main

import (
	"context"
	"crypto/sha256"
	"fmt"
	"log/slog"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/plantgate/plantgate/host"
	"github.com/plantgate/plantgate/host/tokencache"
	"github.com/plantgate/plantgate/host/wasm"
)

// callResult is one plugin call's cost, in this process.
type callResult struct {
	perCall time.Duration
	cpu     time.Duration // this process's CPU time per call: steadier than perCall on a shared machine
	allocs  int64         // host allocations per call
}

// processCPU is this process's user and system CPU time.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// pluginCalls measures one bearer-auth Authorize (the bundled plugin from
// the plugins directory, its token from memory) with interruption on and
// off, in this process, alternating over the rounds; medians. The run's
// wrk loads are over, so the calls have the machine to themselves (and
// whatever else shares it).
func pluginCalls(ctx context.Context, cfg config) (on, off callResult, err error) {
	auth := filepath.Join(cfg.plugins, "10-bearer-auth.wasm")
	const cred = "pg_5J9x2mQvT7cR1nB8kW4zL6yH3dF0sA2eG9uP1oI7"
	digest := sha256.Sum256([]byte(cred))
	tokens := memTokens{digest: {Digest: digest, Name: "bench", Scopes: []string{host.ScopePlantsWrite}}}
	plugins := map[wasm.Interrupt]*wasm.Plugin{}
	defer func() {
		for _, p := range plugins {
			_ = p.Close(ctx)
		}
	}()
	for _, mode := range []wasm.Interrupt{wasm.InterruptOn, wasm.InterruptOff} {
		p, err := wasm.LoadPlugin(ctx, auth, nil, wasm.Options{Tokens: tokens, Logger: slog.New(slog.DiscardHandler),
			// A deadline no stall of a shared machine reaches: this
			// measures cost, not deadlines.
			Limits: wasm.Limits{Instances: 1, Interrupt: mode, Timeout: 10 * time.Second}})
		if err != nil {
			return on, off, fmt.Errorf("load %s: %w", auth, err)
		}
		plugins[mode] = p
	}
	req := host.AuthorizeRequest{Method: "POST", Path: "/plants", Credential: cred, Route: "POST /plants"}
	runs := map[wasm.Interrupt][]callResult{}
	for range cfg.rounds {
		for _, mode := range []wasm.Interrupt{wasm.InterruptOn, wasm.InterruptOff} {
			var failed error
			var cpu time.Duration
			r := testing.Benchmark(func(b *testing.B) {
				b.ReportAllocs()
				cpu0 := processCPU()
				for b.Loop() {
					if principal, err := plugins[mode].Authorize(ctx, req); err != nil || principal != "bench" {
						failed = fmt.Errorf("bearer-auth answered %q, %v", principal, err)
						b.SkipNow()
					}
				}
				cpu = (processCPU() - cpu0) / time.Duration(b.N)
			})
			if failed != nil {
				return on, off, failed
			}
			runs[mode] = append(runs[mode], callResult{time.Duration(r.NsPerOp()), cpu, r.AllocsPerOp()})
		}
	}
	mid := func(rs []callResult) callResult {
		slices.SortFunc(rs, func(a, b callResult) int { return int(a.perCall - b.perCall) })
		return rs[len(rs)/2]
	}
	return mid(runs[wasm.InterruptOn]), mid(runs[wasm.InterruptOff]), nil
}

// memTokens is a token store in memory.
type memTokens map[[32]byte]host.Token

func (m memTokens) Token(_ context.Context, digest [32]byte) (host.Token, error) {
	if t, ok := m[digest]; ok {
		return t, nil
	}
	return host.Token{}, &host.Error{Code: host.ErrTokenNotFound, Message: "token not found"}
}

// keptCall measures the authorize chain of the plugins directory as serve
// loads it (sidecars read; bearer-auth's declares its decision cache)
// behind a token cache of serve's default TTL: a busy token's request is
// answered from the kept decision, without a call into the plugin.
func keptCall(ctx context.Context, cfg config) (callResult, error) {
	const cred = "pg_5J9x2mQvT7cR1nB8kW4zL6yH3dF0sA2eG9uP1oI7"
	digest := sha256.Sum256([]byte(cred))
	tokens := tokencache.New(memTokens{digest: {Digest: digest, Name: "bench", Scopes: []string{host.ScopePlantsWrite}}}, time.Second, 0)
	chain, err := wasm.Load(ctx, wasm.Dir(cfg.plugins), wasm.Options{Tokens: tokens, Logger: slog.New(slog.DiscardHandler),
		Limits: wasm.Limits{Instances: 1, Timeout: 10 * time.Second}})
	if err != nil {
		return callResult{}, fmt.Errorf("load %s: %w", cfg.plugins, err)
	}
	defer chain.Close(ctx)
	req := host.AuthorizeRequest{Method: "POST", Path: "/plants", Credential: cred, Route: "POST /plants"}
	var runs []callResult
	for range cfg.rounds {
		var failed error
		var cpu time.Duration
		r := testing.Benchmark(func(b *testing.B) {
			b.ReportAllocs()
			cpu0 := processCPU()
			for b.Loop() {
				if principal, err := chain.Authorize(ctx, req); err != nil || principal != "bench" {
					failed = fmt.Errorf("the chain answered %q, %v", principal, err)
					b.SkipNow()
				}
			}
			cpu = (processCPU() - cpu0) / time.Duration(b.N)
		})
		if failed != nil {
			return callResult{}, failed
		}
		runs = append(runs, callResult{time.Duration(r.NsPerOp()), cpu, r.AllocsPerOp()})
	}
	slices.SortFunc(runs, func(a, b callResult) int { return int(a.perCall - b.perCall) })
	return runs[len(runs)/2], nil
}
