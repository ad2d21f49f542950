package host_test

import (
	"slices"
	"testing"

	"github.com/plantgate/plantgate/host"
)

// TestAllScopesCannotBeChanged: a caller that edits the list it got changes
// nobody else's (the exported slice it replaces could be rewritten by any
// package, granting or hiding a scope process-wide).
func TestAllScopesCannotBeChanged(t *testing.T) {
	got := host.AllScopes()
	got[0] = "plants:everything"
	_ = append(got[:1], "plants:more")
	want := []string{host.ScopePlantsDelete, host.ScopePlantsRead, host.ScopePlantsWrite}
	if again := host.AllScopes(); !slices.Equal(again, want) {
		t.Fatalf("AllScopes() after a caller edited its copy: %v, want %v", again, want)
	}
}
