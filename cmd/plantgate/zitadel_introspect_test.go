package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/zitadel/oidc/v3/example/server/storage"
	"github.com/zitadel/oidc/v3/pkg/oidc"
	"github.com/zitadel/oidc/v3/pkg/op"

	"github.com/plantgate/plantgate/host/oidc/oidctest"
)

// Introspection against the real provider: a client of its storage that
// gets opaque access tokens (zitadel's op issues them as a JWE, four
// dots), and the gateway's own client, which may introspect them.

const (
	opaqueClientID      = "plantgate-opaque"
	opaqueClientSecret  = "opaque-client-secret"
	gatewayClientID     = "plantgate-gateway"
	gatewayClientSecret = "gateway-secret-never-logged"
)

// opaqueClient is a client-credentials client that gets opaque access
// tokens (the example storage's default type).
type opaqueClient struct{ *storage.Client }

func (opaqueClient) GrantTypes() []oidc.GrantType {
	return []oidc.GrantType{oidc.GrantTypeClientCredentials}
}

// zitadelToken is what the provider knows of an access token it issued.
type zitadelToken struct {
	subject  string
	scopes   []string
	audience []string
	exp      time.Time
}

// CreateAccessToken records each token, for SetIntrospectionFromToken.
func (s *zitadelStorage) CreateAccessToken(ctx context.Context, req op.TokenRequest) (string, time.Time, error) {
	id, exp, err := s.Storage.CreateAccessToken(ctx, req)
	if err == nil {
		s.tokensMu.Lock()
		s.tokens[id] = zitadelToken{subject: req.GetSubject(), scopes: req.GetScopes(), audience: req.GetAudience(), exp: exp}
		s.tokensMu.Unlock()
	}
	return id, exp, err
}

// AuthorizeClientIDSecret authenticates the gateway at the introspection
// endpoint.
func (s *zitadelStorage) AuthorizeClientIDSecret(ctx context.Context, id, secret string) error {
	if id == gatewayClientID {
		if secret != gatewayClientSecret {
			return errors.New("invalid secret")
		}
		return nil
	}
	return s.Storage.AuthorizeClientIDSecret(ctx, id, secret)
}

// SetIntrospectionFromToken answers the gateway about a token it issued
// and that has not expired; op answers active false on an error.
func (s *zitadelStorage) SetIntrospectionFromToken(ctx context.Context, resp *oidc.IntrospectionResponse, tokenID, subject, clientID string) error {
	s.tokensMu.Lock()
	tok, ok := s.tokens[tokenID]
	s.tokensMu.Unlock()
	if !ok || clientID != gatewayClientID || tok.subject != subject || !time.Now().Before(tok.exp) {
		return errors.New("token is not active for this client")
	}
	resp.Subject, resp.Scope, resp.Audience, resp.ClientID = tok.subject, tok.scopes, tok.audience, tok.subject
	resp.Expiration, resp.Issuer, resp.TokenType = oidc.FromTime(tok.exp), op.IssuerFromContext(ctx), oidc.BearerToken
	return nil
}

