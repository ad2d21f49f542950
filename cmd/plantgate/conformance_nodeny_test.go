package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestExpectTablesDocumented: the format the no-deny hint of plugin
// conformance points to is in the guide authors read, with the hint's own
// example (issue 33: it was only in testdata/expect/README.md).
func TestExpectTablesDocumented(t *testing.T) {
	t.Parallel()
	guide, err := os.ReadFile(filepath.Join("..", "..", "docs", "writing-plugins.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(guide), "\n## Expect tables\n")
	if !ok {
		t.Fatal("docs/writing-plugins.md has no Expect tables section, which plugin conformance names")
	}
	for _, w := range []string{"`name`", "`phase`", "`input`", "`want`", "`decision`", "`status`", "`error`", "`message`",
		`{"name": "a weed", "phase": "validate", "input": {"id": 1, "name": "Dandelion", "tag": "weed"}, "want": {"decision": "deny", "error": 40070}}`} {
		if !strings.Contains(section, w) {
			t.Errorf("docs/writing-plugins.md#expect-tables lacks %s", w)
		}
	}
}
