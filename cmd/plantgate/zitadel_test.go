package main

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"encoding/json"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/go-jose/go-jose/v4"
	"github.com/zitadel/oidc/v3/example/server/storage"
	"github.com/zitadel/oidc/v3/pkg/oidc"
	"github.com/zitadel/oidc/v3/pkg/op"
	"golang.org/x/text/language"
)

// A real OpenID provider for the end-to-end test: zitadel/oidc's certified
// op package over its example storage, with a client of the test's own
// that gets JWT access tokens by client credentials, and signing keys the
// test rotates.

const (
	zitadelClient = "plantgate-ci"
	zitadelSecret = "ci-secret-for-tests"
)

// zitadelKey is a signing key, both op.SigningKey and op.Key.
type zitadelKey struct {
	id   string
	alg  jose.SignatureAlgorithm
	priv crypto.Signer
}

func (k *zitadelKey) ID() string                                  { return k.id }
func (k *zitadelKey) SignatureAlgorithm() jose.SignatureAlgorithm { return k.alg }
func (k *zitadelKey) Algorithm() jose.SignatureAlgorithm          { return k.alg }
func (k *zitadelKey) Use() string                                 { return "sig" }

// Key is the private key when signing (SigningKey) and the public one in
// the key set (Key): op calls the same method for both, so two types.
func (k *zitadelKey) Key() any { return k.priv }

type publicZitadelKey struct{ *zitadelKey }

func (k publicZitadelKey) Key() any { return k.priv.Public() }

// jwtClient is a client-credentials client that gets JWT access tokens.
type jwtClient struct{ *storage.Client }

func (jwtClient) AccessTokenType() op.AccessTokenType { return op.AccessTokenTypeJWT }
func (jwtClient) GrantTypes() []oidc.GrantType {
	return []oidc.GrantType{oidc.GrantTypeClientCredentials}
}

// zitadelStorage is the example storage with the test's client, keys and
// the scope claim in access tokens.
type zitadelStorage struct {
	*storage.Storage
	client jwtClient
	opaque opaqueClient

	tokensMu sync.Mutex
	tokens   map[string]zitadelToken // access tokens issued, by id: for introspection

	mu        sync.Mutex
	signing   *zitadelKey
	published []*zitadelKey
}

func (s *zitadelStorage) ClientCredentials(_ context.Context, id, secret string) (op.Client, error) {
	switch {
	case id == zitadelClient && secret == zitadelSecret:
		return s.client, nil
	case id == opaqueClientID && secret == opaqueClientSecret:
		return s.opaque, nil
	}
	return nil, oidc.ErrInvalidClient()
}

func (s *zitadelStorage) ClientCredentialsTokenRequest(_ context.Context, id string, scopes []string) (op.TokenRequest, error) {
	return &oidc.JWTTokenRequest{Subject: id, Audience: []string{"plantgate-api"}, Scopes: scopes}, nil
}

func (s *zitadelStorage) GetClientByClientID(ctx context.Context, id string) (op.Client, error) {
	switch id {
	case zitadelClient:
		return s.client, nil
	case opaqueClientID:
		return s.opaque, nil
	}
	return s.Storage.GetClientByClientID(ctx, id)
}

// GetPrivateClaimsFromScopes puts the granted scopes in the token (RFC
// 9068's scope claim), which the example storage leaves out.
func (s *zitadelStorage) GetPrivateClaimsFromScopes(_ context.Context, _, _ string, scopes []string) (map[string]any, error) {
	return map[string]any{"scope": strings.Join(scopes, " ")}, nil
}

func (s *zitadelStorage) SigningKey(context.Context) (op.SigningKey, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.signing, nil
}

func (s *zitadelStorage) SignatureAlgorithms(context.Context) ([]jose.SignatureAlgorithm, error) {
	return []jose.SignatureAlgorithm{jose.RS256, jose.ES256}, nil
}

func (s *zitadelStorage) KeySet(context.Context) ([]op.Key, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	keys := make([]op.Key, 0, len(s.published))
	for _, k := range s.published {
		keys = append(keys, publicZitadelKey{k})
	}
	return keys, nil
}

// rotate publishes k and signs with it from now on.
func (s *zitadelStorage) rotate(k *zitadelKey) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.published = append(s.published, k)
	s.signing = k
}

// zitadelIssuer is the running provider.
type zitadelIssuer struct {
	url            string
	store          *zitadelStorage
	jwksHits       atomic.Int64
	introspections atomic.Int64
}