// TestZitadelIntrospectionEndToEnd: a real serve process, configured as an
// operator would (environment, the secret in a file), accepts the real
// provider's opaque access tokens by introspection, with their scopes
// under bearer-auth; refuses a random token as any unknown token; keeps
// its own token free of provider calls; and logs neither token nor secret.
func TestZitadelIntrospectionEndToEnd(t *testing.T) {
	t.Parallel()
	z := startZitadel(t)
	secretFile := filepath.Join(t.TempDir(), "client-secret")
	if err := os.WriteFile(secretFile, []byte(gatewayClientSecret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	g := startGateway(t, []string{"PLANTGATE_OIDC_INTROSPECTION=true", "PLANTGATE_OIDC_CLIENT_ID=" + gatewayClientID,
		"PLANTGATE_OIDC_CLIENT_SECRET_FILE=" + secretFile, "PLANTGATE_BOOTSTRAP_TOKEN=" + oidcBootstrap,
		// The test's provider names aud in its answers: a gateway that
		// requires it serves them.
		"PLANTGATE_OIDC_INTROSPECTION_REQUIRE_AUD=true"},
		"--plugins", pluginsDir(t, "10-bearer-auth.wasm", "20-plant-rules.wasm"), "--admin-listen", "127.0.0.1:0",
		"--oidc-issuer", z.url, "--oidc-audience", "plantgate-api", "--log-flush", "0")
	base := g.base

	writer := z.tokenFor(t, opaqueClientID, opaqueClientSecret, "plants:write plants:read")
	if strings.Count(writer, ".") == 2 {
		t.Fatal("the provider issued a JWS, not an opaque token")
	}
	// The provider's discovery document is read in the background.
	deadline := time.Now().Add(10 * time.Second)
	got := ask(t, "POST", base+"/plants", writer, `{"id":5,"name":"Aloe"}`)
	for got.status == 503 && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
		got = ask(t, "POST", base+"/plants", writer, `{"id":5,"name":"Aloe"}`)
	}
	if got != (answer{200, "", `{"name":"Aloe"}`}) {
		t.Fatalf("create with the opaque token: %+v\n%s", got, g.stderr)
	}
	if got := ask(t, "GET", base+"/plants/5", oidcBootstrap, ""); got != (answer{200, "", `{"id":5,"name":"Aloe"}`}) {
		t.Fatalf("the stored plant: %+v", got)
	}
	if got := ask(t, "POST", base+"/plants", writer, `{"id":5,"name":"Aloe"}`); got != (answer{200, "", `{"name":"Aloe"}`}) {
		t.Fatalf("the same token again: %+v", got)
	}
	calls := z.introspections.Load()
	if calls != 1 {
		t.Fatalf("one opaque token on two requests cost %d introspections, want 1", calls)
	}

	reader := z.tokenFor(t, opaqueClientID, opaqueClientSecret, "plants:read")
	if got := ask(t, "POST", base+"/plants", reader, `{"id":6,"name":"Yucca"}`); got != (answer{403, `Bearer realm="plantgate", error="insufficient_scope"`, `{"error":40350,"message":"token lacks scope plants:write"}`}) {
		t.Fatalf("create with a read-only opaque token: %+v", got)
	}
	random := "c3ludGhldGljLW9wYXF1ZS10b2tlbi0wMTIzNDU2Nzg5"
	for range 3 {
		if got := ask(t, "GET", base+"/plants/5", random, ""); got != (answer{401, invalidToken, `{"error":40151,"message":"invalid token"}`}) {
			t.Fatalf("a random opaque token: %+v", got)
		}
	}
	if n := z.introspections.Load() - calls; n != 2 {
		t.Fatalf("a read-only token and a random one (three times) cost %d introspections, want 2", n)
	}
	calls = z.introspections.Load()
	for range 3 {
		if got := ask(t, "GET", base+"/plants/5", oidcBootstrap, ""); got.status != 200 {
			t.Fatalf("the gateway's own token: %+v", got)
		}
	}
	if n := z.introspections.Load() - calls; n != 0 {
		t.Fatalf("the gateway's own token cost %d introspections", n)
	}

	// The admin listener's port, from its log line: a port chosen by the
	// kernel, which no other test's process can take first.
	_, after, _ := strings.Cut(g.stderr.String(), `msg="serving admin endpoints`)
	_, after, _ = strings.Cut(after, " addr=")
	admin, _, _ := strings.Cut(after, " ")
	_, metrics, _ := get(t, "http://"+admin+"/metrics")
	for _, want := range []string{`plantgate_oidc_introspections_total{outcome="active"} 2`, `plantgate_oidc_introspections_total{outcome="inactive"} 1`,
		`plantgate_oidc_introspections_total{outcome="limited"} 0`} {
		if !strings.Contains(metrics, want) {
			t.Errorf("metrics lack %s", want)
		}
	}
	logs := g.stderr.String()
	if !strings.Contains(logs, "principal=oidc:"+opaqueClientID) || !strings.Contains(logs, `msg="introspecting opaque access tokens" client_id=`+gatewayClientID) ||
		!strings.Contains(logs, " aud_required=true") {
		t.Errorf("the log names no caller or no introspection:\n%s", logs)
	}
	for _, secret := range []string{writer, reader, random, gatewayClientSecret, oidcBootstrap} {
		if strings.Contains(logs, secret) {
			t.Fatalf("a token or the secret reached the log:\n%s", logs)
		}
	}
}

// TestIntrospectionFloodRefused: unknown opaque credentials beyond the
// rate are answered 503 50306 with Retry-After through the real Fiber
// stack, without a provider call.
func TestIntrospectionFloodRefused(t *testing.T) {
	t.Parallel()
	z := startZitadel(t)
	base := startIntrospectingGateway(t, z, 0.2) // a burst of 1, then one call per 5 s
	want := `{"error":50306,"message":"too many unknown access tokens to ask the identity provider about now; retry later"}`
	deadline := time.Now().Add(10 * time.Second)
	for {
		req, _ := http.NewRequest("GET", base+"/plants", nil)
		status, body, _ := send(t, req, "random-first-token")
		if status == 401 && body == `{"error":40151,"message":"invalid token"}` {
			break
		}
		if status != 503 || body == want || time.Now().After(deadline) {
			t.Fatalf("the first random token: %d %s", status, body)
		}
		time.Sleep(50 * time.Millisecond) // 50307 until discovery
	}
	for i := range 5 {
		req, _ := http.NewRequest("GET", base+"/plants", nil)
		status, body, h := send(t, req, fmt.Sprintf("random-flood-token-%d", i))
		if status != 503 || body != want || h.Get("Retry-After") != "1" {
			t.Fatalf("flood token %d: %d %q %s", i, status, h.Get("Retry-After"), body)
		}
	}
	if n := z.introspections.Load(); n != 1 {
		t.Fatalf("six random tokens cost %d introspections, want 1", n)
	}
}

// startIntrospectingGateway runs the gateway in process (real Fiber
// stack, bundled plugins, embedded store) introspecting z's opaque tokens
// at rate calls a second.
func startIntrospectingGateway(t *testing.T, z *zitadelIssuer, rate float64) string {
	t.Helper()
	m := &Main{
		Listen:         "127.0.0.1:0",
		PluginsDir:     pluginsDir(t, "10-bearer-auth.wasm", "20-plant-rules.wasm"),
		BootstrapToken: oidcBootstrap,
		CacheDir:       sharedCache,
		TokenCacheTTL:  time.Second,
		Logger:         slog.New(slog.DiscardHandler),
		OIDC: OIDC{Issuer: z.url, Audience: "plantgate-api", CallerClaim: "sub", Introspection: true,
			ClientID: gatewayClientID, ClientSecret: gatewayClientSecret, IntrospectionRate: rate},
	}
	if err := m.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return "http://" + m.Addr().String()
}

// TestIntrospectionFlagErrors: serve refuses an incomplete introspection
// configuration, and a secret file it cannot use, before it starts; the
// secret itself has no flag.
func TestIntrospectionFlagErrors(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	empty := filepath.Join(dir, "empty")
	if err := os.WriteFile(empty, []byte("\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(dir, "missing")
	idp := []string{"plantgate", "serve", "--oidc-issuer", "https://idp.example", "--oidc-audience", "api"}
	with := func(base []string, more ...string) []string { return append(append([]string(nil), base...), more...) }
	on := with(idp, "--oidc-introspection", "--oidc-client-id", "gw")
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"plantgate", "serve", "--oidc-introspection"}, "--oidc-introspection needs --oidc-issuer: the provider whose discovery document names the introspection endpoint"},
		{with(idp, "--oidc-introspection"), "--oidc-introspection needs --oidc-client-id: the gateway's client at the provider"},
		{on, "--oidc-introspection needs --oidc-client-secret-file: the file holding the gateway's client secret"},
		{with(on, "--oidc-client-secret-file", missing), "--oidc-client-secret-file: open " + missing + ": no such file or directory"},
		{with(on, "--oidc-client-secret-file", empty), "--oidc-client-secret-file " + empty + ": empty"},
		{with(on, "--oidc-client-secret-file", empty, "--oidc-introspection-rate", "0"), "--oidc-introspection-rate 0: want more than 0"},
		{with(idp, "--oidc-client-id", "gw"), "--oidc-client-id and --oidc-client-secret-file are for --oidc-introspection, which is off"},
		{with(idp, "--oidc-introspection-require-aud"), "--oidc-introspection-require-aud is for --oidc-introspection, which is off"},
		{with(on, "--oidc-client-secret", "s"), "flag provided but not defined: -oidc-client-secret"},
	}
	for _, c := range cases {
		app := newApp()
		app.Writer, app.ErrWriter = io.Discard, io.Discard
		if err := app.Run(context.Background(), c.args); err == nil || err.Error() != c.want {
			t.Errorf("%v: %v, want %s", c.args, err, c.want)
		}
	}
}

