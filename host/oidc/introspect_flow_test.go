package oidc

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/plantgate/plantgate/host"
)

func inactive(string) (int, string, string) { return 200, "application/json", `{"active":false}` }

func activeSvc(string) (int, string, string) {
	return 200, "application/json", `{"active":true,"sub":"svc","scope":"plants:read"}`
}

// wantErr fails unless err is exactly want.
func wantErr(t *testing.T, what string, err error, want *host.Error) {
	t.Helper()
	if e, ok := err.(*host.Error); !ok || *e != *want {
		t.Fatalf("%s: %v, want %v", what, err, want)
	}
}

// TestIntrospectionOnlyUnknownOpaque: the gateway's own tokens and JWTs
// never reach the introspection endpoint; every other credential, dotted
// (a JWE, as zitadel and Auth0 issue opaque tokens) or not, does, once the
// store has said it does not know it. Without introspection a JWE stays
// what it was: a malformed JWT.
func TestIntrospectionOnlyUnknownOpaque(t *testing.T) {
	t.Parallel()
	f := &fakeIntrospection{answer: activeSvc}
	x := newIntrospecting(t, f, IntrospectionConfig{})
	ctx := context.Background()

	if tok, _, ok, err := x.r.Resolve(ctx, "pg_gateway-own-token"); ok || err != nil || tok.Name != "" {
		t.Fatalf("the gateway's own token: %+v %v %v, want left to the chain", tok, ok, err)
	}
	if tok, _, ok, err := x.r.Resolve(ctx, x.idp.Token(t, "alice", "plants:read")); !ok || err != nil || tok.Name != "oidc:alice" {
		t.Fatalf("a JWT: %+v %v %v", tok, ok, err)
	}
	if n := f.calls.Load(); n != 0 || x.store.lookups.Load() != 1 {
		t.Fatalf("%d introspections and %d store lookups for the gateway's token and a JWT, want 0 and 1", n, x.store.lookups.Load())
	}
	jwe := "opaque-jwe.header.iv.ciphertext.tag"
	for _, cred := range []string{"opaque-plain", jwe, "opaque-hydra.signature"} {
		if tok, _, ok, err := x.r.Resolve(ctx, cred); !ok || err != nil || tok.Name != "oidc:svc" || tok.Digest != digestOf(cred) {
			t.Fatalf("%s: %+v %v %v", cred, tok, ok, err)
		}
	}
	if n, l := f.calls.Load(), x.store.lookups.Load(); n != 3 || l != 4 {
		t.Fatalf("%d introspections and %d store lookups, want 3 and 4", n, l)
	}
	// Kept: the next request with each costs neither the store nor the provider.
	for _, cred := range []string{"opaque-plain", jwe} {
		if _, _, ok, _ := x.r.Resolve(ctx, cred); !ok {
			t.Fatalf("%s not kept", cred)
		}
	}
	if n, l := f.calls.Load(), x.store.lookups.Load(); n != 3 || l != 4 {
		t.Fatalf("kept tokens cost %d introspections and %d store lookups more", n-3, l-4)
	}
	// A store that cannot say: left to the chain, which meets the same store.
	x.store.err = host.Errorf(host.ErrStoreUnavailable, "store unavailable")
	if _, _, ok, err := x.r.Resolve(ctx, "opaque-while-store-down"); ok || err != nil || f.calls.Load() != 3 {
		t.Fatalf("store down: ok %v err %v, %d calls", ok, err, f.calls.Load())
	}

	plain := NewResolver(x.r.v, 0)
	if _, _, _, err := plain.Resolve(ctx, jwe); err != errMalformed {
		t.Fatalf("a JWE without introspection: %v, want %v", err, errMalformed)
	}
}

