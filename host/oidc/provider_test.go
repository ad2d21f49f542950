package oidc

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"

	"github.com/plantgate/plantgate/host/oidc/oidctest"
)

// TestKeyRotation: a token signed with a key published after the last
// fetch makes one refetch, then verifies; the old key's tokens work while
// it stays published.
func TestKeyRotation(t *testing.T) {
	k1 := oidctest.NewKey(t, "k1", jose.RS256)
	idp := oidctest.Start(t, k1)
	r, _ := newResolver(t, idp, VerifierConfig{})
	old := idp.Token(t, "alice", "plants:read")
	if _, _, _, err := r.Resolve(context.Background(), old); err != nil {
		t.Fatal(err)
	}
	before := idp.JWKSHits()
	idp.Rotate(oidctest.NewKey(t, "k2", jose.ES256), true)
	got, _, _, err := r.Resolve(context.Background(), idp.Token(t, "bob", "plants:write"))
	if err != nil || got.Name != "oidc:bob" {
		t.Fatalf("token of the new key: %+v %v", got, err)
	}
	if n := idp.JWKSHits() - before; n != 1 {
		t.Fatalf("%d key set fetches for a rotation, want 1", n)
	}
	if _, _, _, err := r.Resolve(context.Background(), oidctest.Sign(t, k1, idp.Claims("carol", "plants:read"), nil)); err != nil {
		t.Fatalf("old key still published: %v", err)
	}
}

// TestUnknownKidRefetchIsRateLimited: a burst of tokens with random kids
// costs the provider one key set fetch, and the next one waits
// RefetchInterval.
func TestUnknownKidRefetchIsRateLimited(t *testing.T) {
	idp := oidctest.Start(t, oidctest.NewKey(t, "k1", jose.ES256))
	r, p := newResolver(t, idp, VerifierConfig{})
	var mu sync.Mutex
	clock := time.Now()
	p.now = func() time.Time { mu.Lock(); defer mu.Unlock(); return clock }
	before := idp.JWKSHits()
	var wg sync.WaitGroup
	for i := range 200 {
		wg.Go(func() {
			k := oidctest.NewKey(t, fmt.Sprintf("random-%d", i), jose.ES256)
			if _, _, _, err := r.Resolve(context.Background(), oidctest.Sign(t, k, idp.Claims("x", ""), nil)); err != errUnknownKey {
				t.Errorf("random kid: %v, want %v", err, errUnknownKey)
			}
		})
	}
	wg.Wait()
	if n := idp.JWKSHits() - before; n != 1 {
		t.Fatalf("200 random kids made %d key set fetches, want 1", n)
	}
	mu.Lock()
	clock = clock.Add(RefetchInterval - time.Second)
	mu.Unlock()
	k := oidctest.NewKey(t, "random-late", jose.ES256)
	tok := oidctest.Sign(t, k, idp.Claims("x", ""), nil)
	r.Resolve(context.Background(), tok)
	if n := idp.JWKSHits() - before; n != 1 {
		t.Fatalf("a fetch %v after the last: %d fetches, want still 1", RefetchInterval-time.Second, n)
	}
	mu.Lock()
	clock = clock.Add(time.Second)
	mu.Unlock()
	r.Resolve(context.Background(), tok)
	if n := idp.JWKSHits() - before; n != 2 {
		t.Fatalf("a fetch %v after the last: %d fetches, want 2", RefetchInterval, n)
	}
}

