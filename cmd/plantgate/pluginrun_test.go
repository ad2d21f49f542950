package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/plantgate/plantgate/host/wasm/wasmtest"
)

// startPluginRun runs `plantgate plugin run` on testdata/abi/loop.wasm (its
// validate export never returns) with interruption off and timeout_ms.
func startPluginRun(t *testing.T, timeoutMS string) *gateway {
	t.Helper()
	dir := t.TempDir()
	wasmFile := filepath.Join(dir, "10-loop.wasm")
	if err := os.WriteFile(wasmFile, fixtureFile(t, "loop.wasm"), 0o644); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(dir, "10-loop.json"), `{"limits":{"timeout_ms":`+timeoutMS+`,"interrupt":false}}`)
	input := writeFile(t, filepath.Join(dir, "in.json"), `{"id":1,"name":"Fern"}`)
	cmd := exec.Command(buildBinary(t), "plugin", "run", wasmFile, "--phase", "validate", "--input", input)
	g := &gateway{cmd: cmd, done: make(chan error, 1), stderr: &syncBuffer{}}
	cmd.Stderr = g.stderr
	stdout := &syncBuffer{}
	cmd.Stdout = stdout
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { g.done <- cmd.Wait() }()
	t.Cleanup(func() { cmd.Process.Kill() })
	g.stdout = stdout
	return g
}

// TestPluginRunNeverReturns: a guest that never returns, with interruption
// off, cannot hang `plugin run`: it answers the fault the gateway would
// (exit 3) at its deadline, and SIGTERM ends it during a call (exit 1),
// with a message saying why either way.
func TestPluginRunNeverReturns(t *testing.T) {
	t.Parallel()
	t.Run("deadline", func(t *testing.T) {
		t.Parallel()
		g := startPluginRun(t, "300")
		code := g.exit(t, 30*time.Second)
		if want := `{"decision":"fault","status":500,"error":50001,"message":"policy plugin failed; request denied"}` + "\n"; code != exitFault || g.stdout.String() != want {
			t.Fatalf("exit %d, stdout %q; want %d, %q\n%s", code, g.stdout, exitFault, want, g.stderr)
		}
		if !strings.Contains(g.stderr.String(), "ran past its deadline") {
			t.Fatalf("no reason on standard error:\n%s", g.stderr)
		}
	})
	t.Run("SIGTERM", func(t *testing.T) {
		t.Parallel()
		g := startPluginRun(t, "60000")
		waitFor(t, g, `msg="calling the plugin"`)
		if err := g.cmd.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		code := g.exit(t, 30*time.Second)
		want := "plantgate: interrupted during plugin loop's validate call, which cannot be stopped (limits.interrupt is off)\n"
		if code != 1 || g.stdout.String() != "" || !strings.HasSuffix(g.stderr.String(), want) {
			t.Fatalf("exit %d, stdout %q; want exit 1 and %q on stderr:\n%s", code, g.stdout, want, g.stderr)
		}
	})
}

// buildFixturePlugin builds the Go fixture plugin testdata/goplugins/pkg
// into a directory of its own as file, beside the sidecar given ("" for
// none), and returns the module's path.
func buildFixturePlugin(t *testing.T, pkg, file, sidecar string) string {
	t.Helper()
	dir := t.TempDir()
	wasmFile := filepath.Join(dir, file)
	if err := wasmtest.Build(wasmFile, "./testdata/goplugins/"+pkg); err != nil {
		t.Fatal(err)
	}
	if sidecar != "" {
		writeFile(t, strings.TrimSuffix(wasmFile, ".wasm")+".json", sidecar)
	}
	return wasmFile
}

// TestPluginRunOperation: `plugin run` shows an authorize plugin (the
// operation echo) the route and path id the gateway's resolver names,
// including the id spellings strconv reads (+7, 007, -0) and an id out of
// range, which is the operation without an id.
func TestPluginRunOperation(t *testing.T) {
	t.Parallel()
	echo := buildFixturePlugin(t, "operation", "05-operation.wasm", "")
	for _, c := range []struct{ method, path, want string }{
		{"GET", "/plants/+7", `method=GET path=/plants/+7 route=\"GET /plants/{id}\" id=7 has_id=true`},
		{"DELETE", "/plants/007", `method=DELETE path=/plants/007 route=\"DELETE /plants/{id}\" id=7 has_id=true`},
		{"HEAD", "/plants/-0", `method=HEAD path=/plants/-0 route=\"GET /plants/{id}\" id=0 has_id=true`},
		{"GET", "/plants/9223372036854775808", `method=GET path=/plants/9223372036854775808 route=\"GET /plants/{id}\" id=0 has_id=false`},
		{"HEAD", "/plants", `method=HEAD path=/plants route=\"GET /plants\" id=0 has_id=false`},
	} {
		input := `{"method":"` + c.method + `","path":"` + c.path + `"}`
		out, errOut, code := runCLI(t, input, "plugin", "run", "--cache-dir", sharedCache, echo, "--phase", "authorize", "--input", "-")
		if want := `{"decision":"deny","status":403,"error":40399,"message":"` + c.want + `"}` + "\n"; code != exitDeny || out != want {
			t.Errorf("%s %s: exit %d, stdout %s(stderr %s); want exit %d, %s", c.method, c.path, code, out, errOut, exitDeny, want)
		}
	}
	for _, path := range []string{"/plants/", "/plants/7/", "/PLANTS/7"} {
		input := `{"method":"GET","path":"` + path + `"}`
		want := "plantgate: --input: the gateway would answer 404 or 405 before any plugin runs: GET " + path + " is not an operation (GET or POST /plants, GET or DELETE /plants/{id})\n"
		if out, errOut, code := runCLI(t, input, "plugin", "run", "--cache-dir", sharedCache, echo, "--phase", "authorize", "--input", "-"); code != 1 || out != "" || !strings.HasSuffix(errOut, want) {
			t.Errorf("GET %s: exit %d, stdout %q, stderr %q; want exit 1 and %q", path, code, out, errOut, want)
		}
	}
}

