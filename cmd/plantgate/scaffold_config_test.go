package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestScaffoldRuleReplacedKeepsConfig is what a new author meets first
// (issue 33): the scaffold's rule is replaced by one that takes no config,
// while the sidecar keeps the example's "config". make check must say which
// file holds that config and what to do, in the words docs/abi.md uses.
func TestScaffoldRuleReplacedKeepsConfig(t *testing.T) {
	t.Parallel()
	bin := buildBinary(t)
	work := newProject(t, bin, "go", "noweeds")
	rule := `package main

import "github.com/plantgate/plantgate/sdk"

func init() {
	sdk.HandleValidate(func(p sdk.Plant) sdk.Decision {
		if p.HasTag && p.Tag == "weed" {
			return sdk.Deny(40070, "weeds are not plants")
		}
		return sdk.Allow()
	})
}

func main() {}
`
	if err := os.WriteFile(filepath.Join(work, "main.go"), []byte(rule), 0o644); err != nil {
		t.Fatal(err)
	}
	os.Remove(filepath.Join(work, "main_test.go")) // it tested the replaced rule
	mk := exec.Command("make", "check", "PLANTGATE="+bin)
	mk.Dir = work
	mk.Env = append(os.Environ(), offline...)
	b, err := mk.CombinedOutput()
	const want = `plantgate: plugin 50-noweeds.wasm: config refused: the plugin takes no config, got "{\"max_name\": 40}": remove "config" from its sidecar, or handle it with sdk.HandleConfigure (sidecar 50-noweeds.json; docs/abi.md#config)` + "\n"
	if err == nil || !strings.Contains(string(b), "\n"+want) {
		t.Fatalf("make check: %v\n%s\nwant the line %q", err, b, want)
	}
	abiDoc, err := os.ReadFile(filepath.Join("..", "..", "docs", "abi.md"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(strings.Join(strings.Fields(string(abiDoc)), " "), `config refused: the plugin takes no config, got …: remove "config" from its sidecar, or handle it with …`) {
		t.Error("docs/abi.md#config does not document the message a plugin without a config handler gives")
	}
}

// TestScaffoldMakeBuilds: plain `make` in a new project builds the module,
// in every language (issue 33: the AssemblyScript Makefile's first target
// was node_modules, so `make` installed and built nothing). make -n shows
// what the default goal would run without needing the toolchains.
func TestScaffoldMakeBuilds(t *testing.T) {
	t.Parallel()
	bin := buildBinary(t)
	for lang, want := range map[string]string{
		"go":             "-o 50-cap.wasm",
		"rust":           "-o 50-cap.wasm",
		"c":              "-o 50-cap.wasm",
		"assemblyscript": "npm run build",
	} {
		work := newProject(t, bin, lang, "cap")
		mk := exec.Command("make", "-n")
		mk.Dir = work
		out, err := mk.CombinedOutput()
		if err != nil || !strings.Contains(string(out), want) {
			t.Errorf("%s: make -n: %v\n%s\nwant it to run %q", lang, err, out, want)
		}
	}
}

// TestScaffoldGuidesInProject: every guide a new Rust, C or AssemblyScript
// project's README names is a file of that project (issue 33: they named
// sdk/rust/README.md and docs/abi.md "in the Plantgate repository", which
// an author working from the binary alone does not have).
func TestScaffoldGuidesInProject(t *testing.T) {
	t.Parallel()
	bin := buildBinary(t)
	mdPath := regexp.MustCompile(`[A-Za-z0-9_./-]+\.md\b`)
	for _, lang := range []string{"rust", "c", "assemblyscript"} {
		work := newProject(t, bin, lang, "cap")
		readme, err := os.ReadFile(filepath.Join(work, "README.md"))
		if err != nil {
			t.Fatal(err)
		}
		named := mdPath.FindAllString(string(readme), -1)
		if len(named) < 2 {
			t.Errorf("%s: README.md names %v: want the kit's guide and the ABI", lang, named)
		}
		for _, p := range named {
			if _, err := os.Stat(filepath.Join(work, p)); err != nil {
				t.Errorf("%s: README.md names %s, which the project does not have", lang, p)
			}
		}
		if strings.Contains(string(readme), "Plantgate repository") {
			t.Errorf("%s: README.md sends the author to the Plantgate repository:\n%s", lang, readme)
		}
	}
}

// newProject runs `plantgate plugin new --lang lang name` into a fresh
// directory and returns it.
func newProject(t *testing.T, bin, lang, name string) string {
	t.Helper()
	work := filepath.Join(t.TempDir(), lang)
	if out, err := exec.Command(bin, "plugin", "new", "--lang", lang, name, work).CombinedOutput(); err != nil {
		t.Fatalf("plugin new --lang %s: %v\n%s", lang, err, out)
	}
	return work
}
