package oidc

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"

	"github.com/plantgate/plantgate/host/oidc/oidctest"
)

// BenchmarkVerify is the cost of a first-seen token: parse, signature
// check and claims, the work a Resolver does once per token.
//
//	go test -run - -bench Verify ./host/oidc/
func BenchmarkVerify(b *testing.B) {
	for _, alg := range []jose.SignatureAlgorithm{jose.RS256, jose.PS256, jose.ES256, jose.EdDSA} {
		b.Run(string(alg), func(b *testing.B) {
			idp := oidctest.Start(b, oidctest.NewKey(b, "k", alg))
			r := benchResolver(b, idp)
			tok := idp.Token(b, "alice", "plants:read plants:write")
			now := time.Now()
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				if _, err := r.v.Verify(context.Background(), tok, now); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkResolveKept is a busy client's request: the kept verification,
// found by the credential's digest. Compare with BenchmarkVerify.
func BenchmarkResolveKept(b *testing.B) {
	idp := oidctest.Start(b, oidctest.NewKey(b, "k", jose.ES256))
	r := benchResolver(b, idp)
	tok := idp.Token(b, "alice", "plants:read plants:write")
	if _, _, _, err := r.Resolve(context.Background(), tok); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if _, _, ok, err := r.Resolve(context.Background(), tok); !ok || err != nil {
			b.Fatal(err)
		}
	}
}

func benchResolver(b *testing.B, idp *oidctest.Issuer) *Resolver {
	v, _ := NewVerifier(fetchedProvider(b, ProviderConfig{Issuer: idp.URL, Logger: quiet}), VerifierConfig{Audience: oidctest.Audience})
	return NewResolver(v, 0)
}

// BenchmarkIntrospect is an opaque token's cost: first seen (the store's
// "not found" from memory, one introspection over loopback HTTP to a fake
// provider in the same process, whose work is counted too) and kept (a
// busy client's request).
//
//	go test -run - -bench Introspect ./host/oidc/
func BenchmarkIntrospect(b *testing.B) {
	b.Run("first-seen", func(b *testing.B) {
		x := newIntrospecting(b, &fakeIntrospection{answer: activeSvc}, IntrospectionConfig{Rate: 1e9, Burst: 1 << 30})
		b.ReportAllocs()
		n := 0
		for b.Loop() {
			n++
			if _, _, ok, err := x.r.Resolve(context.Background(), "opaque-bench-"+strconv.Itoa(n)); !ok || err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("kept", func(b *testing.B) {
		x := newIntrospecting(b, &fakeIntrospection{answer: activeSvc}, IntrospectionConfig{})
		if _, _, ok, err := x.r.Resolve(context.Background(), "opaque-bench"); !ok || err != nil {
			b.Fatal(err)
		}
		b.ReportAllocs()
		for b.Loop() {
			if _, _, ok, err := x.r.Resolve(context.Background(), "opaque-bench"); !ok || err != nil {
				b.Fatal(err)
			}
		}
	})
}
