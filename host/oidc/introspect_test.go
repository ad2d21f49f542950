package oidc

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"

	"github.com/plantgate/plantgate/host"
	"github.com/plantgate/plantgate/host/oidc/oidctest"
)

// The gateway's client at the provider: a space, ':' and '%' that
// client_secret_basic must form-urlencode (RFC 6749 §2.3.1) to carry.
const (
	gwClient = "plantgate gw"
	gwSecret = "s3cr:et%2F+never-logged"
)

// fakeIntrospection is an RFC 7662 endpoint: it refuses (401) any request
// that is not the gateway's authenticated POST of one token, and answers
// the others with answer(token).
type fakeIntrospection struct {
	answer  func(token string) (status int, contentType, body string)
	calls   atomic.Int64
	release chan struct{} // when set, each call waits for it
	// refusing: the test expects requests to be refused (a wrong secret)
	refusing bool
	wrong    atomic.Value // what was wrong with the last refused request
}

func (f *fakeIntrospection) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.calls.Add(1)
	if f.release != nil {
		<-f.release
	}
	auth := "Basic " + base64.StdEncoding.EncodeToString([]byte(url.QueryEscape(gwClient)+":"+url.QueryEscape(gwSecret)))
	err := r.ParseForm()
	switch {
	case r.Method != http.MethodPost, err != nil, len(r.URL.RawQuery) > 0:
		f.wrong.Store("method, form or query")
	case r.Header.Get("Authorization") != auth:
		f.wrong.Store("client authentication: " + r.Header.Get("Authorization"))
	case r.Header.Get("Content-Type") != "application/x-www-form-urlencoded", r.Header.Get("Accept") != "application/json":
		f.wrong.Store("Content-Type or Accept")
	case len(r.PostForm) != 2 || r.PostForm.Get("token_type_hint") != "access_token" || len(r.PostForm["token"]) != 1:
		f.wrong.Store("form: " + r.PostForm.Encode())
	default:
		status, ct, body := f.answer(r.PostForm.Get("token"))
		w.Header().Set("Content-Type", ct)
		w.WriteHeader(status)
		_, _ = w.Write([]byte(body))
		return
	}
	http.Error(w, `{"error":"invalid_client"}`, http.StatusUnauthorized)
}

// logBuf is a log sink safe for concurrent writes.
type logBuf struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuf) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *logBuf) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// known is the gateway's own store: one token, counted lookups, or err.
type known struct {
	tok     host.Token
	err     error
	lookups atomic.Int64
}

func (k *known) Token(_ context.Context, d [32]byte) (host.Token, error) {
	k.lookups.Add(1)
	switch {
	case k.err != nil:
		return host.Token{}, k.err
	case d == k.tok.Digest:
		return k.tok, nil
	}
	return host.Token{}, host.Errorf(host.ErrTokenNotFound, "token not found")
}

// introspecting is a resolver with introspection against a test provider.
type introspecting struct {
	r     *Resolver
	in    *Introspector
	f     *fakeIntrospection
	idp   *oidctest.Issuer
	store *known
	logs  *logBuf
}

// newIntrospecting starts a provider whose introspection endpoint is f
// (none when f is nil) and a resolver introspecting through it. At the
// end of the test no log line may hold the secret or any opaque token
// (they all start "opaque-").
func newIntrospecting(t testing.TB, f *fakeIntrospection, cfg IntrospectionConfig) *introspecting {
	t.Helper()
	idp := oidctest.Start(t, oidctest.NewKey(t, "k", jose.ES256))
	if f != nil {
		idp.SetIntrospection(f)
	}
	logs := &logBuf{}
	// At debug: the lines the operator may turn on must hold no token either.
	p := fetchedProvider(t, ProviderConfig{Issuer: idp.URL, Logger: slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})), Introspection: true})
	v, err := NewVerifier(p, VerifierConfig{Audience: oidctest.Audience})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.ClientID == "" {
		cfg.ClientID, cfg.ClientSecret = gwClient, gwSecret
	}
	in, err := NewIntrospector(v, cfg)
	if err != nil {
		t.Fatal(err)
	}
	st := &known{tok: host.Token{Name: "ci", Digest: digestOf("pg_gateway-own-token")}}
	r := NewResolver(v, 0)
	r.Introspect(in, st)
	t.Cleanup(func() {
		if l := logs.String(); strings.Contains(l, "never-logged") || strings.Contains(l, "opaque-") || strings.Contains(l, "pg_gateway") {
			t.Errorf("a secret or a token reached the log:\n%s", l)
		}
		if f != nil && !f.refusing {
			if w := f.wrong.Load(); w != nil {
				t.Errorf("the provider refused a request of the gateway: %v", w)
			}
		}
	})
	return &introspecting{r: r, in: in, f: f, idp: idp, store: st, logs: logs}
}

func digestOf(s string) [32]byte { return sha256.Sum256([]byte(s)) }

