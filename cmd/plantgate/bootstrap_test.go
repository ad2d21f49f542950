package main

import (
	"strings"
	"testing"

	"github.com/plantgate/plantgate/host/redis/redistest"
)

// TestBootstrapRevokedStaysRevoked runs the binary as an operator does
// against a real redis-server: revoking the bootstrap token with
// `plantgate token revoke` survives a restart with the same
// --bootstrap-token (401 revoked, and a WARN on start), and starts with a
// new bootstrap token each time leave exactly one active "bootstrap".
func TestBootstrapRevokedStaysRevoked(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	plugins := pluginsDir(t, "10-bearer-auth.wasm", "20-plant-rules.wasm")
	serve := func(token string) *gateway {
		return startGateway(t, nil, "--redis-url", srv.URL(), "--plugins", plugins, "--bootstrap-token", token)
	}
	const first = "bootstrap-first-0123456789abcdef"

	g := serve(first)
	if status, body := post(t, g.base, first, `{"id":1,"name":"Fern"}`); status != 200 || body != `{"name":"Fern"}` {
		t.Fatalf("create with the bootstrap token: %d %s", status, body)
	}
	if out, errOut, code := plantgateCLI(t, "token", "revoke", "--name", "bootstrap", "--redis-url", srv.URL()); code != 0 || out != "revoked 1 token(s) named \"bootstrap\"\n" {
		t.Fatalf("token revoke: exit %d: %q %q", code, out, errOut)
	}
	g.stop(t)

	g = serve(first)
	if status, body := post(t, g.base, first, `{"id":2,"name":"Ivy"}`); status != 401 || body != `{"error":40152,"message":"token revoked"}` {
		t.Fatalf("revoked bootstrap token after a restart: %d %s\n%s", status, body, g.stderr)
	}
	g.stop(t)
	const warn = `level=WARN msg="the bootstrap token was revoked; not restored: mint another (plantgate token create) or start with a new --bootstrap-token"`
	if !strings.Contains(g.stderr.String(), warn) {
		t.Fatalf("no warning on start:\n%s", g.stderr)
	}

	tokens := []string{"bootstrap-second-0123456789abcdef", "bootstrap-third-0123456789abcdef", "bootstrap-fourth-0123456789abcdef"}
	for i, tok := range tokens {
		g = serve(tok)
		if status, body := post(t, g.base, tok, `{"id":3,"name":"Sage"}`); status != 200 || body != `{"name":"Sage"}` {
			t.Fatalf("create with bootstrap token %d: %d %s", i, status, body)
		}
		if i > 0 {
			if status, body := post(t, g.base, tokens[i-1], `{"id":3,"name":"Sage"}`); status != 401 || body != `{"error":40152,"message":"token revoked"}` {
				t.Fatalf("the previous bootstrap token after a start with a new one: %d %s", status, body)
			}
		}
		g.stop(t)
		wantSuperseded := "superseded=0"
		if i > 0 {
			wantSuperseded = "superseded=1"
		}
		if !strings.Contains(g.stderr.String(), `msg="bootstrap token ensured: the only active token of its name; older ones revoked"`) || !strings.Contains(g.stderr.String(), wantSuperseded) {
			t.Fatalf("start %d: no bootstrap line with %s:\n%s", i, wantSuperseded, g.stderr)
		}
	}

	out, errOut, code := plantgateCLI(t, "token", "list", "--redis-url", srv.URL())
	if code != 0 {
		t.Fatalf("token list: exit %d: %s", code, errOut)
	}
	var states []string
	for line := range strings.SplitSeq(out, "\n") {
		if f := strings.Fields(line); len(f) > 0 && f[0] == "bootstrap" {
			states = append(states, f[len(f)-1])
		}
	}
	if strings.Join(states, " ") != "revoked revoked revoked active" {
		t.Fatalf("bootstrap tokens' states %v, want three revoked and one active:\n%s", states, out)
	}
	for _, tok := range append(tokens, first) {
		if strings.Contains(out, tok) || strings.Contains(g.stderr.String(), tok) {
			t.Fatal("a token shows in the list or the log")
		}
	}
}

// TestTokenCreateRefusesBootstrapName: a token created by hand under the
// bootstrap token's name would be revoked by the next serve start.
func TestTokenCreateRefusesBootstrapName(t *testing.T) {
	t.Parallel()
	_, errOut, code := runCLI(t, "", "token", "create", "--name", "bootstrap", "--redis-url", "redis://127.0.0.1:1")
	if want := "plantgate: the name \"bootstrap\" is reserved for serve's --bootstrap-token: choose another\n"; code != 1 || errOut != want {
		t.Fatalf("exit %d, %q; want 1, %q", code, errOut, want)
	}
}

// TestTokenCreateRefusesBadNames: a token's name reaches every plugin
// message (docs/abi.md bounds them) and the access log, so it is short,
// UTF-8 text without control characters (a newline would forge a log
// line); each refusal is exit 1 with its reason, before any store is asked.
func TestTokenCreateRefusesBadNames(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ name, want string }{
		{strings.Repeat("n", 129), "plantgate: --name is 129 bytes, over the 128 a token name may have\n"},
		{"ci\nlevel=ERROR msg=forged", "plantgate: --name holds the control character U+000A at byte 2: a token name is shown in logs and lists\n"},
		{"bad\xffname", "plantgate: --name is not UTF-8 text\n"},
	} {
		_, errOut, code := runCLI(t, "", "token", "create", "--name", c.name, "--redis-url", "redis://127.0.0.1:1")
		if code != 1 || errOut != c.want {
			t.Errorf("--name %q: exit %d, %q; want 1, %q", c.name, code, errOut, c.want)
		}
	}
}

// TestDottedBootstrapRefusedBeforeTheStore: a serve refused for a
// --bootstrap-token holding a dot under --oidc-issuer exits before it
// touches the store, so the fleet's active bootstrap token in a real
// redis-server is not superseded by a start that never served.
func TestDottedBootstrapRefusedBeforeTheStore(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	plugins := pluginsDir(t, "10-bearer-auth.wasm", "20-plant-rules.wasm")
	const good = "bootstrap-good-0123456789abcdef"
	startGateway(t, nil, "--redis-url", srv.URL(), "--plugins", plugins, "--bootstrap-token", good).stop(t)
	before, errOut, code := plantgateCLI(t, "token", "list", "--redis-url", srv.URL())
	if code != 0 || strings.Count(before, "active") != 1 {
		t.Fatalf("token list before: exit %d: %q %q", code, before, errOut)
	}

	_, errOut, code = plantgateCLI(t, "serve", "--listen", "127.0.0.1:0", "--redis-url", srv.URL(), "--plugins", plugins,
		"--oidc-issuer", "http://127.0.0.1:1", "--oidc-audience", "api", "--bootstrap-token", "bootstrap.with.dots")
	const want = "plantgate: --bootstrap-token holds a dot: with --oidc-issuer such a credential is taken for an access token; choose one without\n"
	if code != 1 || !strings.HasSuffix(errOut, want) {
		t.Fatalf("serve with a dotted bootstrap token: exit %d, stderr:\n%s\nwant it to end %q", code, errOut, want)
	}
	if strings.Contains(errOut, "bootstrap token ensured") {
		t.Errorf("the refused serve ensured its bootstrap token first:\n%s", errOut)
	}
	if after, _, _ := plantgateCLI(t, "token", "list", "--redis-url", srv.URL()); after != before {
		t.Fatalf("the refused serve changed the tokens:\nbefore:\n%s\nafter:\n%s", before, after)
	}
}
