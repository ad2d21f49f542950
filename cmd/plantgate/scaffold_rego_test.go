package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/plantgate/plantgate/host/wasm/wasmtest"
)

// TestPluginNewRego makes a Rego project outside the repository, as a
// newcomer does: its opa test tests pass, opa fmt finds nothing, `make`
// builds NN-name.wasm with opa, the `make check` line it printed passes,
// the module calls no host builtin, and it decides with the rule and the
// sidecar's config as data.
// Without opa it skips, or fails under PLANTGATE_REQUIRE_OPA=1.
func TestPluginNewRego(t *testing.T) {
	t.Parallel()
	opa := wasmtest.NeedOPA(t)
	bin := buildBinary(t)
	work := filepath.Join(t.TempDir(), "name-cap")
	cmd := exec.Command(bin, "plugin", "new", "--lang", "rego", "name-cap", work)
	cmd.Env = append(os.Environ(), "PATH=/usr/bin:/bin")
	out, err := cmd.Output()
	check := "make check PLANTGATE=" + bin + "    # plantgate is not on PATH: check with the binary that wrote this"
	want := "wrote " + work + ": policy.rego (one validate rule), policy_test.rego, Makefile, 50-name-cap.json\n"
	if err != nil || !strings.HasPrefix(string(out), want) || !strings.Contains(string(out), "\n  "+check+"\n") {
		t.Fatalf("plugin new --lang rego: %v\n%s\nwant it to start %q and hold %q", err, out, want, check)
	}
	for _, args := range [][]string{{"test"}, {"fmt"}, {}, {"check", "PLANTGATE=" + bin}} {
		runMake(t, work, "PASS: 3/3", append(args, "OPA="+opa)...)
	}
	// The example's message calls out to no host builtin: a template
	// string, not sprintf (docs/rego.md#costs).
	if out, errOut, code := runCLI(t, "", "plugin", "check", filepath.Join(work, "50-name-cap.wasm")); code != 0 || !strings.Contains(out, "\nhost builtins     none\n") {
		t.Fatalf("plugin check: exit %d\n%s%s", code, out, errOut)
	}
	long := strings.Repeat("é", 41)
	wantNameCap(t, filepath.Join(work, "50-name-cap.wasm"), long[:80], long, "plant name is longer than 40 characters")
}
