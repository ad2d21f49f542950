package oidc

import (
	"context"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"

	"github.com/plantgate/plantgate/host"
	"github.com/plantgate/plantgate/host/oidc/oidctest"
)

// newResolver starts a provider for idp, waits for its keys, and returns
// a Resolver of its tokens.
func newResolver(t *testing.T, idp *oidctest.Issuer, cfg VerifierConfig) (*Resolver, *Provider) {
	t.Helper()
	p := fetchedProvider(t, ProviderConfig{Issuer: idp.URL, Logger: quiet})
	if cfg.Audience == "" {
		cfg.Audience = oidctest.Audience
	}
	v, err := NewVerifier(p, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return NewResolver(v, 0), p
}

var quiet = slog.New(slog.DiscardHandler)

// fetchedProvider is a provider for cfg that has read the discovery
// document and the key set.
func fetchedProvider(t testing.TB, cfg ProviderConfig) *Provider {
	t.Helper()
	p, err := NewProvider(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	if _, err := p.fetchShared(context.Background()); err != nil {
		t.Fatal(err)
	}
	return p
}

func b64(s string) string { return base64.RawURLEncoding.EncodeToString([]byte(s)) }

// TestHostileTokens: every token an attacker or a broken client can send
// is refused with its own code and a message that echoes nothing of it.
func TestHostileTokens(t *testing.T) {
	k1 := oidctest.NewKey(t, "k1", jose.RS256)
	idp := oidctest.Start(t, k1)
	r, _ := newResolver(t, idp, VerifierConfig{})

	// An attacker's own key set, which a jku or x5u header points at: it
	// must never be fetched.
	var attackerHits atomic.Int64
	attacker := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { attackerHits.Add(1) }))
	defer attacker.Close()
	foreign := oidctest.NewKey(t, "k1", jose.RS256) // a key the issuer never published, under its kid
	pubDER, _ := x509.MarshalPKIXPublicKey(k1.Private.Public())
	pubPEM := pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pubDER})

	valid := idp.Token(t, "alice", "plants:read")
	parts := strings.Split(valid, ".")
	claims := func(edit func(map[string]any)) map[string]any {
		c := idp.Claims("alice", "plants:read")
		edit(c)
		return c
	}
	now := time.Now()
	tests := []struct {
		name  string
		token string
		want  *host.Error
	}{
		{"alg none", b64(`{"alg":"none","kid":"k1","typ":"at+jwt"}`) + "." + parts[1] + ".", errAlgorithm},
		{"HMAC keyed with the public key", oidctest.SignWith(t, jose.SigningKey{Algorithm: jose.HS256, Key: pubPEM},
			idp.Claims("alice", "plants:read"), (&jose.SignerOptions{}).WithHeader("kid", "k1")), errAlgorithm},
		{"embedded jwk of the signer's own key", oidctest.SignWith(t, jose.SigningKey{Algorithm: jose.RS256, Key: foreign.Private},
			idp.Claims("alice", "plants:read"), (&jose.SignerOptions{EmbedJWK: true}).WithHeader("kid", "k1")), errSignature},
		{"jku to the attacker's key set", oidctest.Sign(t, oidctest.NewKey(t, "evil", jose.RS256), idp.Claims("alice", "plants:read"),
			map[string]any{"jku": attacker.URL, "x5u": attacker.URL}), errUnknownKey},
		{"a foreign key under a known kid", oidctest.Sign(t, foreign, idp.Claims("alice", "plants:read"), nil), errSignature},
		{"tampered claims", parts[0] + "." + b64(`{"iss":"`+idp.URL+`","sub":"root","aud":"`+oidctest.Audience+`","scope":"plants:delete","exp":9999999999}`) + "." + parts[2], errSignature},
		{"ES256 header on an RSA key", parts[0][:0] + b64(`{"alg":"ES256","kid":"k1","typ":"at+jwt"}`) + "." + parts[1] + "." + parts[2], errKeyMismatch},
		{"PS256 on a key published for RS256", oidctest.SignWith(t, jose.SigningKey{Algorithm: jose.PS256, Key: k1.Private},
			idp.Claims("alice", "plants:read"), (&jose.SignerOptions{}).WithType("at+jwt").WithHeader("kid", "k1")), errKeyMismatch},
		{"no exp", oidctest.Sign(t, k1, claims(func(c map[string]any) { delete(c, "exp") }), nil), errNoExpiry},
		{"unknown crit", oidctest.Sign(t, k1, idp.Claims("alice", "plants:read"), map[string]any{"crit": []string{"x-bank"}, "x-bank": 1}), errCrit},
		{"typ of another kind", oidctest.SignWith(t, jose.SigningKey{Algorithm: jose.RS256, Key: k1.Private}, idp.Claims("alice", "plants:read"),
			(&jose.SignerOptions{}).WithType("secevent+jwt").WithHeader("kid", "k1")), errType},
		// Keycloak's ID token (typ "JWT" header, payload typ "ID") for a
		// client whose id is also the API's audience.
		{"an ID token", oidctest.Sign(t, k1, claims(func(c map[string]any) { c["typ"] = "ID" }), nil), errNotAccess},
		{"a signed refresh token", oidctest.Sign(t, k1, claims(func(c map[string]any) { c["typ"] = "Refresh" }), nil), errNotAccess},
		{"expired", oidctest.Sign(t, k1, claims(func(c map[string]any) { c["exp"] = now.Add(-time.Hour).Unix() }), nil), errExpired},
		{"nbf in the future", oidctest.Sign(t, k1, claims(func(c map[string]any) { c["nbf"] = now.Add(time.Hour).Unix() }), nil), errNotYet},
		{"iat in the future", oidctest.Sign(t, k1, claims(func(c map[string]any) { c["iat"] = now.Add(time.Hour).Unix() }), nil), errNotYet},
		{"wrong iss", oidctest.Sign(t, k1, claims(func(c map[string]any) { c["iss"] = idp.URL + "/" }), nil), errIssuer},
		{"wrong aud", oidctest.Sign(t, k1, claims(func(c map[string]any) { c["aud"] = []string{"other-api"} }), nil), errAudience},
		{"no sub", oidctest.Sign(t, k1, claims(func(c map[string]any) { delete(c, "sub") }), nil), errCaller},
		{"sub with a newline", oidctest.Sign(t, k1, claims(func(c map[string]any) { c["sub"] = "alice\nlevel=ERROR" }), nil), errCaller},
		{"scope with a quote", oidctest.Sign(t, k1, claims(func(c map[string]any) { c["scope"] = `plants:read "x` }), nil), errScopes},
		{"scope of the wrong type", oidctest.Sign(t, k1, claims(func(c map[string]any) { c["scope"] = 7 }), nil), errMalformed},
		{"malformed", "abc.def.ghi", errMalformed},
		{"two segments", parts[0] + "." + parts[1], errMalformed},
		{"JWE shape", "a.b.c.d.e", errMalformed},
		{"7 KB of junk", parts[0] + "." + strings.Repeat("~", 7000) + "." + parts[2], errMalformed},
		{"7 KB payload under a real signature", parts[0] + "." + strings.Repeat("A", 7000) + "." + parts[2], errSignature},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, _, ok, err := r.Resolve(context.Background(), tt.token)
			if ok || err == nil {
				t.Fatalf("accepted (ok %v, err %v)", ok, err)
			}
			e, isHost := err.(*host.Error)
			if !isHost || *e != *tt.want {
				t.Fatalf("err = %v, want %v", err, tt.want)
			}
			if e.Status() != 401 {
				t.Fatalf("status %d, want 401", e.Status())
			}
		})
	}
	if n := attackerHits.Load(); n != 0 {
		t.Fatalf("the attacker's jku/x5u server was fetched %d times", n)
	}
	if verified, _ := r.Stats(); verified != 0 {
		t.Fatalf("%d hostile tokens counted as verified", verified)
	}
}

