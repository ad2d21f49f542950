package docs

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// TestMakeTestSaysWhatItDoes: `make test` tells a newcomer what it runs and
// how long it takes before the first package answers, and the README's
// Quickstart says the same (issue 33: two silent minutes).
func TestMakeTestSaysWhatItDoes(t *testing.T) {
	t.Parallel()
	// --no-print-directory: under `make test` itself this make is a
	// sub-make, which would otherwise begin with "Entering directory".
	mk := exec.Command("make", "--no-print-directory", "-n", "test")
	mk.Dir = ".."
	out, err := mk.CombinedOutput()
	if err != nil {
		t.Fatalf("make -n test: %v\n%s", err, out)
	}
	first, _, _ := strings.Cut(string(out), "\n")
	if !strings.HasPrefix(first, "echo ") || !strings.Contains(first, "minutes") || !strings.Contains(first, "go test") {
		t.Errorf("make test begins with %q: want an echo of what it runs and how long it takes", first)
	}
	b, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, quick, _ := strings.Cut(string(b), "\n## Quickstart\n")
	quick, _, _ = strings.Cut(quick, "\n## ")
	if !strings.Contains(quick, "make test") || !strings.Contains(quick, "about 3 minutes") {
		t.Error("the README's Quickstart does not say how long make test takes")
	}
}