// activeAnswer is an active answer for sub, edited.
func activeAnswer(idp *oidctest.Issuer, edit func(map[string]any)) string {
	now := time.Now()
	m := map[string]any{"active": true, "iss": idp.URL, "sub": "svc", "aud": []string{"other-api", oidctest.Audience},
		"scope": "plants:read plants:write", "exp": now.Add(10 * time.Minute).Unix(), "iat": now.Unix(), "client_id": "svc-client"}
	if edit != nil {
		edit(m)
	}
	b, _ := json.Marshal(m)
	return string(b)
}

// TestIntrospectionAnswers: each answer of the provider, as a client's
// opaque token meets it: the token the plugins see, not this gateway's
// kind (inactive), a 401 with the JWT's code for an active token that is
// not for this gateway, a 503 50307 for anything that is no answer.
func TestIntrospectionAnswers(t *testing.T) {
	t.Parallel()
	var idp *oidctest.Issuer
	answers := map[string]func() (int, string, string){}
	f := &fakeIntrospection{answer: func(token string) (int, string, string) { return answers[token]() }}
	x := newIntrospecting(t, f, IntrospectionConfig{})
	idp = x.idp
	json200 := func(body string) func() (int, string, string) {
		return func() (int, string, string) { return 200, "application/json; charset=utf-8", body }
	}
	exp := time.Now().Add(10 * time.Minute).Truncate(time.Second)
	short := time.Now().Add(time.Minute).Truncate(time.Second)
	failed := &host.Error{Code: 50307, Message: "the identity provider could not be asked about the access token now; retry later"}
	tests := []struct {
		name   string
		answer func() (int, string, string)
		want   *host.Token // nil: not resolved
		until  time.Time   // zero: now + KeepFor
		err    *host.Error
	}{
		{name: "active", answer: json200(activeAnswer(idp, func(m map[string]any) { m["exp"] = exp.Unix() })),
			want: &host.Token{Name: "oidc:svc", Scopes: []string{"plants:read", "plants:write"}, Expires: exp}},
		{name: "active until a near exp", answer: json200(activeAnswer(idp, func(m map[string]any) { m["exp"] = short.Unix() })),
			want: &host.Token{Name: "oidc:svc", Scopes: []string{"plants:read", "plants:write"}, Expires: short}, until: short},
		{name: "active, only active and sub", answer: json200(`{"active":true,"sub":"svc"}`), want: &host.Token{Name: "oidc:svc"}},
		{name: "aud a string", answer: json200(activeAnswer(idp, func(m map[string]any) { m["aud"] = oidctest.Audience; delete(m, "exp") })),
			want: &host.Token{Name: "oidc:svc", Scopes: []string{"plants:read", "plants:write"}}},
		{name: "scp array", answer: json200(activeAnswer(idp, func(m map[string]any) { delete(m, "scope"); m["scp"] = []string{"plants:read"}; delete(m, "exp") })),
			want: &host.Token{Name: "oidc:svc", Scopes: []string{"plants:read"}}},
		{name: "inactive", answer: json200(`{"active":false}`)},
		{name: "expired", answer: json200(activeAnswer(idp, func(m map[string]any) { m["exp"] = time.Now().Add(-time.Minute).Unix() })), err: errExpired},
		{name: "not yet valid", answer: json200(activeAnswer(idp, func(m map[string]any) { m["nbf"] = time.Now().Add(time.Minute).Unix() })), err: errNotYet},
		{name: "another issuer", answer: json200(activeAnswer(idp, func(m map[string]any) { m["iss"] = "https://elsewhere.example" })), err: errIssuer},
		{name: "another audience", answer: json200(activeAnswer(idp, func(m map[string]any) { m["aud"] = []string{"other-api"} })), err: errAudience},
		{name: "no caller", answer: json200(activeAnswer(idp, func(m map[string]any) { delete(m, "sub") })), err: errCaller},
		{name: "bad scope", answer: json200(activeAnswer(idp, func(m map[string]any) { m["scope"] = "plants:read \"x\"" })), err: errScopes},
		// A refresh (or ID) token is introspectable too, and providers
		// answer active for it whatever token_type_hint says: Keycloak
		// (typ), Hydra (token_use), RFC 7662's token_type. It is no
		// bearer credential.
		{name: "keycloak access token", answer: json200(`{"active":true,"sub":"svc","typ":"Bearer","token_type":"Bearer"}`), want: &host.Token{Name: "oidc:svc"}},
		{name: "hydra access token", answer: json200(`{"active":true,"sub":"svc","token_use":"access_token","token_type":"bearer"}`), want: &host.Token{Name: "oidc:svc"}},
		{name: "keycloak refresh token", answer: json200(`{"active":true,"sub":"svc","typ":"Refresh"}`), err: errNotAccess},
		{name: "keycloak offline token", answer: json200(`{"active":true,"sub":"svc","typ":"Offline"}`), err: errNotAccess},
		{name: "keycloak ID token", answer: json200(`{"active":true,"sub":"svc","typ":"ID"}`), err: errNotAccess},
		{name: "hydra refresh token", answer: json200(`{"active":true,"sub":"svc","token_use":"refresh_token"}`), err: errNotAccess},
		{name: "token type refresh", answer: json200(`{"active":true,"sub":"svc","token_type":"refresh_token"}`), err: errNotAccess},
		{name: "DPoP-bound token", answer: json200(`{"active":true,"sub":"svc","token_type":"DPoP"}`), err: errNotAccess},
		{name: "certificate-bound token", answer: json200(`{"active":true,"sub":"svc","token_type":"Bearer","cnf":{"x5t#S256":"bwcK0esc3ACC3DB2Y5_lESsXE8o9ltc05O89jdN-dg2"}}`), err: errNotAccess},
		{name: "no active", answer: json200(`{"sub":"svc"}`), err: failed},
		{name: "active a string", answer: json200(`{"active":"true","sub":"svc"}`), err: failed},
		{name: "not JSON", answer: json200(`active=true`), err: failed},
		{name: "HTML", answer: func() (int, string, string) { return 200, "text/html", `{"active":true,"sub":"svc"}` }, err: failed},
		{name: "5xx", answer: func() (int, string, string) { return 502, "application/json", `{"active":true,"sub":"svc"}` }, err: failed},
		{name: "redirect", answer: func() (int, string, string) { return 307, "application/json", "" }, err: failed},
		{name: "oversized", answer: json200(`{"active":true,"sub":"svc","pad":"` + strings.Repeat("x", 64<<10) + `"}`), err: failed},
		{name: "active after failures", answer: json200(`{"active":true,"sub":"svc"}`), want: &host.Token{Name: "oidc:svc"}},
	}
	for i, tt := range tests {
		token := "opaque-" + strings.ReplaceAll(tt.name, " ", "-")
		answers[token] = tt.answer
		tests[i].name = token
	}
	for _, tt := range tests {
		before := time.Now()
		tok, until, ok, err := x.r.Resolve(context.Background(), tt.name)
		switch {
		case tt.err != nil:
			if e, isHost := err.(*host.Error); !isHost || *e != *tt.err || ok {
				t.Errorf("%s: %+v ok %v err %v, want %v", tt.name, tok, ok, err, tt.err)
			}
		case tt.want == nil:
			if ok || err != nil {
				t.Errorf("%s: %+v ok %v err %v, want not resolved", tt.name, tok, ok, err)
			}
		default:
			want := *tt.want
			want.Digest = digestOf(tt.name)
			wantUntil := tt.until
			if err != nil || !ok || tok.Name != want.Name || !slices.Equal(tok.Scopes, want.Scopes) || !tok.Expires.Equal(want.Expires) || tok.Digest != want.Digest {
				t.Errorf("%s: %+v ok %v err %v, want %+v", tt.name, tok, ok, err, want)
			} else if wantUntil.IsZero() && (until.Before(before.Add(KeepFor)) || until.After(time.Now().Add(KeepFor))) || !tt.until.IsZero() && !until.Equal(wantUntil) {
				t.Errorf("%s: kept until %v, want %v", tt.name, until, wantUntil)
			}
		}
	}
	if n := f.calls.Load(); n != int64(len(tests)) {
		t.Errorf("%d calls for %d tokens", n, len(tests))
	}
	got := x.in.Stats()
	if got != [numOutcomes]uint64{OutcomeActive: 8, OutcomeInactive: 1, OutcomeRefused: 13, OutcomeFailed: 7} {
		t.Errorf("outcomes %v", got)
	}
	if l := x.logs.String(); !strings.Contains(l, "token introspection failed") || !strings.Contains(l, "answers again") {
		t.Errorf("the failures and the recovery are not logged:\n%s", l)
	}
}

