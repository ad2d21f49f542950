package oidc

import (
	"context"
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
	p, err := NewProvider(ProviderConfig{Issuer: idp.URL, Logger: quiet})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(p.Close)
	if _, err := p.fetchShared(context.Background()); err != nil {
		b.Fatal(err)
	}
	v, _ := NewVerifier(p, VerifierConfig{Audience: oidctest.Audience})
	return NewResolver(v, 0)
}
