package main

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/plantgate/plantgate/host/wasm/wasmtest"
)

// rateLimit is plugins/rate-limit built once for the package's tests.
var rateLimit struct {
	once sync.Once
	wasm []byte
	err  error
}

// rateLimitModule returns plugins/rate-limit's module, built on first use.
func rateLimitModule(t *testing.T) []byte {
	t.Helper()
	rateLimit.once.Do(func() {
		dir, err := os.MkdirTemp("", "plantgate-rate-limit")
		if err != nil {
			rateLimit.err = err
			return
		}
		defer os.RemoveAll(dir)
		file := filepath.Join(dir, "15-rate-limit.wasm")
		if rateLimit.err = wasmtest.Build(file, "./plugins/rate-limit"); rateLimit.err == nil {
			rateLimit.wasm, rateLimit.err = os.ReadFile(file)
		}
	})
	if rateLimit.err != nil {
		t.Fatal(rateLimit.err)
	}
	return rateLimit.wasm
}

// TestPluginRunCallerAndHeaders: the validate input takes the caller under
// the SDK's name (sdk.Plant.Caller) and refuses a key that is neither the
// plant's nor the run's; each decision line carries the response headers
// the plugin set.
func TestPluginRunCallerAndHeaders(t *testing.T) {
	t.Parallel()
	plugin := buildFixturePlugin(t, "context", "30-context.wasm", `{"headers": ["X-Echo"]}`)
	for _, c := range []struct{ phase, input, out string }{
		{"validate", `{"id":1,"name":"echo","caller":{"name":"ci","scopes":["plants:write"]}}`,
			`{"decision":"deny","status":403,"error":40398,"message":"caller=ci scopes=\"plants:write\" can_write=true"}`},
		{"validate", `{"id":1,"name":"echo","principal":"ci"}`,
			`{"decision":"deny","status":403,"error":40398,"message":"caller= scopes=\"\" can_write=false"}`},
		{"validate", `{"id":1,"name":"echo","allowed_as":"ci"}`,
			`{"decision":"deny","status":403,"error":40398,"message":"caller= scopes=\"\" can_write=false"}`},
		{"authorize", `{"method":"GET","path":"/plants","headers":{"X-Echo":"context"},"caller":{"name":"ci","scopes":["plants:read"]}}`,
			`{"decision":"deny","status":403,"error":40398,"message":"rid= client= tenant=\"\"/false principal=ci scopes=\"plants:read\""}`},
		{"authorize", `{"method":"GET","path":"/plants","headers":{"X-Echo":"headers"}}`,
			`{"decision":"allow","headers":{"RateLimit":"\"default\";r=7;t=3","RateLimit-Policy":"\"default\";q=10;w=5"}}`},
		{"authorize", `{"method":"GET","path":"/plants","headers":{"X-Echo":"deny-headers"}}`,
			`{"decision":"deny","status":429,"error":42951,"message":"slow down","headers":{"Retry-After":"9"}}`},
	} {
		out, errOut, _ := runCLI(t, c.input, "plugin", "run", "--cache-dir", sharedCache, plugin, "--phase", c.phase, "--input", "-")
		if strings.TrimSpace(out) != c.out {
			t.Errorf("%s %s: stdout %s(stderr %s); want %s", c.phase, c.input, out, errOut, c.out)
		}
	}
	for _, c := range []struct{ input, want string }{
		{`{"id":1,"name":"echo","calller":{"name":"ci"}}`,
			`plantgate: --input: unknown key "calller": want {"id","name","tag","allowed_as","caller":{"name","scopes"}} ("principal": allowed_as's former name) (a plugin never sees a body's other properties)` + "\n"},
		{`{"id":1,"name":"echo","allowed_as":"a","principal":"b"}`,
			`plantgate: --input: "allowed_as" and "principal" are one field (principal is its former name): give one` + "\n"},
		{`{"id":1,"name":"echo","caller":{"name":"ci","scope":["x"]}}`,
			`plantgate: --input: "caller": want {"name","scopes"}: json: unknown field "scope"` + "\n"},
		{`{"id":1,"name":"echo","caller":{"scopes":["x"]}}`,
			`plantgate: --input: "caller" needs a "name": the gateway establishes a caller only from a valid token, which has one` + "\n"},
	} {
		out, errOut, code := runCLI(t, c.input, "plugin", "run", "--cache-dir", sharedCache, plugin, "--phase", "validate", "--input", "-")
		if code != 1 || out != "" || !strings.HasSuffix(errOut, c.want) {
			t.Errorf("%s: exit %d, stdout %q, stderr %q; want exit 1 and %q", c.input, code, out, errOut, c.want)
		}
	}
}

