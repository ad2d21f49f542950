package http_test

import (
	"strings"
	"testing"
)

// TestPluginCannotLieAboutPhase: a plugin denies only with the statuses its
// phase may use (abi.PhaseDenies). A validate plugin's 401 or an authorize
// plugin's 400 reaches the client as 500 50002, never as the status it
// claimed, and the log names the plugin, the phase and the code; the
// statuses a phase may use pass through unchanged.
func TestPluginCannotLieAboutPhase(t *testing.T) {
	t.Parallel()
	// 05-: the liar runs before bearer-auth, so its authorize sees any credential.
	g := newGateway(t, gatewayOptions{extra: []string{"05-phaselie.wasm=phaselie.wasm"}})
	invalid := errorBody(50002, "policy plugin returned an invalid decision; request denied")
	cases := []struct {
		name, auth, body string
		status           int
		want, header     string // header: WWW-Authenticate, "" for none
		log              string // a line the log must hold, "" for none
	}{
		{name: "validate denies 401", auth: writerToken, body: `{"id":401,"name":"a"}`, status: 500, want: invalid,
			log: `plugin=phaselie phase=validate code=50002 reason="plantgate_validate denied with 40150, a code the validate phase may not use (400, 403, 429, 503 only: 40050–40099, 40350–40399, 42950–42999, 50350–50399)"`},
		{name: "authorize denies 400", auth: "Liar", body: `{"id":1,"name":"a"}`, status: 500, want: invalid,
			log: `plugin=phaselie phase=authorize code=50002 reason="plantgate_authorize denied with 40050, a code the authorize phase may not use (401, 403, 429, 503 only: 40150–40199, 40350–40399, 42950–42999, 50350–50399)"`},
		{name: "validate denies 400", auth: writerToken, body: `{"id":400,"name":"a"}`, status: 400, want: errorBody(40050, "rule says no")},
		{name: "validate denies 429", auth: writerToken, body: `{"id":429,"name":"a"}`, status: 429, want: errorBody(42951, "quota reached")},
		{name: "authorize denies 429", auth: "Rate", body: `{"id":1,"name":"a"}`, status: 429, want: errorBody(42950, "slow down")},
	}
	for _, c := range cases {
		got := g.do(newPost(c.body, "Bearer "+c.auth, "application/json"))
		if got.status != c.status || got.body != c.want {
			t.Errorf("%s: %d %s, want %d %s", c.name, got.status, got.body, c.status, c.want)
		}
		if h := got.header.Get("WWW-Authenticate"); h != c.header {
			t.Errorf("%s: WWW-Authenticate %q, want %q", c.name, h, c.header)
		}
		if h := got.header.Get("Retry-After"); h != "" {
			t.Errorf("%s: Retry-After %q, want none", c.name, h)
		}
		if c.log != "" && !strings.Contains(g.logText(), c.log) {
			t.Errorf("%s: no log line holds %s\n%s", c.name, c.log, g.logText())
		}
	}
	if s := g.stored("401"); s != "" {
		t.Errorf("a plant denied by a lying plugin was stored: %s", s)
	}
}