// TestResolveValid: a valid token resolves to the caller and scopes a
// plugin sees, kept by digest so a busy client costs one verification.
func TestResolveValid(t *testing.T) {
	for _, alg := range []jose.SignatureAlgorithm{jose.RS256, jose.PS256, jose.ES256, jose.EdDSA} {
		t.Run(string(alg), func(t *testing.T) {
			idp := oidctest.Start(t, oidctest.NewKey(t, "k-"+string(alg), alg))
			r, _ := newResolver(t, idp, VerifierConfig{})
			tok := idp.Token(t, "alice", "plants:read plants:write")
			for range 100 {
				got, until, ok, err := r.Resolve(context.Background(), tok)
				if err != nil || !ok {
					t.Fatalf("Resolve: %v %v", ok, err)
				}
				if got.Name != "oidc:alice" || !slices.Equal(got.Scopes, []string{"plants:read", "plants:write"}) || got.Revoked || got.Expires.IsZero() {
					t.Fatalf("token %+v", got)
				}
				if until.IsZero() || until.After(got.Expires) {
					t.Fatalf("kept until %v, expires %v", until, got.Expires)
				}
			}
			if verified, hits := r.Stats(); verified != 1 || hits != 99 {
				t.Fatalf("verified %d, hits %d: want 1 and 99", verified, hits)
			}
		})
	}
}

