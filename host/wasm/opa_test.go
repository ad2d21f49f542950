package wasm

import (
	"context"
	"net/netip"
	"strings"
	"testing"

	"github.com/plantgate/plantgate/host"
)

// exchange is a request context with a request id, a client, headers and,
// when caller is not empty, the principal a token lookup established.
func opaExchange(headers mapHeader, caller string, scopes ...string) context.Context {
	ctx, x := host.NewExchange(context.Background())
	x.RequestID, x.Client, x.Header = "r1", netip.MustParseAddr("192.0.2.7"), headers
	if caller != "" {
		x.SetPrincipal(host.Token{Name: caller, Scopes: scopes})
	}
	return ctx
}

var (
	getPlants  = host.AuthorizeRequest{Method: "GET", Path: "/plants", Route: "GET /plants"}
	postPlants = host.AuthorizeRequest{Method: "POST", Path: "/plants", Route: "POST /plants", Credential: "secret-token"}
)

// TestOPARules: a Rego policy serves both phases behind the same calls as
// any plugin, with the sidecar's config as data and sprintf from the host.
func TestOPARules(t *testing.T) {
	t.Parallel()
	p := load(t, needRego(t, "rules"), []byte(`{"banned_tags": ["weed", "ivy"]}`), Limits{}, Options{})
	if got := strings.Join(p.Info().Phases, ","); got != "authorize,validate" {
		t.Fatalf("phases = %s", got)
	}
	cases := []struct {
		name string
		ctx  context.Context
		r    host.AuthorizeRequest
		want *host.Error
	}{
		{"read", opaExchange(nil, ""), getPlants, nil},
		{"write without caller", opaExchange(nil, ""), postPlants, &host.Error{Code: 40351, Message: "POST POST /plants needs plants:write"}},
		{"write with read scope", opaExchange(nil, "ci", "plants:read"), postPlants, &host.Error{Code: 40351, Message: "POST POST /plants needs plants:write"}},
		{"write with write scope", opaExchange(nil, "ci", "plants:read", "plants:write"), postPlants, nil},
		{"no exchange", context.Background(), getPlants, nil},
	}
	for _, c := range cases {
		principal, err := p.Authorize(c.ctx, c.r)
		if principal != "" {
			t.Errorf("%s: principal %q", c.name, principal)
		}
		t.Run(c.name, func(t *testing.T) { wantError(t, err, c.want) })
	}
	for tag, want := range map[string]*host.Error{
		"weed":     {Code: 40050, Message: `tag "weed" is banned`},
		"ivy":      {Code: 40050, Message: `tag "ivy" is banned`},
		"tropical": nil,
	} {
		err := p.Validate(opaExchange(nil, "ci"), host.Plant{ID: 7, Name: "Monstera", Tag: tag, HasTag: true}, "ci")
		t.Run("validate "+tag, func(t *testing.T) { wantError(t, err, want) })
	}
	wantError(t, p.Validate(context.Background(), host.Plant{ID: 7, Name: "Monstera"}, ""), nil)
	if s := p.Stats(); s.Discarded != 0 || s.Calls != 9 {
		t.Errorf("stats %+v, want 9 calls and nothing discarded", s)
	}
}

// TestOPADecisions: every value an entrypoint can evaluate to, and what
// the client gets for it, in both phases.
func TestOPADecisions(t *testing.T) {
	t.Parallel()
	p := load(t, needRego(t, "echo"), nil, Limits{}, Options{headers: []string{"X-Decision"}})
	bad := &host.Error{Code: host.ErrPluginBadDecision, Message: msgBadDecision}
	authorize := []struct {
		value string // "" sends no header: the rule is undefined
		want  *host.Error
	}{
		{"true", nil},
		{`{"allow": true}`, nil},
		{`{"allow": true, "message": "ignored"}`, nil},
		{"", &host.Error{Code: 40150}},
		{"false", &host.Error{Code: 40150}},
		{`{"allow": false}`, &host.Error{Code: 40150}},
		{`{"allow": false, "message": "who are you"}`, &host.Error{Code: 40150, Message: "who are you"}},
		{`{"allow": false, "code": 40399, "message": "no"}`, &host.Error{Code: 40399, Message: "no"}},
		{`{"allow": false, "code": 42950, "message": "slow down"}`, &host.Error{Code: 42950, Message: "slow down"}},
		{`{"allow": false, "code": 40050}`, bad}, // 400 is validate's
		{`{"allow": false, "code": 40349}`, bad}, // the host's range
		{`{"allow": false, "code": 50001}`, bad}, // a host error
		{`{"allow": false, "code": 12345}`, bad},
		{`{"allow": false, "code": "40399"}`, bad},
		{`{"allow": false, "code": 40399.5}`, bad},
		{`{"allow": false, "message": 5}`, bad},
		{`{"allow": true, "code": 40399}`, bad},
		{`{"allow": true, "reason": "x"}`, bad},
		{`{"allow": "true"}`, bad},
		{`{"code": 40399}`, bad},
		{`{}`, bad},
		{`"allow"`, bad},
		{`1`, bad},
		{`null`, bad},
		{`[true]`, bad},
		// A header value is cut at 1024 bytes: this one is no JSON then.
		{`{"allow": false, "message": "` + strings.Repeat("x", 1025) + `"}`, &host.Error{Code: 40150}},
	}
	for _, c := range authorize {
		h := mapHeader{}
		if c.value != "" {
			h["X-Decision"] = c.value
		}
		_, err := p.Authorize(opaExchange(h, ""), getPlants)
		t.Run("authorize "+c.value, func(t *testing.T) { wantError(t, err, c.want) })
	}
	validate := []struct {
		value string
		want  *host.Error
	}{
		{"true", nil},
		{"false", &host.Error{Code: 40050}},
		{`{"allow": false, "code": 40099, "message": "bad plant"}`, &host.Error{Code: 40099, Message: "bad plant"}},
		{`{"allow": false, "code": 40150}`, bad}, // 401 is authorize's
		{`not json`, &host.Error{Code: 40050}},   // json.unmarshal fails: undefined
		{`{"allow": false, "message": "` + strings.Repeat("é", 512) + `"}`, &host.Error{Code: 40050, Message: strings.Repeat("é", 512)}},
		{`{"allow": false, "message": "` + strings.Repeat("x", 1025) + `"}`, bad}, // over abi.MaxText
	}
	for _, c := range validate {
		err := p.Validate(context.Background(), host.Plant{ID: 1, Name: c.value}, "")
		t.Run("validate "+c.value, func(t *testing.T) { wantError(t, err, c.want) })
	}
}
