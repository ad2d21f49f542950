// Package oidctest is a small OpenID provider for tests: a real HTTP
// server serving a discovery document and a key set (JWKS) of keys it
// makes, signing access tokens with go-jose, rotating keys, going down on
// demand and counting the key set's fetches.
package oidctest

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
)

// Audience is the audience Token puts in aud.
const Audience = "plantgate-api"

// Key is a signing key of the provider.
type Key struct {
	ID      string
	Alg     jose.SignatureAlgorithm
	Private crypto.Signer
}

// Public is the key's public JWK.
func (k *Key) Public() jose.JSONWebKey {
	return jose.JSONWebKey{Key: k.Private.Public(), KeyID: k.ID, Algorithm: string(k.Alg), Use: "sig"}
}

// NewKey makes a key for alg: RSA 2048 for RS256/PS256, P-256 for ES256,
// Ed25519 for EdDSA.
func NewKey(t testing.TB, id string, alg jose.SignatureAlgorithm) *Key {
	t.Helper()
	var priv crypto.Signer
	var err error
	switch alg {
	case jose.RS256, jose.PS256:
		priv, err = rsa.GenerateKey(rand.Reader, 2048)
	case jose.ES256:
		priv, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	case jose.EdDSA:
		_, priv, err = ed25519.GenerateKey(rand.Reader)
	default:
		t.Fatalf("oidctest: no key for %s", alg)
	}
	if err != nil {
		t.Fatal(err)
	}
	return &Key{ID: id, Alg: alg, Private: priv}
}

// Issuer is the test provider.
type Issuer struct {
	URL string // the issuer identifier: the server's base URL

	srv *httptest.Server

	mu        sync.Mutex
	published []*Key
	signing   *Key
	maxAge    int // Cache-Control max-age of the key set; 0: none

	introspect    atomic.Pointer[http.Handler] // nil: no introspection_endpoint
	down          atomic.Bool                  // answer every request 503
	jwksHits      atomic.Int64
	discoveryHits atomic.Int64
}

// Start serves a provider publishing and signing with first.
func Start(t testing.TB, first *Key) *Issuer {
	t.Helper()
	i := &Issuer{published: []*Key{first}, signing: first}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /.well-known/openid-configuration", func(w http.ResponseWriter, r *http.Request) {
		i.discoveryHits.Add(1)
		if i.down.Load() {
			http.Error(w, "down", http.StatusServiceUnavailable)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		meta := map[string]any{
			"issuer": i.URL, "jwks_uri": i.URL + "/keys", "token_endpoint": i.URL + "/token",
			"id_token_signing_alg_values_supported": []string{"RS256"},
		}
		if i.introspect.Load() != nil {
			meta["introspection_endpoint"] = i.URL + "/introspect"
		}
		_ = json.NewEncoder(w).Encode(meta)
	})
	mux.HandleFunc("/introspect", func(w http.ResponseWriter, r *http.Request) {
		h := i.introspect.Load()
		if h == nil {
			http.NotFound(w, r)
			return
		}
		(*h).ServeHTTP(w, r)
	})
	mux.HandleFunc("GET /keys", func(w http.ResponseWriter, r *http.Request) {
		i.jwksHits.Add(1)
		if i.down.Load() {
			http.Error(w, "down", http.StatusServiceUnavailable)
			return
		}
		i.mu.Lock()
		set := jose.JSONWebKeySet{}
		for _, k := range i.published {
			set.Keys = append(set.Keys, k.Public())
		}
		maxAge := i.maxAge
		i.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		if maxAge > 0 {
			w.Header().Set("Cache-Control", fmt.Sprintf("public, max-age=%d", maxAge))
		}
		_ = json.NewEncoder(w).Encode(set)
	})
	i.srv = httptest.NewServer(mux)
	i.URL = i.srv.URL
	t.Cleanup(i.srv.Close)
	return i
}

// Publish adds k to the key set without signing with it.
func (i *Issuer) Publish(k *Key) {
	i.mu.Lock()
	defer i.mu.Unlock()
	i.published = append(i.published, k)
}

// Rotate publishes k and signs from now on with it; keep says whether the
// old signing key stays published.
func (i *Issuer) Rotate(k *Key, keep bool) {
	i.mu.Lock()
	defer i.mu.Unlock()
	if !keep {
		for n, old := range i.published {
			if old == i.signing {
				i.published = append(i.published[:n:n], i.published[n+1:]...)
				break
			}
		}
	}
	i.published = append(i.published, k)
	i.signing = k
}

// SetMaxAge sets the key set's Cache-Control max-age in seconds (0: none).
func (i *Issuer) SetMaxAge(s int) {
	i.mu.Lock()
	defer i.mu.Unlock()
	i.maxAge = s
}

// SetIntrospection serves h as the RFC 7662 introspection endpoint, which
// the discovery document then names; call it before the gateway reads
// the document.
func (i *Issuer) SetIntrospection(h http.Handler) { i.introspect.Store(&h) }

// SetDown makes every request answer 503 (true) or serve again.
func (i *Issuer) SetDown(down bool) { i.down.Store(down) }

// JWKSHits is how many times the key set was fetched.
func (i *Issuer) JWKSHits() int64 { return i.jwksHits.Load() }

// Signing is the key the provider signs with now.
func (i *Issuer) Signing() *Key {
	i.mu.Lock()
	defer i.mu.Unlock()
	return i.signing
}

// Claims is a valid claim set for sub with scope, issued now for five
// minutes.
func (i *Issuer) Claims(sub, scope string) map[string]any {
	now := time.Now()
	return map[string]any{"iss": i.URL, "sub": sub, "aud": Audience, "scope": scope,
		"iat": now.Unix(), "exp": now.Add(5 * time.Minute).Unix(), "client_id": "test-client"}
}

// Token is a valid access token for sub with scope, signed with the
// current key.
func (i *Issuer) Token(t testing.TB, sub, scope string) string {
	return Sign(t, i.Signing(), i.Claims(sub, scope), nil)
}

// Sign signs claims with k as a compact JWS of typ at+jwt with k's kid,
// plus the extra header parameters given.
func Sign(t testing.TB, k *Key, claims map[string]any, headers map[string]any) string {
	t.Helper()
	opts := (&jose.SignerOptions{}).WithType("at+jwt").WithHeader("kid", k.ID)
	for name, v := range headers {
		opts = opts.WithHeader(jose.HeaderKey(name), v)
	}
	return SignWith(t, jose.SigningKey{Algorithm: k.Alg, Key: k.Private}, claims, opts)
}

// SignWith signs claims with any go-jose signing key and options: for
// hostile tokens (HMAC, embedded keys).
func SignWith(t testing.TB, key jose.SigningKey, claims map[string]any, opts *jose.SignerOptions) string {
	t.Helper()
	s, err := jose.NewSigner(key, opts)
	if err != nil {
		t.Fatal(err)
	}
	payload, err := json.Marshal(claims)
	if err != nil {
		t.Fatal(err)
	}
	jws, err := s.Sign(payload)
	if err != nil {
		t.Fatal(err)
	}
	out, err := jws.CompactSerialize()
	if err != nil {
		t.Fatal(err)
	}
	return out
}
