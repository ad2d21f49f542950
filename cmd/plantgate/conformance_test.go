package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/plantgate/plantgate/host/wasm/wasmtest"
)

// conformanceFixture copies testdata/<dir>/<name>.wasm to a plugin file of
// its own and returns its path.
func conformanceFixture(t *testing.T, dir, name string) string {
	t.Helper()
	root, err := wasmtest.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(root, "testdata", dir, name+".wasm"))
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "10-"+name+".wasm")
	writeFile(t, file, string(b))
	return file
}

// TestPluginConformanceBundled: the bundled plugins pass every check, and
// plant-rules gives every decision of testdata/expect/plant-rules.jsonl.
func TestPluginConformanceBundled(t *testing.T) {
	t.Parallel()
	dir := pluginsDir(t, "10-bearer-auth.wasm", "20-plant-rules.wasm")
	root, err := wasmtest.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	table := filepath.Join(root, "testdata", "expect", "plant-rules.jsonl")
	out, errOut, code := runCLI(t, "", "plugin", "conformance", "--cache-dir", sharedCache, filepath.Join(dir, "20-plant-rules.wasm"), "--expect", table)
	if code != 0 {
		t.Fatalf("plant-rules: exit %d\n%s%s", code, out, errOut)
	}
	for _, want := range []string{
		`(?m)^ok +load +20-plant-rules\.wasm: ABI 2, phases validate$`,
		`(?m)^ok +buffer +6 sizes from 1 byte to 1 MiB \+ 4 KiB, the largest validate message \(--body-limit 1 MiB\), on one instance$`,
		`(?m)^ok +authorize +not served$`,
		`(?m)^ok +validate +19 inputs: 11 allow, 8 deny$`,
		`(?m)^ok +kv +0 calls to the store \(0 found nothing\)$`,
		`(?m)^ok +reuse +10000 validate calls on one instance, memory steady at [1-9]\d* KiB$`,
		`(?m)^ok +expect +19 decisions as .*plant-rules\.jsonl wants$`,
		`conformance: every check passed\n$`,
	} {
		if !regexp.MustCompile(want).MatchString(out) {
			t.Errorf("plant-rules: output does not match %s:\n%s", want, out)
		}
	}
	out, errOut, code = runCLI(t, "", "plugin", "conformance", "--cache-dir", sharedCache, filepath.Join(dir, "10-bearer-auth.wasm"))
	if code != 0 || !regexp.MustCompile(`(?m)^ok +authorize +\d+ inputs: \d+ allow, \d+ deny$`).MatchString(out) {
		t.Fatalf("bearer-auth: exit %d\n%s%s", code, out, errOut)
	}
	// rate-limit: its KV calls reach the store, and its deny (most of the
	// reuse check's 10000 calls, at 100 a second) leaves memory flat.
	rl := writeFile(t, filepath.Join(dir, "15-rate-limit.wasm"), string(rateLimitModule(t)))
	out, errOut, code = runCLI(t, "", "plugin", "conformance", "--cache-dir", sharedCache, rl)
	if code != 0 || !regexp.MustCompile(`(?m)^ok +kv +[1-9]\d* calls to the store`).MatchString(out) ||
		!regexp.MustCompile(`(?m)^ok +reuse +10000 authorize calls on one instance, memory steady at \d+ KiB$`).MatchString(out) {
		t.Fatalf("rate-limit: exit %d\n%s%s", code, out, errOut)
	}

	// A decision the table does not want is a failure naming its line.
	bad := writeFile(t, filepath.Join(t.TempDir(), "bad.jsonl"),
		`{"name": "a valid plant", "phase": "validate", "input": {"id": 1, "name": "Monstera"}, "want": {"decision": "deny", "status": 400}}`+"\n")
	out, _, code = runCLI(t, "", "plugin", "conformance", "--cache-dir", sharedCache, filepath.Join(dir, "20-plant-rules.wasm"), "--expect", bad)
	want := `FAIL  expect     ` + bad + ` line 1 ("a valid plant"): got {"decision":"allow"}: decision "allow", want "deny"; status absent, want 400 (docs/abi.md#results-and-decision-records)` + "\n"
	if code != 1 || !strings.Contains(out, want) {
		t.Fatalf("a wrong table: exit %d, output:\n%s\nwant a line %s", code, out, want)
	}
}

