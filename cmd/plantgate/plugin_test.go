package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/plantgate/plantgate/host/wasm/wasmtest"
)

// runCLI runs the plantgate command line in process and returns its
// standard output, standard error and exit code as main would set it.
func runCLI(t testing.TB, stdin string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	var out, errOut bytes.Buffer
	app := newApp()
	app.Writer, app.ErrWriter, app.Reader = &out, &errOut, strings.NewReader(stdin)
	err := app.Run(context.Background(), append([]string{"plantgate"}, args...))
	if err != nil {
		code = 1
		var ee *exitError
		if errors.As(err, &ee) {
			code = ee.code
		}
		if ee == nil || ee.err != nil {
			errOut.WriteString("plantgate: " + err.Error() + "\n")
		}
	}
	return out.String(), errOut.String(), code
}

func writeFile(t testing.TB, path, content string) string {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestPluginCheck(t *testing.T) {
	t.Parallel()
	dir := pluginsDir(t, "20-plant-rules.wasm")
	rules := filepath.Join(dir, "20-plant-rules.wasm")

	out, errOut, code := runCLI(t, "", "plugin", "check", "--cache-dir", sharedCache, rules)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	for _, want := range []string{
		`(?m)^plugin +plant-rules$`, `(?m)^file +20-plant-rules\.wasm$`, `(?m)^phases +validate$`, `(?m)^abi version +2 \(request context and principal, KV, response headers\)$`,
		`(?m)^size +\d+ bytes$`, `(?m)^sidecar +none$`, `(?m)^compile time +\S+$`,
		`(?m)^instantiate time +\S+ per instance \(\d+ instances\)$`, `(?m)^ok +serve would load this plugin$`,
	} {
		if !regexp.MustCompile(want).MatchString(out) {
			t.Errorf("output does not match %s:\n%s", want, out)
		}
	}

	// A module built for ABI 1 (testdata/abi1) still loads, and says so.
	root, err := wasmtest.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	abi1 := filepath.Join(root, "testdata", "abi1", "20-plant-rules.wasm")
	if out, errOut, code := runCLI(t, "", "plugin", "check", "--cache-dir", sharedCache, abi1); code != 0 ||
		!regexp.MustCompile(`(?m)^abi version +1 \(request line, operation and credential; no request context, KV or response headers\)$`).MatchString(out) {
		t.Fatalf("ABI 1 fixture: exit %d %s\n%s", code, errOut, out)
	}

	// The sidecar beside the file is read, as serve reads it.
	writeFile(t, filepath.Join(dir, "20-plant-rules.json"), `{"config": {"name_max": 10}, "limits": {"instances": 2}}`)
	if out, _, code := runCLI(t, "", "plugin", "check", "--cache-dir", sharedCache, rules); code != 0 || !strings.Contains(out, "instances=2") || !strings.Contains(out, "20-plant-rules.json") {
		t.Fatalf("with a sidecar: exit %d\n%s", code, out)
	}

	// Each refusal serve would make, with its exact reason.
	badConfig := writeFile(t, filepath.Join(t.TempDir(), "bad.json"), `{"config": {"name_max": "ten"}}`)
	misnamed := filepath.Join(t.TempDir(), "rules.wasm")
	data, _ := os.ReadFile(rules)
	writeFile(t, misnamed, string(data))
	notWasm := writeFile(t, filepath.Join(t.TempDir(), "30-x.wasm"), "hello")
	// Declares its config required: refused without one, loaded with one.
	needsConfig := filepath.Join(t.TempDir(), "10-needsconfig.wasm")
	writeFile(t, needsConfig, string(fixtureFile(t, "needsconfig.wasm")))
	withConfig := writeFile(t, filepath.Join(t.TempDir(), "given.json"), `{"config": {"a": 1}}`)
	if out, errOut, code := runCLI(t, "", "plugin", "check", "--cache-dir", sharedCache, "--config", withConfig, needsConfig); code != 0 ||
		!regexp.MustCompile(`(?m)^sidecar +given\.json; the plugin requires a config$`).MatchString(out) {
		t.Errorf("required config given: exit %d %s\n%s", code, errOut, out)
	}
	// Loads, but its plantgate_buffer answers 0: every request would fault.
	badBuffer := filepath.Join(t.TempDir(), "10-badbuffer.wasm")
	writeFile(t, badBuffer, string(fixtureFile(t, "badbuffer.wasm")))
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{rules, "--config", badConfig}, "plantgate: plugin 20-plant-rules.wasm: config refused: "},
		{[]string{misnamed}, "plantgate: plugin rules.wasm: file name must be NN-name.wasm (or NN-name.shadow.wasm, NN-name.canary.wasm): two digits, a dash, then a-z, 0-9 or -\n"},
		{[]string{badBuffer}, "plantgate: plugin 10-badbuffer.wasm: plantgate_buffer(256) returned 0xffff0000, outside memory: serve would load it, but every request would fail closed (docs/abi.md#the-request-buffer)\n"},
		{[]string{needsConfig}, "plantgate: plugin 10-needsconfig.wasm: requires a config (plantgate_config_required answered 1) and has none: give its sidecar 10-needsconfig.json a \"config\" (docs/abi.md#config)\n"},
		// The hint after the colon is each language's (host/wasm/mistakes.go).
		{[]string{notWasm}, "plantgate: plugin 30-x.wasm: not a WebAssembly module (no \"\\0asm\" header): "},
		{[]string{rules, "--config", writeFile(t, filepath.Join(t.TempDir(), "x.json"), `{"limits": {"memory_mib": 0}}`)},
			"plantgate: plugin x.json: line 1, column 27: \"limits.memory_mib\" must be an integer from 1 to 4096, got 0\n"},
	} {
		out, errOut, code := runCLI(t, "", append([]string{"plugin", "check", "--cache-dir", sharedCache}, c.args...)...)
		if code != 1 || out != "" || !strings.HasPrefix(errOut, c.want) {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want exit 1 and %q", c.args, code, out, errOut, c.want)
		}
	}
}