// TestScopesAndCaller: scp as an array (Okta) or a string (Entra ID), and
// a caller claim the operator names.
func TestScopesAndCaller(t *testing.T) {
	k := oidctest.NewKey(t, "k", jose.ES256)
	idp := oidctest.Start(t, k)
	r, _ := newResolver(t, idp, VerifierConfig{CallerClaim: "client_id"})
	c := idp.Claims("0oa1b2c3", "")
	delete(c, "scope")
	c["scp"] = []string{"plants:read", "plants:delete"}
	got, _, _, err := r.Resolve(context.Background(), oidctest.Sign(t, k, c, nil))
	if err != nil || got.Name != "oidc:test-client" || !slices.Equal(got.Scopes, []string{"plants:read", "plants:delete"}) {
		t.Fatalf("scp array: %+v %v", got, err)
	}
	c["scp"] = "plants:write plants:read"
	c["scope"] = "plants:read"
	got, _, _, err = r.Resolve(context.Background(), oidctest.Sign(t, k, c, nil))
	if err != nil || !slices.Equal(got.Scopes, []string{"plants:read", "plants:write"}) {
		t.Fatalf("scp string with scope: %+v %v", got, err)
	}
	delete(c, "client_id")
	if _, _, _, err := r.Resolve(context.Background(), oidctest.Sign(t, k, c, nil)); err != errCaller {
		t.Fatalf("no caller claim: %v, want %v", err, errCaller)
	}
}

// TestScopeClaim: with a scope claim named (Entra ID's application
// permissions in roles), the scopes are that claim's, a string or an
// array, and only that claim's; a claim of any other shape refuses the
// token as malformed. Without one, roles is not read.
func TestScopeClaim(t *testing.T) {
	k := oidctest.NewKey(t, "k", jose.RS256)
	idp := oidctest.Start(t, k)
	roles, _ := newResolver(t, idp, VerifierConfig{ScopeClaim: "roles"})
	plain, _ := newResolver(t, idp, VerifierConfig{})
	token := func(edit func(map[string]any)) string {
		c := idp.Claims("svc", "plants:delete") // scope is never read with roles named
		edit(c)
		return oidctest.Sign(t, k, c, nil)
	}
	long := make([]string, 300) // 300 × "plants:xx" = 3,000 bytes
	for i := range long {
		long[i] = fmt.Sprintf("plants:%02d", i%100)
	}
	tests := []struct {
		name   string
		r      *Resolver
		token  string
		scopes []string
		want   *host.Error
	}{
		{"roles array", roles, token(func(c map[string]any) { c["roles"] = []string{"plants:read", "plants:write", "plants:read"} }), []string{"plants:read", "plants:write"}, nil},
		{"roles string", roles, token(func(c map[string]any) { c["roles"] = "plants:write  plants:read" }), []string{"plants:write", "plants:read"}, nil},
		{"roles absent", roles, token(func(map[string]any) {}), nil, nil},
		{"roles null", roles, token(func(c map[string]any) { c["roles"] = nil }), nil, nil},
		{"roles empty array", roles, token(func(c map[string]any) { c["roles"] = []string{} }), nil, nil},
		{"scope of another shape is not read", roles, token(func(c map[string]any) { c["scope"] = 7; c["roles"] = []string{"plants:read"} }), []string{"plants:read"}, nil},
		{"roles a number", roles, token(func(c map[string]any) { c["roles"] = 7 }), nil, errScopeClaim},
		{"roles an object", roles, token(func(c map[string]any) { c["roles"] = map[string]any{"plants:read": true} }), nil, errScopeClaim},
		{"roles an array of numbers", roles, token(func(c map[string]any) { c["roles"] = []int{1, 2} }), nil, errScopeClaim},
		{"roles a boolean", roles, token(func(c map[string]any) { c["roles"] = true }), nil, errScopeClaim},
		{"roles with a quote", roles, token(func(c map[string]any) { c["roles"] = []string{"plants:read", `a"b`} }), nil, errScopeClaim},
		{"roles over 2048 bytes", roles, token(func(c map[string]any) { c["roles"] = long }), nil, errScopeClaim},
		{"no claim named: roles not read", plain, token(func(c map[string]any) { c["scope"] = "plants:read"; c["roles"] = []string{"plants:write"} }), []string{"plants:read"}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, _, ok, err := tt.r.Resolve(context.Background(), tt.token)
			if tt.want != nil {
				e, isHost := err.(*host.Error)
				if ok || !isHost || *e != *tt.want || e.Code != host.ErrTokenMalformed || e.Status() != 401 {
					t.Fatalf("ok %v err %v, want %v", ok, err, tt.want)
				}
				return
			}
			if err != nil || !ok || got.Name != "oidc:svc" || !slices.Equal(got.Scopes, tt.scopes) {
				t.Fatalf("token %+v ok %v err %v, want scopes %q", got, ok, err, tt.scopes)
			}
		})
	}
}