// TestPluginRunContext: `plugin run --phase authorize` shows a real ABI 2
// plugin (testdata/goplugins/context, which denies 40398 naming what it
// sees when X-Echo is "context") the request id, client and headers of its
// input, the headers through the gateway's own filter: only those its
// sidecar lists, in any case, values trimmed as the gateway's parser trims
// them and cut at 1024 bytes. Input no gateway would pass on is refused
// with exit 1 and the reason.
func TestPluginRunContext(t *testing.T) {
	t.Parallel()
	plugin := buildFixturePlugin(t, "context", "30-context.wasm", `{"headers": ["X-Echo", "x-tenant"]}`)
	onlyTenant := writeFile(t, filepath.Join(t.TempDir(), "tenant.json"), `{"headers": ["X-Tenant"]}`)
	deny := func(msg string) string {
		return `{"decision":"deny","status":403,"error":40398,"message":"` + msg + `"}`
	}
	cases := []struct {
		name   string
		input  string
		config string // --config; "" = the sidecar beside the plugin
		out    string
		code   int
		stderr string // a line standard error must hold; "" = no warning at all
	}{
		{"the whole context",
			`{"method":"GET","path":"/plants","credential":"tok","request_id":"req-42","client":"192.0.2.7",
			  "headers":{"x-echo":"context","X-TENANT":"  blue  ","X-Other":"hidden","Authorization":"Bearer tok"}}`, "",
			deny(`rid=req-42 client=192.0.2.7 tenant=\"blue\"/true principal= scopes=\"\"`), exitDeny,
			`level=WARN msg="the plugin is not shown these headers: its sidecar's \"headers\" does not list them" plugin=context headers="Authorization X-Other"`},
		{"an IPv6 client",
			`{"method":"DELETE","path":"/plants/3","client":"2001:db8::7","headers":{"X-Echo":"context"}}`, "",
			deny(`rid= client=2001:db8::7 tenant=\"\"/false principal= scopes=\"\"`), exitDeny, ""},
		{"an IPv4-mapped client is shown as IPv4, as the gateway shows it",
			`{"method":"GET","path":"/plants","client":"::ffff:192.0.2.7","headers":{"X-Echo":"context"}}`, "",
			deny(`rid= client=192.0.2.7 tenant=\"\"/false principal= scopes=\"\"`), exitDeny, ""},
		{"a value cut at 1024 bytes",
			`{"method":"GET","path":"/plants","headers":{"X-Echo":"length","X-Tenant":"` + strings.Repeat("t", 2000) + `"}}`, "",
			deny(`tenant_len=1024`), exitDeny, ""},
		{"a value of 1024 bytes whole",
			`{"method":"GET","path":"/plants","headers":{"X-Echo":"length","X-Tenant":"` + strings.Repeat("t", 1024) + `"}}`, "",
			deny(`tenant_len=1024`), exitDeny, ""},
		{"a value of 1023 bytes whole",
			`{"method":"GET","path":"/plants","headers":{"X-Echo":"length","X-Tenant":"` + strings.Repeat("t", 1023) + `"}}`, "",
			deny(`tenant_len=1023`), exitDeny, ""},
		{"an empty value is a header all the same",
			`{"method":"GET","path":"/plants","headers":{"X-Echo":"context","X-Tenant":""}}`, "",
			deny(`rid= client= tenant=\"\"/true principal= scopes=\"\"`), exitDeny, ""},
		{"no context",
			`{"method":"POST","path":"/plants"}`, "",
			`{"decision":"allow"}`, 0, ""},
		{"a header the sidecar does not list is not shown",
			`{"method":"GET","path":"/plants","headers":{"X-Echo":"context","X-Tenant":"blue"}}`, onlyTenant,
			`{"decision":"allow"}`, 0,
			`level=WARN msg="the plugin is not shown these headers: its sidecar's \"headers\" does not list them" plugin=context headers=X-Echo`},
	}
	for _, c := range cases {
		args := []string{"plugin", "run", "--cache-dir", sharedCache, plugin, "--phase", "authorize", "--input", "-"}
		if c.config != "" {
			args = append(args, "--config", c.config)
		}
		out, errOut, code := runCLI(t, c.input, args...)
		if code != c.code || out != c.out+"\n" {
			t.Errorf("%s: exit %d, stdout %s(stderr %s); want exit %d, %s", c.name, code, out, errOut, c.code, c.out)
		}
		if warned := strings.Contains(errOut, "level=WARN"); c.stderr == "" && warned || c.stderr != "" && !strings.Contains(errOut, c.stderr) {
			t.Errorf("%s: stderr %s\nwant it to hold %q", c.name, errOut, c.stderr)
		}
	}

	// Input no gateway would pass on, and misspelt keys: exit 1, the reason.
	unknownKey := `plantgate: --input: want {"method","path","credential","request_id","client","headers","caller"}: json: unknown field `
	for _, c := range []struct{ input, want string }{
		{`{"method":"GET","path":"/plants","header":{"X-Echo":"context"}}`, unknownKey + `"header"` + "\n"},
		{`{"method":"GET","path":"/plants","requestId":"r"}`, unknownKey + `"requestId"` + "\n"},
		{`{"method":"GET","path":"/plants","headers":{"X-Tenant":1}}`,
			`plantgate: --input: want {"method","path","credential","request_id","client","headers","caller"}: json: cannot unmarshal number into Go struct field authorizeInput.headers of type string` + "\n"},
		{`{"method":"GET","path":"/plants","client":"192.0.2.300"}`,
			`plantgate: --input: "client" "192.0.2.300" is not an IP address: want one such as "192.0.2.7" or "2001:db8::7"` + "\n"},
		{`{"method":"GET","path":"/plants","client":"192.0.2.7:8080"}`,
			`plantgate: --input: "client" "192.0.2.7:8080" is not an IP address: want one such as "192.0.2.7" or "2001:db8::7"` + "\n"},
		{`{"method":"GET","path":"/plants","client":"fe80::1%eth0"}`,
			`plantgate: --input: "client" "fe80::1%eth0": an IP address with a zone is never a client's address; leave out "%eth0"` + "\n"},
		{`{"method":"GET","path":"/plants","request_id":"req 42"}`,
			`plantgate: --input: "request_id" "req 42": the gateway replaces an X-Request-ID that is not 1–128 letters, digits and ._:- with its own, so no plugin is shown it` + "\n"},
		{`{"method":"GET","path":"/plants","headers":{"X Tenant":"blue"}}`, `plantgate: --input: "headers": "X Tenant" is not a header name` + "\n"},
		{`{"method":"GET","path":"/plants","headers":{"":"blue"}}`, `plantgate: --input: "headers": "" is not a header name` + "\n"},
		{`{"method":"GET","path":"/plants","headers":{"X-Tenant":"blue\r\nX-Echo: context"}}`,
			`plantgate: --input: "headers": X-Tenant's value "blue\r\nX-Echo: context" holds a control character (CR, LF, NUL…), which no request header can` + "\n"},
		{`{"method":"GET","path":"/plants","headers":{"Content-Length":"ten"}}`,
			`plantgate: --input: "headers": the gateway would refuse the request (400): error when reading request headers: cannot parse content-length: unexpected first char found: expecting 0-9` + "\n"},
		{`{"method":"GET","path":"/plants","headers":{"X-Tenant":"blue","x-tenant":"red"}}`,
			`plantgate: --input: "headers": "X-Tenant" and "x-tenant" are one header (names are case-insensitive): give it once` + "\n"},
	} {
		out, errOut, code := runCLI(t, c.input, "plugin", "run", "--cache-dir", sharedCache, plugin, "--phase", "authorize", "--input", "-")
		if code != 1 || out != "" || !strings.HasSuffix(errOut, c.want) {
			t.Errorf("%s: exit %d, stdout %q, stderr %q; want exit 1 and %q", c.input, code, out, errOut, c.want)
		}
	}

	// A module built for ABI 1 is shown no context: the run says so.
	root, err := wasmtest.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	abi1 := filepath.Join(root, "testdata", "abi1", "10-bearer-auth.wasm")
	out, errOut, code := runCLI(t, `{"method":"GET","path":"/plants","client":"192.0.2.7"}`, "plugin", "run", "--cache-dir", sharedCache, abi1, "--phase", "authorize", "--input", "-")
	if want := `{"decision":"deny","status":401,"error":40150,"message":"missing bearer token"}` + "\n"; code != exitDeny || out != want ||
		!strings.Contains(errOut, `level=WARN msg="the plugin speaks ABI 1: it is shown no request context (request_id, client, headers)" plugin=bearer-auth`) {
		t.Errorf("ABI 1: exit %d, stdout %s, stderr %s; want exit %d, %s and a warning", code, out, errOut, exitDeny, want)
	}
}
