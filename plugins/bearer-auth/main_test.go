package main

import (
	"testing"
	"time"

	"github.com/plantgate/plantgate/sdk"
	"github.com/plantgate/plantgate/sdk/sdktest"
)

var clock = time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)

func setClock(t *testing.T) {
	now = func() time.Time { return clock }
	t.Cleanup(func() { now = time.Now })
}

// tokens fills the fake token store; each token's secret is its key.
func tokens(t *testing.T) {
	store := map[[32]byte]sdk.Token{}
	for secret, tok := range map[string]sdk.Token{
		"writer":   {Name: "ci", Scopes: "plants:read plants:write"},
		"deleter":  {Name: "janitor", Scopes: "plants:delete"},
		"reader":   {Name: "dashboard", Scopes: "plants:read"},
		"revoked":  {Name: "old", Scopes: "plants:write", Revoked: true},
		"expired":  {Name: "temp", Scopes: "plants:write", Expires: clock},
		"expiring": {Name: "soon", Scopes: "plants:write", Expires: clock.Add(time.Millisecond)},
	} {
		tok.Digest = sdktest.Digest(secret)
		store[tok.Digest] = tok
	}
	// A broken store answering for this secret with another token's record.
	store[sdktest.Digest("mismatch")] = sdk.Token{Digest: sdktest.Digest("writer"), Name: "impostor", Scopes: "plants:write"}
	sdktest.SetTokenLookup(t, func(d [32]byte) (sdk.Token, error) {
		if tok, ok := store[d]; ok {
			return tok, nil
		}
		return sdk.Token{}, sdk.ErrTokenNotFound
	})
}

type authorizeCase struct {
	name       string
	method     string // default POST
	path       string // default /plants
	route      string // the operation the host names; "" as from an older host
	credential string
	want       string // sdk.Decision.String()
}

func runAuthorize(t *testing.T, tests []authorizeCase) {
	t.Helper()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r := sdk.Request{Method: tt.method, Path: tt.path, Route: tt.route, Credential: tt.credential}
			if r.Method == "" {
				r.Method, r.Path = "POST", "/plants"
			}
			if got := sdktest.Authorize(r).String(); got != tt.want {
				t.Errorf("got  %s\nwant %s", got, tt.want)
			}
		})
	}
}

func TestAuthorizeDefault(t *testing.T) {
	setClock(t)
	tokens(t)
	sdktest.Configure(t, "")
	runAuthorize(t, []authorizeCase{
		{name: "writer", credential: "writer", want: "allow as ci"},
		{name: "expires later", credential: "expiring", want: "allow as soon"},
		{name: "no credential", credential: "", want: "deny 40150: missing bearer token"},
		{name: "unknown token", credential: "guess", want: "deny 40151: invalid token"},
		{name: "record for another digest", credential: "mismatch", want: "deny 40151: invalid token"},
		{name: "revoked", credential: "revoked", want: "deny 40152: token revoked"},
		{name: "expired at the instant", credential: "expired", want: "deny 40153: token expired"},
		{name: "lacks scope", credential: "reader", want: "deny 40350: token lacks scope plants:write"},
		{name: "unconfigured route", method: "PUT", path: "/plants", credential: "writer", want: "deny 40351: no scope is configured for PUT /plants"},
		{name: "path is exact", path: "/plants/", method: "POST", credential: "writer", want: "deny 40351: no scope is configured for POST /plants/"},
		// Per operation, as the host names it.
		{name: "list needs read", method: "GET", path: "/plants", route: "GET /plants", credential: "reader", want: "allow as dashboard"},
		{name: "get needs read", method: "GET", path: "/plants/7", route: "GET /plants/{id}", credential: "reader", want: "allow as dashboard"},
		{name: "head is a get", method: "HEAD", path: "/plants/7", route: "GET /plants/{id}", credential: "reader", want: "allow as dashboard"},
		{name: "create needs write", method: "POST", path: "/plants", route: "POST /plants", credential: "reader", want: "deny 40350: token lacks scope plants:write"},
		{name: "delete needs delete", method: "DELETE", path: "/plants/7", route: "DELETE /plants/{id}", credential: "writer", want: "deny 40350: token lacks scope plants:delete"},
		{name: "deleter may delete", method: "DELETE", path: "/plants/7", route: "DELETE /plants/{id}", credential: "deleter", want: "allow as janitor"},
		{name: "deleter may not read", method: "GET", path: "/plants/7", route: "GET /plants/{id}", credential: "deleter", want: "deny 40350: token lacks scope plants:read"},
		{name: "route wins over path", method: "GET", path: "/plants", route: "GET /other", credential: "writer", want: "deny 40351: no scope is configured for GET /other"},
		{name: "a path is not a route", method: "GET", path: "/plants/{id}", credential: "reader", want: "deny 40351: no scope is configured for GET /plants/{id}"},
		{name: "invalid before unknown route", method: "DELETE", path: "/x", credential: "guess", want: "deny 40151: invalid token"},
	})
}

func TestAuthorizeStoreDown(t *testing.T) {
	var logged []string
	sdktest.SetLog(t, func(level sdk.Level, msg string) { logged = append(logged, msg) })
	sdktest.SetTokenLookup(t, func([32]byte) (sdk.Token, error) { return sdk.Token{}, sdk.ErrUnavailable })
	runAuthorize(t, []authorizeCase{
		{name: "unavailable", credential: "writer", want: "deny 50350: token store unavailable"},
		{name: "no credential needs no store", credential: "", want: "deny 40150: missing bearer token"},
	})
	t.Cleanup(func() {
		if len(logged) != 1 || logged[0] != "token store unavailable" {
			t.Errorf("logged %q", logged)
		}
	})
}

