package main

import (
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"

	"github.com/plantgate/plantgate/host/decisionlog"
	"github.com/plantgate/plantgate/host/oidc/oidctest"
)

const oidcBootstrap = "bootstrap-token-for-oidc-tests-0123456789"

// startOIDCGateway runs the whole gateway in process (real Fiber stack,
// bundled bearer-auth and plant-rules, embedded store) accepting idp's
// access tokens, with an admin listener; edits change its settings first.
func startOIDCGateway(t *testing.T, idp *oidctest.Issuer, edits ...func(*Main)) (*Main, string, *syncBuffer) {
	t.Helper()
	logs := &syncBuffer{} // the log, then the decision log
	m := &Main{
		Listen:         "127.0.0.1:0",
		AdminListen:    "127.0.0.1:0",
		PluginsDir:     pluginsDir(t, "10-bearer-auth.wasm", "20-plant-rules.wasm"),
		BootstrapToken: oidcBootstrap,
		CacheDir:       sharedCache,
		AccessLog:      true,
		TokenCacheTTL:  time.Second,
		Logger:         slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
		OIDC:           OIDC{Issuer: idp.URL, Audience: oidctest.Audience, Leeway: 30 * time.Second, CallerClaim: "sub"},
		DecisionLog:    decisionlog.Config{Writer: logs},
	}
	for _, edit := range edits {
		edit(m)
	}
	if err := m.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m, "http://" + m.Addr().String(), logs
}

// answer is one response as a client meets it.
type answer struct {
	status    int
	challenge string // WWW-Authenticate
	body      string
}

func ask(t *testing.T, method, url, token, body string) answer {
	t.Helper()
	req, _ := http.NewRequest(method, url, strings.NewReader(body))
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	status, got, h := send(t, req, token)
	return answer{status, h.Get("WWW-Authenticate"), got}
}

const invalidToken = `Bearer realm="plantgate", error="invalid_token"`