func TestPluginRun(t *testing.T) {
	t.Parallel()
	dir := pluginsDir(t, "10-bearer-auth.wasm", "20-plant-rules.wasm")
	auth, rules := filepath.Join(dir, "10-bearer-auth.wasm"), filepath.Join(dir, "20-plant-rules.wasm")
	tmp := t.TempDir()
	tokens := writeFile(t, filepath.Join(tmp, "tokens.json"),
		`[{"token": "tok-writer-0123456789", "name": "ci", "scopes": ["plants:write"]},
		  {"token": "tok-reader-0123456789", "name": "ro", "scopes": ["plants:read"]},
		  {"token": "tok-gone-0123456789", "name": "old", "scopes": ["plants:write"], "revoked": true}]`)
	in := func(s string) string {
		return writeFile(t, filepath.Join(t.TempDir(), "in.json"), s)
	}
	cases := []struct {
		name  string
		args  []string
		stdin string
		out   string
		code  int
	}{
		{"allow with a principal", []string{auth, "--phase", "authorize", "--tokens", tokens, "--input", in(`{"method":"POST","path":"/plants","credential":"tok-writer-0123456789"}`)}, "",
			`{"decision":"allow","principal":"ci"}`, 0},
		{"revoked token", []string{auth, "--phase", "authorize", "--tokens", tokens, "--input", "-"}, `{"method":"POST","path":"/plants","credential":"tok-gone-0123456789"}`,
			`{"decision":"deny","status":401,"error":40152,"message":"token revoked"}`, exitDeny},
		// The operation is derived from method and path as the gateway's
		// router does: bearer-auth keys its scopes on it.
		{"read by id", []string{auth, "--phase", "authorize", "--tokens", tokens, "--input", in(`{"method":"GET","path":"/plants/3","credential":"tok-reader-0123456789"}`)}, "",
			`{"decision":"allow","principal":"ro"}`, 0},
		{"HEAD names the GET route", []string{auth, "--phase", "authorize", "--tokens", tokens, "--input", in(`{"method":"HEAD","path":"/plants","credential":"tok-reader-0123456789"}`)}, "",
			`{"decision":"allow","principal":"ro"}`, 0},
		{"delete without its scope", []string{auth, "--phase", "authorize", "--tokens", tokens, "--input", in(`{"method":"DELETE","path":"/plants/3","credential":"tok-writer-0123456789"}`)}, "",
			`{"decision":"deny","status":403,"error":40350,"message":"token lacks scope plants:delete"}`, exitDeny},
		{"no token source: unavailable", []string{auth, "--phase", "authorize", "--input", in(`{"method":"POST","path":"/plants","credential":"tok-writer-0123456789"}`)}, "",
			`{"decision":"deny","status":503,"error":50350,"message":"token store unavailable"}`, exitDeny},
		{"validate allow", []string{rules, "--phase", "validate", "--input", in(`{"id":1,"name":"Fern","principal":"ci"}`)}, "",
			`{"decision":"allow"}`, 0},
		{"validate deny", []string{rules, "--phase", "validate", "--input", in(`{"id":1,"name":"  "}`)}, "",
			`{"decision":"deny","status":400,"error":40051,"message":"name must be 1–100 characters after trimming, got 0"}`, exitDeny},
	}
	for _, c := range cases {
		out, errOut, code := runCLI(t, c.stdin, append([]string{"plugin", "run", "--cache-dir", sharedCache}, c.args...)...)
		if code != c.code || strings.TrimSpace(out) != c.out {
			t.Errorf("%s: exit %d, output %s (stderr %s); want exit %d, %s", c.name, code, out, errOut, c.code, c.out)
		}
	}

	// Input the gateway itself would refuse, and misuse: exit 1 with the reason.
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{rules, "--phase", "validate", "--input", in(`{"id":1,"name":"a","name":"b"}`)}, "plantgate: --input: the gateway would answer 400 before any plugin runs: 40007: "},
		{[]string{rules, "--phase", "authorize", "--input", in(`{}`)}, "plantgate: plugin 20-plant-rules.wasm does not serve the authorize phase (it serves: validate)"},
		{[]string{auth, "--phase", "authorize", "--input", in(`{"credential": 1}`)}, "plantgate: --input: want {\"method\",\"path\",\"credential\",\"request_id\",\"client\",\"headers\",\"caller\"}: json: cannot unmarshal number"},
		{[]string{auth, "--phase", "decide", "--input", in(`{}`)}, `plantgate: --phase "decide": want authorize or validate`},
		{[]string{auth, "--phase", "authorize", "--input", in(`{"method":"PUT","path":"/plants/3","credential":"x"}`)}, "plantgate: --input: the gateway would answer 404 or 405 before any plugin runs: PUT /plants/3 is not an operation (GET or POST /plants, GET or DELETE /plants/{id})\n"},
	} {
		out, errOut, code := runCLI(t, "", append([]string{"plugin", "run", "--cache-dir", sharedCache}, c.args...)...)
		if code != 1 || out != "" || !strings.HasPrefix(errOut, c.want) {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want exit 1 and %q", c.args, code, out, errOut, c.want)
		}
	}
}