// TestPluginConformanceBroken: real broken modules fail, each with the
// exact reason the host gives, the inputs that showed it and the section
// of docs/abi.md it breaks.
func TestPluginConformanceBroken(t *testing.T) {
	t.Parallel()
	usual := `{"id":1,"name":"Monstera","tag":"tropical"}`
	every := `; the same for 18 more: "no tag", "an empty tag", "an empty name", "a one-byte name", "id 0", "id -1", "the largest id", "the smallest id", "a non-ASCII name and tag", "a principal", "a non-ASCII principal", "a principal of 1024 bytes", "a caller", "a caller with no scopes", "a principal and a caller", "a tag of 64 KiB", "a non-ASCII name of 64 KiB", "a name of 1 MiB"`
	for _, c := range []struct {
		dir, name string
		want      []string // lines of the output, in order; regexps when they start with ^
	}{
		{"abi", "badbuffer", []string{
			"FAIL  load       plugin 10-badbuffer.wasm: plantgate_buffer(256) returned 0xffff0000, outside memory (docs/abi.md#the-request-buffer)"}},
		{"conformance", "outside", []string{
			`FAIL  validate   "a usual plant" ` + usual + `: decision at 0xffff0000 (16 bytes) is outside memory (docs/abi.md#results-and-decision-records)` + every}},
		{"conformance", "badcode", []string{
			// The host's text may list the ranges after "only" (main's load hints).
			`^FAIL  validate   "a usual plant" ` + regexp.QuoteMeta(usual) + `: plantgate_validate denied with 40150, a code the validate phase may not use \(400, 403, 429, 503 only[^)]*\) \(docs/abi\.md#phases-and-deny-codes\)` + regexp.QuoteMeta(every) + `$`}},
		{"conformance", "notutf8", []string{
			`FAIL  validate   "a usual plant" ` + usual + `: decision text is not UTF-8 (docs/abi.md#results-and-decision-records)` + every}},
		{"conformance", "longtext", []string{
			`FAIL  validate   "a usual plant" ` + usual + `: bad decision: abi: text longer than MaxText (docs/abi.md#results-and-decision-records)` + every}},
		{"conformance", "asciionly", []string{
			`FAIL  validate   "a non-ASCII name and tag" {"id":2,"name":"Ficus élégant 🌿","tag":"日本"}: plantgate_validate trapped: wasm error: unreachable (docs/abi.md#the-validate-message); the same for 1 more: "a non-ASCII name of 64 KiB"`}},
		{"abi", "trap", []string{
			// One page of memory: the large inputs fail at the buffer first.
			`^FAIL  validate   "a usual plant" ` + regexp.QuoteMeta(usual) + `: plantgate_validate trapped: wasm error: unreachable \(docs/abi\.md#the-validate-message\); the same for 15 more: "no tag", `,
			`^FAIL  validate   "a name of 1 MiB" .*: plantgate_buffer\(1047584\) returned 0x400, outside memory \(docs/abi\.md#the-request-buffer\)$`,
			`^ok    authorize  19 inputs: 19 allow, 0 deny$`}},
		{"abi", "rustpanic", []string{
			`FAIL  validate   "a usual plant" ` + usual + `: plantgate_validate panicked: name too odd: 33, in src/lib.rs:5:88 (docs/abi.md#the-validate-message)` + every}},
		{"conformance", "leak", []string{
			`^FAIL  reuse      \{.*\}: memory grew from \d+ KiB after 1000 calls to \d+ KiB after 10000: a guest that grows per call is recycled or runs out under load \(docs/abi\.md#limits-and-failures\)$`}},
		{"conformance", "kvbudget", []string{
			`FAIL  kv         608 KV call(s) past the budget of 8 KV calls per phase call: each answered -4 (docs/abi.md#kv)`}},
		// Grows its memory until memory_mib refuses, then traps.
		{"abi", "membomb", []string{
			`^FAIL  validate   "a usual plant" ` + regexp.QuoteMeta(usual) + `: plantgate_validate trapped: wasm error: unreachable \(docs/abi\.md#the-validate-message\); the same for 15 more: `}},
		// An allow carrying a response header outside the allow-list.
		{"abi", "setcookie", []string{
			`^FAIL  authorize  "no credential, no context" \{"method":"POST","path":"/plants"\}: decision sets response header "Set-Cookie", which is not one of \[Retry-After RateLimit RateLimit-Policy\] \(docs/abi\.md#results-and-decision-records\); the same for 18 more: `}},
		{"conformance", "kvbad", []string{
			`FAIL  kv         19 KV call(s) had a bad argument (a key empty or over 256 bytes, a value over 4096 bytes, a TTL or window outside 0–86400000 ms, or memory out of range): each answered -3 (docs/abi.md#kv)`}},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			out, errOut, code := runCLI(t, "", "plugin", "conformance", "--cache-dir", sharedCache, conformanceFixture(t, c.dir, c.name))
			if code != 1 || !strings.HasPrefix(errOut, "plantgate: conformance: ") {
				t.Fatalf("exit %d, stderr %q; want exit 1 and the count of failures\n%s", code, errOut, out)
			}
			lines := strings.Split(out, "\n")
			for _, want := range c.want {
				found := slicesIndex(lines, func(l string) bool {
					if strings.HasPrefix(want, "^") {
						return regexp.MustCompile(want).MatchString(l)
					}
					return l == want
				})
				if found < 0 {
					t.Errorf("no line %s in:\n%s", want, out)
				}
			}
		})
	}
}

func slicesIndex(lines []string, f func(string) bool) int {
	for i, l := range lines {
		if f(l) {
			return i
		}
	}
	return -1
}

// TestHelpPluginConformance: `plantgate help plugin conformance` reaches the
// nested command and describes its flags.
func TestHelpPluginConformance(t *testing.T) {
	t.Parallel()
	out, errOut, code := runCLI(t, "", "help", "plugin", "conformance")
	for _, want := range []string{"plantgate plugin conformance - ", "--expect string", "--config string", "--cache-dir string", "reuse      one instance answers 10000 calls"} {
		if code != 0 || !strings.Contains(out, want) {
			t.Errorf("exit %d, no %q in:\n%s%s", code, want, out, errOut)
		}
	}
}