// TestProviderDownKnownKeysWork: while the provider answers 503, the keys
// already fetched keep verifying, and Status says the set is stale.
func TestProviderDownKnownKeysWork(t *testing.T) {
	k1 := oidctest.NewKey(t, "k1", jose.RS256)
	idp := oidctest.Start(t, k1)
	r, p := newResolver(t, idp, VerifierConfig{})
	idp.SetDown(true)
	if _, err := p.fetchShared(context.Background()); err == nil {
		t.Fatal("a refresh against a provider answering 503 succeeded")
	}
	got, _, _, err := r.Resolve(context.Background(), idp.Token(t, "alice", "plants:read"))
	if err != nil || got.Name != "oidc:alice" {
		t.Fatalf("known key while the provider is down: %+v %v", got, err)
	}
	ready, reason := p.Status()
	if !ready || !strings.Contains(reason, "503 Service Unavailable") || !strings.Contains(reason, "the known keys keep working") {
		t.Fatalf("Status = %v %q", ready, reason)
	}
	// A new kid cannot be fetched: unknown key, not a fault.
	if _, _, _, err := r.Resolve(context.Background(), oidctest.Sign(t, oidctest.NewKey(t, "k9", jose.RS256), idp.Claims("a", ""), nil)); err != errUnknownKey {
		t.Fatalf("new kid while down: %v, want %v", err, errUnknownKey)
	}
}

// TestUnreachableAtStart: a provider down when the gateway starts stops
// nothing; access tokens are refused 503 50305 until the background
// fetch gets the keys, then accepted.
func TestUnreachableAtStart(t *testing.T) {
	idp := oidctest.Start(t, oidctest.NewKey(t, "k1", jose.ES256))
	idp.SetDown(true)
	p, err := NewProvider(ProviderConfig{Issuer: idp.URL, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	p.Start()
	defer p.Close()
	v, _ := NewVerifier(p, VerifierConfig{Audience: oidctest.Audience})
	r := NewResolver(v, 0)
	tok := idp.Token(t, "alice", "plants:read")
	deadline := time.Now().Add(5 * time.Second)
	for {
		if _, reason := p.Status(); strings.Contains(reason, "503") || time.Now().After(deadline) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	// One line: the reason is a log value and /readyz's "oidc" field, and
	// both discovery addresses' failures are in it.
	if ready, reason := p.Status(); ready || !strings.HasPrefix(reason, "identity provider keys not fetched yet: discovery: ") ||
		strings.Contains(reason, "\n") || !strings.Contains(reason, "/.well-known/openid-configuration") || !strings.Contains(reason, "/.well-known/oauth-authorization-server") {
		t.Fatalf("Status = %v %q, want one line naming both discovery addresses", ready, reason)
	}
	if _, _, _, err := r.Resolve(context.Background(), tok); err != errNoKeys {
		t.Fatalf("before keys: %v, want %v", err, errNoKeys)
	}
	idp.SetDown(false)
	deadline = time.Now().Add(10 * time.Second)
	for {
		_, _, _, err := r.Resolve(context.Background(), tok)
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("keys never arrived: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if ready, reason := p.Status(); !ready || reason != "" {
		t.Fatalf("Status after keys = %v %q", ready, reason)
	}
}

// TestIssuerMismatchWarningSaysWhy: a provider that answers but names
// another issuer (the trailing slash an operator forgets) is not called
// unreachable in the warning: the line says the keys are not fetched and
// why, so the operator looks at --oidc-issuer, not at the network.
func TestIssuerMismatchWarningSaysWhy(t *testing.T) {
	idp := oidctest.Start(t, oidctest.NewKey(t, "k1", jose.ES256))
	logs := &logBuf{}
	p, err := NewProvider(ProviderConfig{Issuer: idp.URL + "/", Logger: slog.New(slog.NewTextHandler(logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	p.Start()
	defer p.Close()
	deadline := time.Now().Add(5 * time.Second)
	for !strings.Contains(logs.String(), "level=WARN") && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	got := logs.String()
	want := fmt.Sprintf(`level=WARN msg="identity provider keys not fetched: access tokens are refused (503 50305) until they arrive; the gateway's own tokens work" issuer=%s/ err="discovery: %s/.well-known/openid-configuration names the issuer \"%s\", not \"%s/\"`, idp.URL, idp.URL, idp.URL, idp.URL)
	if !strings.Contains(got, want) || strings.Contains(got, "unreachable") {
		t.Fatalf("the warning:\n%s\nwant it to hold:\n%s\nand not to say unreachable", got, want)
	}
}