func TestAuthorizeConfigured(t *testing.T) {
	setClock(t)
	tokens(t)
	sdktest.Configure(t, `{"scopes": {"POST /plants": "plants:admin", "GET /plants": "plants:read"}}`)
	t.Cleanup(func() { sdktest.Configure(t, "") })
	runAuthorize(t, []authorizeCase{
		{name: "writer lacks admin", credential: "writer", want: "deny 40350: token lacks scope plants:admin"},
		{name: "reader may read", method: "GET", path: "/plants", credential: "reader", want: "allow as dashboard"},
		{name: "still unknown", method: "PUT", path: "/plants", credential: "writer", want: "deny 40351: no scope is configured for PUT /plants"},
	})
}

func TestAuthorizeNoRoutes(t *testing.T) {
	setClock(t)
	tokens(t)
	sdktest.Configure(t, `{"scopes": {}}`)
	t.Cleanup(func() { sdktest.Configure(t, "") })
	runAuthorize(t, []authorizeCase{
		{name: "every route denied", credential: "writer", want: "deny 40351: no scope is configured for POST /plants"},
	})
}

func TestConfigErrors(t *testing.T) {
	t.Cleanup(func() { sdktest.Configure(t, "") })
	tests := []struct{ name, config, want string }{
		{"unknown key", `{"scope": {}}`, `bearer-auth config: json: unknown field "scope"`},
		{"not an object", `"x"`, "bearer-auth config: json: cannot unmarshal string into Go value of type struct { Scopes map[string]string \"json:\\\"scopes\\\"\" }"},
		{"trailing data", `{} {}`, "bearer-auth config: data after the config object"},
		{"no space", `{"scopes": {"POST/plants": "plants:write"}}`,
			`bearer-auth config: scopes key "POST/plants" must be a method and a path separated by one space, like "POST /plants"`},
		{"two spaces", `{"scopes": {"POST  /plants": "plants:write"}}`,
			`bearer-auth config: scopes key "POST  /plants" must be a method and a path separated by one space, like "POST /plants"`},
		{"relative path", `{"scopes": {"POST plants": "plants:write"}}`,
			`bearer-auth config: scopes key "POST plants" must be a method and a path separated by one space, like "POST /plants"`},
		{"lower-case method", `{"scopes": {"post /plants": "plants:write"}}`,
			`bearer-auth config: scopes key "post /plants": method must be upper case`},
		{"empty scope", `{"scopes": {"POST /plants": ""}}`,
			`bearer-auth config: scopes["POST /plants"] must be one non-empty scope without spaces, got ""`},
		{"two scopes", `{"scopes": {"POST /plants": "plants:read plants:write"}}`,
			`bearer-auth config: scopes["POST /plants"] must be one non-empty scope without spaces, got "plants:read plants:write"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := sdktest.TryConfigure(tt.config); err == nil || err.Error() != tt.want {
				t.Errorf("TryConfigure(%s) = %v\nwant %s", tt.config, err, tt.want)
			}
		})
	}
}

func TestConfigAccepted(t *testing.T) {
	t.Cleanup(func() { sdktest.Configure(t, "") })
	for _, config := range []string{"", "null", "{}", `{"scopes": null}`, ` {"scopes": {"POST /plants": "plants:write"}} `} {
		if err := sdktest.TryConfigure(config); err != nil {
			t.Errorf("TryConfigure(%q) = %v", config, err)
			continue
		}
		if config == ` {"scopes": {"POST /plants": "plants:write"}} ` {
			if len(routes) != 1 || routes[0] != (route{"POST /plants", "POST", "/plants", "plants:write", "token lacks scope plants:write"}) {
				t.Errorf("TryConfigure(%q): routes %+v", config, routes)
			}
			continue
		}
		if len(routes) != 4 || routes[0] != (route{"DELETE /plants/{id}", "DELETE", "/plants/{id}", "plants:delete", "token lacks scope plants:delete"}) {
			t.Errorf("TryConfigure(%q): routes %+v, want the default", config, routes)
		}
	}
}

func TestPhases(t *testing.T) {
	if got := sdktest.Phases(); got != 1 {
		t.Errorf("phases = %#b, want authorize only", got)
	}
}

// In the wasm build authorize does not allocate on allow (the wasm test in
// package sdk checks it): the compiler proves that sha256.Sum256 neither
// keeps nor writes the credential's bytes and skips the copy. Natively
// crypto/sha256 is assembly, so a credential over 32 bytes is copied once.
func TestAllowAllocations(t *testing.T) {
	const secret = "pg_5J9x2mQvT7cR1nB8kW4zL6yH3dF0sA2eG9uP1oI7" // a realistic length
	sdktest.SetTokens(t, sdk.Token{Digest: sdktest.Digest(secret), Name: "ci", Scopes: "plants:write"})
	sdktest.Configure(t, "")
	r := sdk.Request{Method: "POST", Path: "/plants", Credential: secret}
	if d := authorize(r); !d.Allowed() {
		t.Fatalf("authorize: %v", d)
	}
	if n := testing.AllocsPerRun(1000, func() { authorize(r) }); n > 1 {
		t.Errorf("authorize allocates %v times on allow, want at most 1 natively", n)
	}
}