// TestIntrospectionWithoutEndpoint: a provider whose discovery document
// names no introspection endpoint: an error in the log and in the admin
// /readyz detail, opaque tokens 503 50307 (never allowed), the gateway's
// own token unaffected.
func TestIntrospectionWithoutEndpoint(t *testing.T) {
	t.Parallel()
	idp := oidctest.Start(t, oidctest.NewKey(t, "k1", jose.ES256))
	m, base, logs := startOIDCGateway(t, idp, func(m *Main) {
		m.OIDC.Introspection, m.OIDC.ClientID, m.OIDC.ClientSecret = true, gatewayClientID, gatewayClientSecret
	})
	const why = "the identity provider's discovery document names no introspection_endpoint: opaque access tokens are refused (503 50307)"
	admin := "http://" + m.admin.addr.String()
	deadline := time.Now().Add(10 * time.Second)
	for {
		status, body, _ := get(t, admin+"/readyz")
		if status == 200 && strings.Contains(body, `"oidc":"`+why+`"`) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("admin /readyz: %d %s", status, body)
		}
		time.Sleep(50 * time.Millisecond)
	}
	req, _ := http.NewRequest("GET", base+"/plants", nil)
	status, body, h := send(t, req, "opaque-token-without-endpoint")
	if status != 503 || h.Get("Retry-After") != "1" || body != `{"error":50307,"message":"the identity provider could not be asked about the access token now; retry later"}` {
		t.Fatalf("an opaque token: %d %q %s", status, h.Get("Retry-After"), body)
	}
	if got := ask(t, "GET", base+"/plants", oidcBootstrap, ""); got.status != 200 {
		t.Fatalf("the gateway's own token: %+v", got)
	}
	if l := logs.String(); !strings.Contains(l, `level=ERROR msg="the identity provider's discovery document names no http(s) introspection_endpoint`) ||
		strings.Contains(l, "opaque-token-without-endpoint") || strings.Contains(l, gatewayClientSecret) {
		t.Fatalf("log:\n%s", l)
	}
}
