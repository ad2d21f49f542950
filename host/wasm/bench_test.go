package wasm

import (
	"context"
	"testing"

	"github.com/plantgate/plantgate/host"
	"github.com/plantgate/plantgate/sdk/abi"
)

// BenchmarkCall compares, in one run, an empty export call into an instance
// (plantgate_abi_version: the floor) with a full Authorize and Validate
// through the pool, for a hand-written module (allow) and a standard-Go one
// (gopanic, raw exports; sdkpanic, on the SDK), with deadline enforcement (WithCloseOnContextDone) on and off.
//
//	go test -run '^$' -bench Call -benchmem ./host/wasm/
func BenchmarkCall(b *testing.B) {
	req := host.AuthorizeRequest{Method: "POST", Path: "/plants", Credential: "pg_0123456789abcdef0123456789abcdef"}
	plant := host.Plant{ID: 42, Name: "Monstera deliciosa", Tag: "tropical", HasTag: true}
	for _, fx := range []string{"allow", "gopanic", "sdkpanic"} {
		for _, mode := range []string{"interrupt", "nointerrupt"} {
			// Recycling would add an instantiation every MaxCalls calls.
			p := load(b, fx, nil, Limits{MaxCalls: maxMaxCalls}, Options{noInterrupt: mode == "nointerrupt"})
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
		load(b, "principal", nil, Limits{MaxCalls: maxMaxCalls, Instances: 4}, Options{}),
		load(b, "gopanic", nil, Limits{MaxCalls: maxMaxCalls, Instances: 4}, Options{}),
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