// TestNoTypeAccepted: a token without typ (Okta sends none) is accepted;
// a typ of another kind is not (TestHostileTokens).
func TestNoTypeAccepted(t *testing.T) {
	k := oidctest.NewKey(t, "k", jose.RS256)
	idp := oidctest.Start(t, k)
	r, _ := newResolver(t, idp, VerifierConfig{})
	tok := oidctest.SignWith(t, jose.SigningKey{Algorithm: jose.RS256, Key: k.Private}, idp.Claims("alice", "plants:read"),
		(&jose.SignerOptions{}).WithHeader("kid", "k"))
	if got, _, _, err := r.Resolve(context.Background(), tok); err != nil || got.Name != "oidc:alice" {
		t.Fatalf("no typ: %+v %v", got, err)
	}
}

// TestOpaqueIsNotResolved: a credential without a dot is the store's.
func TestOpaqueIsNotResolved(t *testing.T) {
	idp := oidctest.Start(t, oidctest.NewKey(t, "k", jose.ES256))
	r, _ := newResolver(t, idp, VerifierConfig{})
	if _, _, ok, err := r.Resolve(context.Background(), "pgt_abcdefghijklmnop"); ok || err != nil {
		t.Fatalf("opaque token: ok %v err %v", ok, err)
	}
}

// TestKeptUntilExp: a kept verification ends at exp, after which the
// token is checked again (and refused once past the leeway).
func TestKeptUntilExp(t *testing.T) {
	k := oidctest.NewKey(t, "k", jose.ES256)
	idp := oidctest.Start(t, k)
	r, _ := newResolver(t, idp, VerifierConfig{Leeway: -1})
	c := idp.Claims("alice", "plants:read")
	c["exp"] = time.Now().Add(time.Minute).Unix()
	tok := oidctest.Sign(t, k, c, nil)
	if _, until, _, err := r.Resolve(context.Background(), tok); err != nil || until.Unix() != c["exp"] {
		t.Fatalf("until %v err %v", until, err)
	}
	r.now = func() time.Time { return time.Now().Add(2 * time.Minute) }
	if _, _, _, err := r.Resolve(context.Background(), tok); err != errExpired {
		t.Fatalf("after exp: %v, want %v", err, errExpired)
	}
}

// TestRefreshAfter: the timer follows Cache-Control within its bounds.
func TestRefreshAfter(t *testing.T) {
	h := http.Header{}
	if got := refreshAfter(maxAgeOf(h)); got != DefaultRefresh {
		t.Errorf("no header: %v", got)
	}
	h.Set("Cache-Control", "public, max-age=3600")
	if got := refreshAfter(maxAgeOf(h)); got != time.Hour {
		t.Errorf("max-age=3600: %v", got)
	}
	h.Set("Cache-Control", "max-age=5")
	if got := refreshAfter(maxAgeOf(h)); got != time.Minute {
		t.Errorf("max-age=5: %v", got)
	}
	h.Set("Cache-Control", "no-store")
	if got := refreshAfter(maxAgeOf(h)); got != time.Minute {
		t.Errorf("no-store: %v", got)
	}
	h.Set("Cache-Control", "max-age=999999999")
	if got := refreshAfter(maxAgeOf(h)); got != 24*time.Hour {
		t.Errorf("max-age huge: %v", got)
	}
}