// TestIntrospectionShared: concurrent requests with one new token share
// one call; later ones are answered from the kept answer.
func TestIntrospectionShared(t *testing.T) {
	t.Parallel()
	f := &fakeIntrospection{answer: activeSvc, release: make(chan struct{})}
	x := newIntrospecting(t, f, IntrospectionConfig{})
	const n = 16
	var wg sync.WaitGroup
	names := make(chan string, n)
	for range n {
		wg.Go(func() {
			tok, _, ok, err := x.r.Resolve(context.Background(), "opaque-shared")
			if !ok || err != nil {
				names <- "refused"
				return
			}
			names <- tok.Name
		})
	}
	for f.calls.Load() == 0 {
		time.Sleep(time.Millisecond)
	}
	time.Sleep(100 * time.Millisecond) // the others join the call under way
	close(f.release)
	wg.Wait()
	close(names)
	for name := range names {
		if name != "oidc:svc" {
			t.Fatalf("a request got %s", name)
		}
	}
	for range 5 {
		_, _, _, _ = x.r.Resolve(context.Background(), "opaque-shared")
	}
	if c := f.calls.Load(); c != 1 {
		t.Fatalf("%d concurrent and 5 later requests with one token cost %d calls, want 1", n, c)
	}
}

// TestIntrospectionRefusalsKept: a repeated inactive or refused token
// costs one call per RefusedFor, answered the same meanwhile.
func TestIntrospectionRefusalsKept(t *testing.T) {
	t.Parallel()
	f := &fakeIntrospection{answer: func(token string) (int, string, string) {
		if token == "opaque-other-audience" {
			return 200, "application/json", `{"active":true,"sub":"svc","aud":"other-api"}`
		}
		return inactive(token)
	}}
	x := newIntrospecting(t, f, IntrospectionConfig{})
	now := time.Now()
	x.in.now = func() time.Time { return now }
	for range 5 {
		if _, _, ok, err := x.r.Resolve(context.Background(), "opaque-inactive"); ok || err != nil {
			t.Fatalf("inactive: ok %v err %v", ok, err)
		}
		_, _, _, err := x.r.Resolve(context.Background(), "opaque-other-audience")
		wantErr(t, "another audience", err, errAudience)
	}
	if c := f.calls.Load(); c != 2 {
		t.Fatalf("5 requests with each of two bad tokens cost %d calls, want 2", c)
	}
	now = now.Add(RefusedFor)
	if _, _, ok, err := x.r.Resolve(context.Background(), "opaque-inactive"); ok || err != nil || f.calls.Load() != 3 {
		t.Fatalf("after RefusedFor: ok %v err %v, %d calls, want asked again", ok, err, f.calls.Load())
	}
}

// TestIntrospectionInactiveSaidAtDebug: a token the provider says is not
// active is refused as any unknown credential is (bearer-auth's 401 40151,
// which names no provider), so an operator asking why a client's token is
// refused needs the debug log to say the provider was asked and said no:
// one line per call, a kept answer none, never the token.
func TestIntrospectionInactiveSaidAtDebug(t *testing.T) {
	t.Parallel()
	x := newIntrospecting(t, &fakeIntrospection{answer: inactive}, IntrospectionConfig{})
	for range 3 {
		if _, _, ok, err := x.r.Resolve(context.Background(), "opaque-inactive"); ok || err != nil {
			t.Fatalf("inactive: ok %v err %v", ok, err)
		}
	}
	want := `level=DEBUG msg="the identity provider answered that an opaque credential is not active: refused as an unknown token (401 40151)" issuer=` + x.idp.URL + "\n"
	if l := x.logs.String(); strings.Count(l, "not active") != 1 || !strings.Contains(l, want) {
		t.Fatalf("log:\n%s\nwant once:\n%s", l, want)
	}
}