// TestPluginRunSequence: --requests runs every line against one instance
// and one KV store, so the bundled rate-limit's budget carries from one
// request to the next; a line per decision, named; the exit status is the
// worst decision's.
func TestPluginRunSequence(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	plugin := filepath.Join(dir, "15-rate-limit.wasm")
	writeFile(t, plugin, string(rateLimitModule(t)))
	// A deadline far above the default 100 ms: on a loaded CI machine a
	// call (and its KV round trips) can take longer, and a fault there is
	// not what this test is about.
	writeFile(t, filepath.Join(dir, "15-rate-limit.json"), `{"config": {"limit": 2, "window": "60s", "by": "client"}, "limits": {"timeout_ms": 5000}}`)
	line := func(name, client string) string {
		return fmt.Sprintf(`{"name":%q,"phase":"authorize","input":{"method":"POST","path":"/plants","client":%q}}`, name, client)
	}
	requests := writeFile(t, filepath.Join(t.TempDir(), "requests.jsonl"), strings.Join([]string{
		line("first", "192.0.2.7"), "", line("second", "192.0.2.7"), line("third", "192.0.2.7"), line("another client", "192.0.2.8"),
	}, "\n")+"\n")
	out, errOut, code := runCLI(t, "", "plugin", "run", "--cache-dir", sharedCache, plugin, "--requests", requests)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if code != exitDeny || len(lines) != 4 {
		t.Fatalf("exit %d, stdout:\n%s\nstderr:\n%s\nwant exit %d and 4 lines", code, out, errOut, exitDeny)
	}
	for i, want := range []string{
		`^\{"name":"first","decision":"allow"\}$`,
		`^\{"name":"second","decision":"allow"\}$`,
		`^\{"name":"third","decision":"deny","status":429,"error":42950,"message":"rate limit of 2 requests per 60 s reached; retry in \d+ s","headers":\{"RateLimit":"\\"default\\";r=0;t=\d+","RateLimit-Policy":"\\"default\\";q=2;w=60","Retry-After":"\d+"\}\}$`,
		`^\{"name":"another client","decision":"allow"\}$`,
	} {
		if !regexp.MustCompile(want).MatchString(lines[i]) {
			t.Errorf("line %d: %s\nwant %s", i+1, lines[i], want)
		}
	}

	// Each mistake names its line.
	for _, c := range []struct{ content, want string }{
		{line("ok", "192.0.2.7") + "\n" + `{"phase":"validate","input":{"id":1,"name":"a"}}`,
			"plantgate: " + "%s line 2: plugin 15-rate-limit.wasm does not serve the validate phase (it serves: authorize)\n"},
		{`{"name":"bad","phase":"authorize","input":{"method":"PUT","path":"/plants"}}`,
			"plantgate: %s line 1 (\"bad\"): input: the gateway would answer 404 or 405 before any plugin runs: PUT /plants is not an operation (GET or POST /plants, GET or DELETE /plants/{id})\n"},
		{`{"phase":"decide","input":{}}`, "plantgate: %s line 1: phase \"decide\": want authorize or validate\n"},
		{`{"phase":"authorize","inputs":{}}`, "plantgate: %s line 1: want {\"name\",\"phase\",\"input\"} (and optionally \"want\"): json: unknown field \"inputs\"\n"},
		{"\n\n", "plantgate: %s: no requests\n"},
	} {
		f := writeFile(t, filepath.Join(t.TempDir(), "r.jsonl"), c.content)
		want := fmt.Sprintf(c.want, f)
		out, errOut, code := runCLI(t, "", "plugin", "run", "--cache-dir", sharedCache, plugin, "--requests", f)
		if code != 1 || !strings.HasSuffix(errOut, want) {
			t.Errorf("%s: exit %d, stdout %q, stderr %q; want exit 1 and %q", c.content, code, out, errOut, want)
		}
	}
	if _, errOut, code := runCLI(t, "", "plugin", "run", plugin, "--requests", requests, "--phase", "authorize"); code != 1 ||
		!strings.HasSuffix(errOut, "plantgate: --requests: give it alone, or --phase and --input, not both\n") {
		t.Errorf("--requests with --phase: exit %d, stderr %q", code, errOut)
	}
}
