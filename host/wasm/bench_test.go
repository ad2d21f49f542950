package wasm

import (
	"context"
	"crypto/sha256"
	"log/slog"
	"path/filepath"
	"testing"

	"github.com/plantgate/plantgate/host"
	"github.com/plantgate/plantgate/host/wasm/wasmtest"
	"github.com/plantgate/plantgate/sdk/abi"
)

// BenchmarkCall compares, in one run, an empty export call into an instance
// (plantgate_abi_version: the floor) with a full Authorize and Validate
// through the pool, for a hand-written module (allow) and a standard-Go one
// (gopanic, raw exports; sdkpanic, on the SDK), with deadline enforcement (Limits.Interrupt) on and off.
//
//	go test -run '^$' -bench Call -benchmem ./host/wasm/
func BenchmarkCall(b *testing.B) {
	req := host.AuthorizeRequest{Method: "POST", Path: "/plants", Credential: "pg_0123456789abcdef0123456789abcdef"}
	plant := host.Plant{ID: 42, Name: "Monstera deliciosa", Tag: "tropical", HasTag: true}
	for _, fx := range []string{"allow", "gopanic", "sdkpanic"} {
		for _, mode := range []string{"interrupt", "nointerrupt"} {
			// Recycling would add an instantiation every MaxCalls calls. The
			// deadline is one no stall can reach: on a shared 2-vCPU machine
			// a guest GC plus a descheduled thread passed the default 100 ms
			// and failed the run; a benchmark measures cost, not deadlines.
			p := load(b, fx, nil, Limits{MaxCalls: maxMaxCalls, Interrupt: interruptMode(mode), Timeout: maxTimeout}, Options{})
			ctx := context.Background()
			b.Run(fx+"/"+mode+"/empty", func(b *testing.B) {
				benchEmpty(b, p, func() (context.Context, context.CancelFunc) { return ctx, func() {} })
			})
			b.Run(fx+"/"+mode+"/empty-deadline", func(b *testing.B) {
				benchEmpty(b, p, func() (context.Context, context.CancelFunc) {
					return context.WithTimeout(ctx, p.limits.Timeout)
				})
			})
			b.Run(fx+"/"+mode+"/authorize", func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					if _, err := p.Authorize(ctx, req); err != nil {
						b.Fatal(err)
					}
				}
			})
			b.Run(fx+"/"+mode+"/validate", func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					if err := p.Validate(ctx, plant, "alice"); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

// interruptMode is the Limits.Interrupt a benchmark mode names.
func interruptMode(mode string) Interrupt {
	if mode == "nointerrupt" {
		return InterruptOff
	}
	return InterruptOn
}

// benchEmpty calls plantgate_abi_version on one instance, with a context
// from newCtx per call.
func benchEmpty(b *testing.B, p *Plugin, newCtx func() (context.Context, context.CancelFunc)) {
	in, err := p.acquire(context.Background())
	if err != nil {
		b.Fatal(err)
	}
	defer p.release(context.Background(), in, false)
	fn := in.mod.ExportedFunction(abi.ExportABIVersion)
	b.ReportAllocs()
	for b.Loop() {
		ctx, cancel := newCtx()
		if err := fn.CallWithStack(ctx, in.stack[:]); err != nil {
			b.Fatal(err)
		}
		cancel()
	}
}

// BenchmarkChainParallel runs Authorize and Validate of a two-plugin chain
// from GOMAXPROCS goroutines: the pool under contention.
func BenchmarkChainParallel(b *testing.B) {
	c := NewChain(
		load(b, "principal", nil, Limits{MaxCalls: maxMaxCalls, Instances: 4, Timeout: maxTimeout}, Options{}),
		load(b, "gopanic", nil, Limits{MaxCalls: maxMaxCalls, Instances: 4, Timeout: maxTimeout}, Options{}),
	)
	req := host.AuthorizeRequest{Method: "POST", Path: "/plants", Credential: "pg_0123456789abcdef"}
	plant := host.Plant{ID: 42, Name: "Monstera deliciosa"}
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		ctx := context.Background()
		for pb.Next() {
			principal, err := c.Authorize(ctx, req)
			if err != nil {
				b.Fatal(err)
			}
			if err := c.Validate(ctx, plant, principal); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkBundled measures one policy call into each bundled plugin (built
// from plugins/ as the Makefile does) with deadline enforcement on, as the
// gateway runs them, beside an empty export call into the same instance:
// the floor any call pays. interrupt is the loop guard (guard.go),
// interrupt-wazero wazero's termination checks it replaced. bearer-auth's token comes from memory, so the
// figure is the plugin and the host path, not a store.
//
//	go test -run '^$' -bench Bundled -benchmem ./host/wasm/
func BenchmarkBundled(b *testing.B) {
	dir := b.TempDir()
	if err := wasmtest.BuildBundled(dir); err != nil {
		b.Fatal(err)
	}
	const cred = "pg_5J9x2mQvT7cR1nB8kW4zL6yH3dF0sA2eG9uP1oI7"
	tokens := &countingTokens{tokens: map[[32]byte]host.Token{
		sha256.Sum256([]byte(cred)): {Digest: sha256.Sum256([]byte(cred)), Name: "ci", Scopes: []string{host.ScopePlantsWrite}},
	}}
	ctx := context.Background()
	for _, mode := range []string{"interrupt", "interrupt-wazero", "nointerrupt"} {
		opts := Options{CacheDir: cacheDir, Tokens: tokens, Logger: slog.New(slog.DiscardHandler),
			Limits:       Limits{Instances: 2, MaxCalls: maxMaxCalls, Interrupt: interruptMode(mode), Timeout: maxTimeout},
			wazeroChecks: mode == "interrupt-wazero"}
		auth, err := LoadPlugin(ctx, filepath.Join(dir, "10-bearer-auth.wasm"), nil, opts)
		if err != nil {
			b.Fatal(err)
		}
		rules, err := LoadPlugin(ctx, filepath.Join(dir, "20-plant-rules.wasm"), nil, opts)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = auth.Close(ctx); _ = rules.Close(ctx) })
		b.Run(mode+"/empty-baseline", func(b *testing.B) {
			benchEmpty(b, rules, func() (context.Context, context.CancelFunc) { return ctx, func() {} })
		})
		benchBundledCalls(b, mode, auth, rules, cred)
		if mode == "nointerrupt" {
			// The same calls made on the request's goroutine, as before
			// runners (runner.go): the hand-over's cost is the difference.
			inline(b, auth)
			inline(b, rules)
			benchBundledCalls(b, mode+"-inline", auth, rules, cred)
		}
	}
}

func benchBundledCalls(b *testing.B, mode string, auth, rules *Plugin, cred string) {
	ctx := context.Background()
	b.Run(mode+"/bearer-auth", func(b *testing.B) {
		req := host.AuthorizeRequest{Method: "POST", Path: "/plants", Credential: cred}
		b.ReportAllocs()
		for b.Loop() {
			if principal, err := auth.Authorize(ctx, req); err != nil || principal != "ci" {
				b.Fatal(principal, err)
			}
		}
	})
	plant := host.Plant{ID: 42, Name: "Monstera deliciosa", Tag: "tropical", HasTag: true}
	b.Run(mode+"/plant-rules", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if err := rules.Validate(ctx, plant, "ci"); err != nil {
				b.Fatal(err)
			}
		}
	})
	// Two callers at once keep both CPUs of a 2-vCPU machine busy, as a
	// loaded gateway does: a goroutine handed a call then finds no idle CPU
	// to wake, the cost that dominates a lone caller's hand-over.
	b.Run(mode+"/plant-rules-parallel", func(b *testing.B) {
		b.ReportAllocs()
		b.SetParallelism(1)
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if err := rules.Validate(ctx, plant, "ci"); err != nil {
					b.Fatal(err)
				}
			}
		})
	})
}

// inline stops the runners of p's instances (all idle), so that its calls
// run on the caller's goroutine: the baseline of the hand-over.
func inline(b *testing.B, p *Plugin) {
	ins := make([]*instance, 0, p.limits.Instances)
	for range p.limits.Instances {
		in := <-p.pool.slots
		if in == nil || in.runner == nil {
			b.Fatal("inline: want every instance made, with a runner")
		}
		close(in.runner.jobs)
		in.runner = nil
		ins = append(ins, in)
	}
	for _, in := range ins {
		p.pool.slots <- in
	}
}

// BenchmarkInstantiate makes and closes one instance: what a request paid
// after a fault or a recycle when the pool refilled on the request path
// (it now refills in the background), for a hand-written module and
// standard-Go ones.
//
//	go test -run '^$' -bench Instantiate -benchmem ./host/wasm/
func BenchmarkInstantiate(b *testing.B) {
	for _, fx := range []string{"allow", "gopanic", "sdkpanic"} {
		p := load(b, fx, nil, Limits{}, Options{})
		ctx := context.Background()
		b.Run(fx, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				in, err := p.newInstance(ctx)
				if err != nil {
					b.Fatal(err)
				}
				p.discard(ctx, in)
			}
		})
	}
}