// TestAccessTokensEndToEnd: an identity provider's access tokens through
// the real gateway: accepted with their scopes under bearer-auth's
// route→scope map, refused with their own codes, the gateway's own token
// beside them, the caller named in the access log and no token, signature
// or claim in any log line or the decision log.
func TestAccessTokensEndToEnd(t *testing.T) {
	t.Parallel()
	k1 := oidctest.NewKey(t, "rsa-1", jose.RS256)
	idp := oidctest.Start(t, k1)
	_, base, logs := startOIDCGateway(t, idp)

	writer := idp.Token(t, "alice", "openid plants:write plants:read")
	if got := ask(t, "POST", base+"/plants", writer, `{"id":1,"name":"Monstera"}`); got != (answer{200, "", `{"name":"Monstera"}`}) {
		t.Fatalf("create with an access token: %+v", got)
	}
	if got := ask(t, "GET", base+"/plants/1", writer, ""); got != (answer{200, "", `{"id":1,"name":"Monstera"}`}) {
		t.Fatalf("read with an access token: %+v", got)
	}
	if got := ask(t, "DELETE", base+"/plants/1", writer, ""); got != (answer{403, `Bearer realm="plantgate", error="insufficient_scope"`, `{"error":40350,"message":"token lacks scope plants:delete"}`}) {
		t.Fatalf("delete without plants:delete: %+v", got)
	}
	if got := ask(t, "GET", base+"/plants/1", oidcBootstrap, ""); got.status != 200 {
		t.Fatalf("the gateway's own token beside access tokens: %+v", got)
	}

	// Rotation: the provider signs with a new key; the first token of it
	// costs one fetch, then verifies.
	idp.Rotate(oidctest.NewKey(t, "ec-2", jose.ES256), false)
	rotated := idp.Token(t, "bob", "plants:read")
	if got := ask(t, "GET", base+"/plants/1", rotated, ""); got.status != 200 {
		t.Fatalf("token of the rotated key: %+v", got)
	}
	// The withdrawn key's token stays kept (KeepFor) where it was seen...
	if got := ask(t, "GET", base+"/plants/1", writer, ""); got.status != 200 {
		t.Fatalf("kept token of the withdrawn key: %+v", got)
	}
	// ...but a new token of it is no longer accepted.
	late := oidctest.Sign(t, k1, idp.Claims("mallory", "plants:read"), nil)
	if got := ask(t, "GET", base+"/plants/1", late, ""); got != (answer{401, invalidToken, `{"error":40107,"message":"access token is signed with a key the issuer does not publish"}`}) {
		t.Fatalf("new token of the withdrawn key: %+v", got)
	}

	signer := idp.Signing()
	claims := func(edit func(map[string]any)) map[string]any {
		c := idp.Claims("eve", "plants:read")
		edit(c)
		return c
	}
	parts := strings.Split(rotated, ".")
	b64 := base64.RawURLEncoding.EncodeToString
	tests := []struct {
		name  string
		token string
		want  answer
	}{
		{"alg none", b64([]byte(`{"alg":"none","kid":"ec-2"}`)) + "." + parts[1] + ".",
			answer{401, invalidToken, `{"error":40108,"message":"access token is not signed with RS256, PS256, ES256 or EdDSA"}`}},
		{"HMAC keyed with a public key", oidctest.SignWith(t, jose.SigningKey{Algorithm: jose.HS256, Key: []byte("the issuer's public key, which anyone can read")},
			idp.Claims("eve", "plants:read"), (&jose.SignerOptions{}).WithHeader("kid", "ec-2")),
			answer{401, invalidToken, `{"error":40108,"message":"access token is not signed with RS256, PS256, ES256 or EdDSA"}`}},
		{"embedded jwk", oidctest.SignWith(t, jose.SigningKey{Algorithm: jose.ES256, Key: oidctest.NewKey(t, "x", jose.ES256).Private},
			idp.Claims("eve", "plants:read"), (&jose.SignerOptions{EmbedJWK: true}).WithHeader("kid", "ec-2")),
			answer{401, invalidToken, `{"error":40108,"message":"access token signature does not verify"}`}},
		{"jku", oidctest.Sign(t, oidctest.NewKey(t, "evil", jose.ES256), idp.Claims("eve", "plants:read"), map[string]any{"jku": "http://127.0.0.1:1/keys"}),
			answer{401, invalidToken, `{"error":40107,"message":"access token is signed with a key the issuer does not publish"}`}},
		{"foreign key under a known kid", oidctest.Sign(t, oidctest.NewKey(t, "ec-2", jose.ES256), idp.Claims("eve", "plants:read"), nil),
			answer{401, invalidToken, `{"error":40108,"message":"access token signature does not verify"}`}},
		{"tampered claims", parts[0] + "." + b64([]byte(strings.Replace(string(mustB64(t, parts[1])), `"bob"`, `"root"`, 1))) + "." + parts[2],
			answer{401, invalidToken, `{"error":40108,"message":"access token signature does not verify"}`}},
		{"no exp", oidctest.Sign(t, signer, claims(func(c map[string]any) { delete(c, "exp") }), nil),
			answer{401, invalidToken, `{"error":40109,"message":"access token has no exp"}`}},
		{"unknown crit", oidctest.Sign(t, signer, idp.Claims("eve", "plants:read"), map[string]any{"crit": []string{"x-bank"}, "x-bank": 1}),
			answer{401, invalidToken, `{"error":40109,"message":"access token names a critical header extension the gateway does not understand"}`}},
		{"expired", oidctest.Sign(t, signer, claims(func(c map[string]any) { c["exp"] = time.Now().Add(-time.Minute).Unix() }), nil),
			answer{401, invalidToken, `{"error":40103,"message":"access token expired"}`}},
		{"future nbf", oidctest.Sign(t, signer, claims(func(c map[string]any) { c["nbf"] = time.Now().Add(time.Hour).Unix() }), nil),
			answer{401, invalidToken, `{"error":40104,"message":"access token is not valid yet"}`}},
		{"wrong iss", oidctest.Sign(t, signer, claims(func(c map[string]any) { c["iss"] = "https://idp.example" }), nil),
			answer{401, invalidToken, `{"error":40105,"message":"access token is from another issuer"}`}},
		{"wrong aud", oidctest.Sign(t, signer, claims(func(c map[string]any) { c["aud"] = "another-api" }), nil),
			answer{401, invalidToken, `{"error":40106,"message":"access token is for another audience"}`}},
		{"malformed", "not.a.jwt",
			answer{401, invalidToken, `{"error":40109,"message":"access token is not a well-formed signed JWT"}`}},
		{"7 KB", parts[0] + "." + strings.Repeat("~", 7000) + "." + parts[2],
			answer{401, invalidToken, `{"error":40109,"message":"access token is not a well-formed signed JWT"}`}},
	}
	for _, tt := range tests {
		if got := ask(t, "GET", base+"/plants/1", tt.token, ""); got != tt.want {
			t.Errorf("%s: %+v, want %+v", tt.name, got, tt.want)
		}
	}
	// A 20 KB credential is over the 8 KiB request head every request is
	// read in: refused by the HTTP layer before any token is looked at
	// (docs/abi.md bounds the authorize message on it).
	if got := rawAnswer(t, base, parts[0]+"."+strings.Repeat("A", 20<<10)+"."+parts[2]); !strings.HasPrefix(got, "HTTP/1.1 400 Bad Request\r\n") ||
		!strings.HasSuffix(got, "\r\n\r\n"+`{"error":40012,"message":"request headers are too large"}`) || strings.Contains(got, "WWW-Authenticate") {
		t.Errorf("20 KB token: %q", got)
	}

	l := logs.String()
	if !strings.Contains(l, "principal=oidc:alice") || !strings.Contains(l, "principal=oidc:bob") {
		t.Errorf("the access log does not name the callers:\n%s", l)
	}
	if !strings.Contains(l, `"principal":"oidc:alice"`) {
		t.Errorf("the decision log does not name the caller:\n%s", l)
	}
	for _, secret := range []string{writer, rotated, late, parts[1], parts[2], "openid plants:write"} {
		if strings.Contains(l, secret) {
			t.Fatalf("a log line holds a token, signature or claim (%.20q…):\n%s", secret, l)
		}
	}
}

