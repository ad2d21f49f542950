package main

import (
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestPluginBench: plugin bench prints a row per phase of the plugin and
// per bundled plugin serving it, whose figures parse and are positive
// (times vary: only the shape is asserted).
func TestPluginBench(t *testing.T) {
	t.Parallel()
	bundled := pluginsDir(t, "10-bearer-auth.wasm", "20-plant-rules.wasm")
	leak := conformanceFixture(t, "conformance", "leak")
	out, errOut, code := runCLI(t, "", "plugin", "bench", "--cache-dir", sharedCache, "--calls", "200", "--bundled", bundled, leak)
	if code != 0 {
		t.Fatalf("exit %d: %s\n%s", code, errOut, out)
	}
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	if len(lines) != 3 || !regexp.MustCompile(`^plugin +phase +calls +mean +p50 +p99 +memory *$`).MatchString(lines[0]) {
		t.Fatalf("want a header and 2 rows (leak, then plant-rules bundled):\n%s", out)
	}
	row := regexp.MustCompile(`^(\S+) +(validate) +(\d+) +(\S+) +(\S+) +(\S+) +(\d+) KiB *(bundled)? *$`)
	for i, want := range []struct{ plugin, note string }{{"leak", ""}, {"plant-rules", "bundled"}} {
		m := row.FindStringSubmatch(lines[i+1])
		if m == nil || m[1] != want.plugin || m[8] != want.note || m[3] != "200" {
			t.Fatalf("row %d: %q, want %s validate 200 … %s", i+1, lines[i+1], want.plugin, want.note)
		}
		for _, s := range m[4:7] {
			if d, err := time.ParseDuration(s); err != nil || d <= 0 {
				t.Errorf("row %d: %q is not a positive duration", i+1, s)
			}
		}
		if kib, err := strconv.Atoi(m[7]); err != nil || kib <= 0 {
			t.Errorf("row %d: memory %q", i+1, m[7])
		}
	}

	// A given input, and its mistakes.
	input := writeFile(t, filepath.Join(t.TempDir(), "in.json"), `{"id":7,"name":"Fern"}`)
	if out, errOut, code := runCLI(t, "", "plugin", "bench", "--cache-dir", sharedCache, "--calls", "100", "--bundled", "none",
		"--phase", "validate", "--input", input, leak); code != 0 || strings.Count(out, "\n") != 2 {
		t.Fatalf("--phase validate --input: exit %d %s\n%s", code, errOut, out)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--phase", "validate", leak}, "plantgate: --phase and --input go together: give both, or neither for a usual request of each phase\n"},
		{[]string{"--phase", "authorize", "--input", input, leak}, "plantgate: plugin 10-leak.wasm does not serve the authorize phase (it serves: [validate])\n"},
		{[]string{"--calls", "5", leak}, "plantgate: --calls 5: want 100 to 10000000\n"},
		{[]string{"--bundled", "none", conformanceFixture(t, "abi", "trap")},
			`plantgate: plugin 10-trap.wasm: the validate input {"id":1,"name":"Monstera","tag":"tropical","allowed_as":"conformance","caller":{"name":"conformance","scopes":["plants:write"]}} faults (plantgate_validate trapped: wasm error: unreachable): plantgate plugin conformance says what is wrong` + "\n"},
	} {
		_, errOut, code := runCLI(t, "", append([]string{"plugin", "bench", "--cache-dir", sharedCache}, c.args...)...)
		if code != 1 || !strings.HasPrefix(errOut, c.want) {
			t.Errorf("%v: exit %d, stderr %q; want %q", c.args, code, errOut, c.want)
		}
	}
}