// TestIntrospectionRate: a flood of random tokens costs the provider the
// burst, then the rate; the excess is refused 503 50306 without a call.
func TestIntrospectionRate(t *testing.T) {
	t.Parallel()
	f := &fakeIntrospection{answer: inactive}
	x := newIntrospecting(t, f, IntrospectionConfig{Rate: 0.01, Burst: 3})
	for i := range 10 {
		_, _, ok, err := x.r.Resolve(context.Background(), "opaque-random-"+strings.Repeat("x", i))
		switch {
		case i < 3 && (ok || err != nil):
			t.Fatalf("token %d within the burst: ok %v err %v", i, ok, err)
		case i >= 3:
			wantErr(t, "over the rate", err, &host.Error{Code: 50306, Message: "too many unknown access tokens to ask the identity provider about now; retry later"})
			if e := err.(*host.Error); e.Status() != 503 {
				t.Fatalf("status %d", e.Status())
			}
		}
	}
	if c, s := f.calls.Load(), x.in.Stats(); c != 3 || s[OutcomeLimited] != 7 || s[OutcomeInactive] != 3 {
		t.Fatalf("%d calls, outcomes %v; want 3 calls, 7 limited", c, s)
	}
}

// TestIntrospectionTimeout: a provider that does not answer within the
// timeout is a 503 50307 at the timeout, logged without the token.
func TestIntrospectionTimeout(t *testing.T) {
	t.Parallel()
	slow := &fakeIntrospection{answer: activeSvc, release: make(chan struct{})}
	x := newIntrospecting(t, slow, IntrospectionConfig{Timeout: 100 * time.Millisecond})
	t.Cleanup(func() { close(slow.release) })
	start := time.Now()
	_, _, _, err := x.r.Resolve(context.Background(), "opaque-slow")
	wantErr(t, "slow provider", err, errIntrospectFailed)
	if took := time.Since(start); took > 2*time.Second {
		t.Fatalf("answered after %v", took)
	}
	if l := x.logs.String(); !strings.Contains(l, "token introspection failed") || !strings.Contains(l, "deadline exceeded") {
		t.Fatalf("log:\n%s", l)
	}
	if s := x.in.Status(); !strings.HasPrefix(s, "token introspection failing: ") {
		t.Fatalf("status %q", s)
	}
}

// TestIntrospectionWrongSecret: the provider refusing the gateway's
// client is a 503 50307 whose log line says what to check, and never
// shows the secret.
func TestIntrospectionWrongSecret(t *testing.T) {
	t.Parallel()
	f := &fakeIntrospection{answer: activeSvc}
	x := newIntrospecting(t, f, IntrospectionConfig{ClientID: gwClient, ClientSecret: "wrong-never-logged"})
	_, _, _, err := x.r.Resolve(context.Background(), "opaque-any")
	wantErr(t, "wrong secret", err, errIntrospectFailed)
	if l := x.logs.String(); !strings.Contains(l, "401 Unauthorized (check --oidc-client-id and --oidc-client-secret-file)") {
		t.Fatalf("log:\n%s", l)
	}
	f.refusing = true // the cleanup's check: refused on purpose
}

// TestIntrospectionNoEndpoint: a provider without an introspection
// endpoint is an error in the log at discovery and in the status, and
// opaque tokens are 503 50307, never allowed.
func TestIntrospectionNoEndpoint(t *testing.T) {
	t.Parallel()
	x := newIntrospecting(t, nil, IntrospectionConfig{})
	_, _, _, err := x.r.Resolve(context.Background(), "opaque-any")
	wantErr(t, "no endpoint", err, errIntrospectFailed)
	if l := x.logs.String(); !strings.Contains(l, "level=ERROR msg=\"the identity provider's discovery document names no http(s) introspection_endpoint") {
		t.Fatalf("log:\n%s", l)
	}
	if s := x.in.Status(); !strings.Contains(s, "names no introspection_endpoint") {
		t.Fatalf("status %q", s)
	}
	// Without introspection the same provider's document is fine.
	logs := &logBuf{}
	fetchedProvider(t, ProviderConfig{Issuer: x.idp.URL, Logger: slog.New(slog.NewTextHandler(logs, nil))})
	if strings.Contains(logs.String(), "introspection") {
		t.Fatalf("without introspection:\n%s", logs.String())
	}
}