// TestIntrospectionRequireAudience: with RequireAudience an active answer
// must name the audience: one without aud is refused 401 40106 (kept, as
// every refusal), one with it passes as before; without RequireAudience
// the same answer without aud passes (RFC 7662 makes aud optional).
func TestIntrospectionRequireAudience(t *testing.T) {
	t.Parallel()
	var idp *oidctest.Issuer
	f := &fakeIntrospection{answer: func(token string) (int, string, string) {
		return 200, "application/json", activeAnswer(idp, func(m map[string]any) {
			if token == "opaque-no-aud" {
				delete(m, "aud")
			}
		})
	}}
	for _, require := range []bool{false, true} {
		x := newIntrospecting(t, f, IntrospectionConfig{RequireAudience: require})
		idp = x.idp
		tok, _, ok, err := x.r.Resolve(context.Background(), "opaque-no-aud")
		switch {
		case !require && (!ok || err != nil || tok.Name != "oidc:svc"):
			t.Errorf("aud optional, an answer without aud: %+v ok %v err %v, want oidc:svc", tok, ok, err)
		case require:
			if e, isHost := err.(*host.Error); !isHost || *e != *errNoAudience || ok {
				t.Errorf("aud required, an answer without aud: ok %v err %v, want %v", ok, err, errNoAudience)
			}
		}
		if tok, _, ok, err := x.r.Resolve(context.Background(), "opaque-with-aud"); !ok || err != nil || tok.Name != "oidc:svc" {
			t.Errorf("require %v, an answer with the audience: %+v ok %v err %v", require, tok, ok, err)
		}
	}
}
