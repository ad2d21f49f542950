package wasm

import (
	"os"
	"strings"
	"testing"

	"github.com/plantgate/plantgate/sdk/abi"
)

// TestDocSignatures: the signature table of docs/abi.md is exactly what
// the load checks want of every export and plantgate import (check.go);
// sdk/abi/doc_test.go holds the document's constants and messages.
func TestDocSignatures(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile("../../docs/abi.md")
	if err != nil {
		t.Fatal(err)
	}
	_, table, ok := strings.Cut(string(b), "\n## Signatures\n")
	if !ok {
		t.Fatal("docs/abi.md has no Signatures section")
	}
	want := map[string]string{}
	for _, e := range exports {
		want["export "+e.name] = e.sig.String()
	}
	for name, sig := range hostImports {
		want["import "+abi.HostModule+"."+name] = sig.String()
	}
	seen := map[string]bool{}
	for _, l := range strings.Split(table, "\n") {
		cells := strings.Split(strings.Trim(l, "|"), "|")
		if len(cells) != 3 || (strings.TrimSpace(cells[0]) != "export" && strings.TrimSpace(cells[0]) != "import") {
			continue
		}
		key := strings.TrimSpace(cells[0]) + " " + strings.Trim(strings.TrimSpace(cells[1]), "`")
		sig := strings.Trim(strings.TrimSpace(cells[2]), "`")
		seen[key] = true
		if w, ok := want[key]; !ok {
			t.Errorf("docs/abi.md lists %s, which the host does not know", key)
		} else if w != sig {
			t.Errorf("docs/abi.md: %s has signature %s, the host checks %s", key, sig, w)
		}
	}
	for key, sig := range want {
		if !seen[key] {
			t.Errorf("docs/abi.md#signatures lacks %s %s", key, sig)
		}
	}
}