func startZitadel(t *testing.T) *zitadelIssuer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	issuer := "http://" + ln.Addr().String()
	rsaKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	first := &zitadelKey{id: "zitadel-rsa-1", alg: jose.RS256, priv: rsaKey}
	web := storage.WebClient(zitadelClient, zitadelSecret)
	st := &zitadelStorage{Storage: storage.NewStorage(storage.NewUserStore(issuer)), client: jwtClient{web},
		opaque: opaqueClient{storage.WebClient(opaqueClientID, opaqueClientSecret)}, tokens: map[string]zitadelToken{},
		signing: first, published: []*zitadelKey{first}}
	var cryptoKey [32]byte
	rand.Read(cryptoKey[:])
	provider, err := op.NewProvider(&op.Config{CryptoKey: cryptoKey, SupportedUILocales: []language.Tag{language.English}},
		st, op.StaticIssuer(issuer), op.WithAllowInsecure())
	if err != nil {
		t.Fatal(err)
	}
	z := &zitadelIssuer{url: issuer, store: st}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/keys":
			z.jwksHits.Add(1)
		case "/oauth/introspect":
			z.introspections.Add(1)
		}
		provider.ServeHTTP(w, r)
	})}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return z
}

// token gets an access token by client credentials from the token
// endpoint the discovery document names, as a client would.
func (z *zitadelIssuer) token(t *testing.T, scope string) string {
	t.Helper()
	tok := z.tokenFor(t, zitadelClient, zitadelSecret, scope)
	if strings.Count(tok, ".") != 2 {
		t.Fatalf("not a JWT: %d dots", strings.Count(tok, "."))
	}
	return tok
}

// tokenFor gets an access token for the client id by client credentials.
func (z *zitadelIssuer) tokenFor(t *testing.T, id, secret, scope string) string {
	t.Helper()
	resp, err := http.Get(z.url + "/.well-known/openid-configuration")
	if err != nil {
		t.Fatal(err)
	}
	var meta struct {
		TokenEndpoint string `json:"token_endpoint"`
	}
	err = json.NewDecoder(resp.Body).Decode(&meta)
	resp.Body.Close()
	if err != nil || meta.TokenEndpoint == "" {
		t.Fatalf("discovery: %v %+v", err, meta)
	}
	req, _ := http.NewRequest("POST", meta.TokenEndpoint, strings.NewReader(url.Values{"grant_type": {"client_credentials"}, "scope": {scope}}.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.SetBasicAuth(id, secret)
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var tok struct {
		AccessToken string `json:"access_token"`
		TokenType   string `json:"token_type"`
		Error       string `json:"error"`
		Description string `json:"error_description"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&tok); err != nil || resp.StatusCode != 200 || tok.AccessToken == "" {
		t.Fatalf("client credentials: %d %v %+v", resp.StatusCode, err, tok)
	}
	return tok.AccessToken
}

// TestZitadelProviderEndToEnd: access tokens from a real OpenID provider
// (zitadel/oidc's op, discovery, JWKS and the token endpoint over HTTP),
// through the real gateway, across a key rotation to another algorithm.
func TestZitadelProviderEndToEnd(t *testing.T) {
	t.Parallel()
	z := startZitadel(t)
	logs := &syncBuffer{}
	m := &Main{
		Listen:         "127.0.0.1:0",
		PluginsDir:     pluginsDir(t, "10-bearer-auth.wasm", "20-plant-rules.wasm"),
		BootstrapToken: oidcBootstrap,
		CacheDir:       sharedCache,
		AccessLog:      true,
		Logger:         slog.New(slog.NewTextHandler(logs, nil)),
		OIDC:           OIDC{Issuer: z.url, Audience: "plantgate-api", CallerClaim: "sub"},
	}
	if err := m.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	base := "http://" + m.Addr().String()

	writer := z.token(t, "plants:write plants:read")
	if got := ask(t, "POST", base+"/plants", writer, `{"id":5,"name":"Aloe"}`); got != (answer{200, "", `{"name":"Aloe"}`}) {
		t.Fatalf("create with the provider's token: %+v", got)
	}
	reader := z.token(t, "plants:read")
	if got := ask(t, "POST", base+"/plants", reader, `{"id":6,"name":"Yucca"}`); got != (answer{403, `Bearer realm="plantgate", error="insufficient_scope"`, `{"error":40350,"message":"token lacks scope plants:write"}`}) {
		t.Fatalf("create with a read-only token: %+v", got)
	}

	ecKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	before := z.jwksHits.Load()
	z.store.rotate(&zitadelKey{id: "zitadel-ec-2", alg: jose.ES256, priv: ecKey})
	rotated := z.token(t, "plants:read")
	if got := ask(t, "GET", base+"/plants/5", rotated, ""); got != (answer{200, "", `{"id":5,"name":"Aloe"}`}) {
		t.Fatalf("token of the rotated key: %+v", got)
	}
	if n := z.jwksHits.Load() - before; n != 1 {
		t.Fatalf("the rotation cost %d key set fetches, want 1", n)
	}
	if got := ask(t, "GET", base+"/plants/5", writer, ""); got.status != 200 {
		t.Fatalf("the first key's token after the rotation: %+v", got)
	}
	if l := logs.String(); !strings.Contains(l, "principal=oidc:"+zitadelClient) || strings.Contains(l, writer) || strings.Contains(l, rotated) {
		t.Fatalf("access log: no caller, or a token:\n%s", l)
	}
}