func mustB64(t *testing.T, s string) []byte {
	t.Helper()
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// rawAnswer sends GET /plants with the credential on a raw socket and
// returns the whole answer, up to the connection's close.
func rawAnswer(t *testing.T, base, credential string) string {
	t.Helper()
	c, err := net.Dial("tcp", strings.TrimPrefix(base, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	fmt.Fprintf(c, "GET /plants HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\n\r\n", credential)
	b, _ := io.ReadAll(c)
	return string(b)
}

// TestAccessTokensProviderDownAtStart: serve starts with the provider
// down; its own token works, access tokens are refused 503 50305 and the
// admin /readyz says why; once the provider answers, they are accepted.
// Then the provider goes down again and the known key keeps working.
func TestAccessTokensProviderDownAtStart(t *testing.T) {
	t.Parallel()
	idp := oidctest.Start(t, oidctest.NewKey(t, "k1", jose.ES256))
	idp.SetDown(true)
	m, base, logs := startOIDCGateway(t, idp)
	if got := ask(t, "GET", base+"/plants", oidcBootstrap, ""); got.status != 200 {
		t.Fatalf("own token while the provider is down: %+v", got)
	}
	tok := idp.Token(t, "alice", "plants:read")
	req, _ := http.NewRequest("GET", base+"/plants", nil)
	status, body, h := send(t, req, tok)
	if status != 503 || h.Get("Retry-After") != "1" || body != `{"error":50305,"message":"the identity provider's signing keys are not available yet; retry later"}` {
		t.Fatalf("access token before keys: %d %q %s", status, h.Get("Retry-After"), body)
	}
	// Anyone can send access tokens while the keys are missing: their
	// error line is written once per interval, not once per request.
	for range 20 {
		if got := ask(t, "GET", base+"/plants", tok, ""); got.status != 503 {
			t.Fatalf("access token before keys: %+v", got)
		}
	}
	if n := strings.Count(logs.String(), "code=50305"); n != 1 {
		t.Fatalf("21 refusals for missing keys logged %d lines, want 1:\n%s", n, logs)
	}
	admin := "http://" + m.admin.addr.String()
	if status, body, _ := get(t, admin+"/readyz"); status != 200 || !strings.Contains(body, `"oidc":"identity provider keys not fetched yet: discovery: GET `+idp.URL+`/.well-known/openid-configuration: 503 Service Unavailable`) {
		t.Fatalf("admin /readyz: %d %s", status, body)
	}
	if !strings.Contains(logs.String(), "identity provider keys not fetched: access tokens are refused (503 50305) until they arrive") {
		t.Fatalf("no log line says why:\n%s", logs)
	}
	idp.SetDown(false)
	deadline := time.Now().Add(15 * time.Second)
	for ask(t, "GET", base+"/plants", tok, "").status != 200 {
		if time.Now().After(deadline) {
			t.Fatal("access tokens still refused 15s after the provider came up")
		}
		time.Sleep(100 * time.Millisecond)
	}
	if status, body, _ := get(t, admin+"/readyz"); status != 200 || strings.Contains(body, "oidc") {
		t.Fatalf("admin /readyz once keys arrived: %d %s", status, body)
	}
	idp.SetDown(true)
	fresh := idp.Token(t, "carol", "plants:read")
	if got := ask(t, "GET", base+"/plants", fresh, ""); got.status != 200 {
		t.Fatalf("a new token of a known key while the provider is down: %+v", got)
	}
}

// TestAccessTokenScopeClaim: with --oidc-scope-claim roles, an Entra ID
// client-credentials token's application permissions are its scopes under
// bearer-auth's route→scope map, its scope claim is not read, and a roles
// claim of another shape is refused 401 40109.
func TestAccessTokenScopeClaim(t *testing.T) {
	t.Parallel()
	k := oidctest.NewKey(t, "k1", jose.RS256)
	idp := oidctest.Start(t, k)
	_, base, logs := startOIDCGateway(t, idp, func(m *Main) { m.OIDC.ScopeClaim = "roles" })
	app := func(roles any) string {
		c := idp.Claims("5f1a-service-principal", "plants:delete")
		c["roles"] = roles
		return oidctest.Sign(t, k, c, nil)
	}
	writer := app([]string{"plants:write", "plants:read"})
	if got := ask(t, "POST", base+"/plants", writer, `{"id":1,"name":"Monstera"}`); got != (answer{200, "", `{"name":"Monstera"}`}) {
		t.Fatalf("create with roles: %+v", got)
	}
	if got := ask(t, "GET", base+"/plants/1", app("plants:read"), ""); got != (answer{200, "", `{"id":1,"name":"Monstera"}`}) {
		t.Fatalf("read with roles as a string: %+v", got)
	}
	if got := ask(t, "DELETE", base+"/plants/1", writer, ""); got != (answer{403, `Bearer realm="plantgate", error="insufficient_scope"`, `{"error":40350,"message":"token lacks scope plants:delete"}`}) {
		t.Fatalf("delete with plants:delete only in scope: %+v", got)
	}
	malformed := answer{401, invalidToken, `{"error":40109,"message":"access token's scope claim is not a string or array of scope tokens of at most 2048 bytes"}`}
	for _, roles := range []any{7, map[string]bool{"plants:read": true}, []int{1}} {
		if got := ask(t, "GET", base+"/plants/1", app(roles), ""); got != malformed {
			t.Errorf("roles %v: %+v, want %+v", roles, got, malformed)
		}
	}
	if !strings.Contains(logs.String(), `msg="accepting access tokens"`) || !strings.Contains(logs.String(), " scopes=roles ") {
		t.Errorf("the start-up line does not name the scope claim:\n%s", logs)
	}
}

// TestOpenAPINamesTheIssuer: with an issuer, the served document names its
// OpenID Connect scheme.
func TestOpenAPINamesTheIssuer(t *testing.T) {
	t.Parallel()
	idp := oidctest.Start(t, oidctest.NewKey(t, "k1", jose.ES256))
	_, base, _ := startOIDCGateway(t, idp)
	status, body, _ := get(t, base+"/openapi.yaml")
	want := "    oidc:\n      type: openIdConnect\n      openIdConnectUrl: \"" + idp.URL + "/.well-known/openid-configuration\"\n"
	if status != 200 || !strings.Contains(body, want) || !strings.Contains(body, "security:\n  - bearerAuth: []\n  - oidc: []\n") {
		t.Fatalf("openapi.yaml: %d\n%s", status, body)
	}
}

// TestOIDCFlagErrors: serve refuses an incomplete identity provider
// configuration, and token create a name that could pass for one of its
// callers.
func TestOIDCFlagErrors(t *testing.T) {
	t.Parallel()
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"plantgate", "serve", "--oidc-issuer", "https://idp.example"}, "--oidc-issuer needs --oidc-audience: the audience this gateway's access tokens are issued for"},
		{[]string{"plantgate", "serve", "--oidc-audience", "api"}, "--oidc-audience and --oidc-ca-file need --oidc-issuer"},
		{[]string{"plantgate", "serve", "--oidc-scope-claim", "roles"}, "--oidc-scope-claim needs --oidc-issuer"},
		{[]string{"plantgate", "serve", "--oidc-issuer", "https://idp.example", "--oidc-audience", "api", "--oidc-leeway", "1h"}, "--oidc-leeway 1h0m0s: want 0 to 5m"},
		{[]string{"plantgate", "token", "create", "--name", "oidc:alice", "--scope", "plants:read"}, `--name "oidc:alice" starts with "oidc:", which names the callers of access tokens (--oidc-issuer): choose another`},
	}
	for _, c := range cases {
		app := newApp()
		app.Writer, app.ErrWriter = io.Discard, io.Discard
		if err := app.Run(context.Background(), c.args); err == nil || err.Error() != c.want {
			t.Errorf("%v: %v, want %s", c.args, err, c.want)
		}
	}
	m := &Main{BootstrapToken: "has.a.dot", OIDC: OIDC{Issuer: "https://idp.example", Audience: "api"}, Logger: slog.New(slog.DiscardHandler)}
	if err := m.storeUp(context.Background()); err == nil || err.Error() != "--bootstrap-token holds a dot: with --oidc-issuer such a credential is taken for an access token; choose one without" {
		t.Errorf("bootstrap token with a dot: %v", err)
	}
}
