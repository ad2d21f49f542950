package docs

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// A command block (```sh, ```console, ```bash) in the front page or a
// guide says, in an HTML comment on the line before it, how we know its
// commands work as written:
//
//	<!-- run by TestName -->            a test runs these commands (or the
//	                                    lines they show) and checks the answers
//	<!-- run by .ci/run: make test -->  CI runs the command as shown
//	<!-- pasted from a run: WHAT -->    the block is a real run's transcript
//	<!-- not yet run by a test[: WHY] --> none of the above, yet
//
// The last kind is counted: notYetRun may only go down, as tests take
// blocks over.
var markerRE = regexp.MustCompile(`^<!-- (run by (?:(Test[A-Za-z0-9_]+)|\.ci/run: (.+))|pasted from a run: .+|not yet run by a test(?:: .+)?) -->$`)

// notYetRun is how many blocks carry "not yet run by a test" (issue 33 left
// them so): lower it when a test takes one over, never raise it.
const notYetRun = 10

// TestCommandBlocks: every command block says how it is known to work, a
// test it names exists, and a CI command it names is in .ci/run.
func TestCommandBlocks(t *testing.T) {
	t.Parallel()
	tests := testNames(t)
	ci, err := os.ReadFile("../.ci/run")
	if err != nil {
		t.Fatal(err)
	}
	blocks, unrun := 0, 0
	files := []string{"README.md"}
	more, _ := filepath.Glob("../docs/*.md")
	for _, m := range more {
		files = append(files, strings.TrimPrefix(filepath.ToSlash(m), "../"))
	}
	for _, file := range files {
		b, err := os.ReadFile(filepath.Join("..", file))
		if err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(string(b), "\n")
		fence := false
		for i, l := range lines {
			if !strings.HasPrefix(l, "```") {
				continue
			}
			if fence {
				fence = false
				continue
			}
			fence = true
			lang := strings.TrimPrefix(l, "```")
			if lang != "sh" && lang != "console" && lang != "bash" {
				continue
			}
			blocks++
			prev := ""
			for j := i - 1; j >= 0 && prev == ""; j-- {
				prev = strings.TrimSpace(lines[j])
			}
			m := markerRE.FindStringSubmatch(prev)
			switch {
			case m == nil:
				t.Errorf("%s:%d: a command block without a marker saying a test runs it or a run it was pasted from (docs/commands_test.go)", file, i+1)
			case m[2] != "" && !tests[m[2]]:
				t.Errorf("%s:%d: the block names %s, which no test file declares", file, i+1, m[2])
			case m[3] != "" && !strings.Contains(string(ci), "\n"+m[3]+"\n"):
				t.Errorf("%s:%d: the block names %q, which .ci/run does not run", file, i+1, m[3])
			case strings.HasPrefix(m[1], "not yet run"):
				unrun++
			}
		}
	}
	if blocks < 15 {
		t.Errorf("found %d command blocks: has the fence syntax changed?", blocks)
	}
	if unrun > notYetRun {
		t.Errorf("%d blocks are not yet run by a test, more than the %d allowed: run the new one in a test, or paste it from a run", unrun, notYetRun)
	}
	if unrun < notYetRun {
		t.Errorf("only %d blocks are not yet run by a test: lower notYetRun to %d", unrun, unrun)
	}
}

// testNames returns the names of every Test function in the module.
func testNames(t *testing.T) map[string]bool {
	t.Helper()
	names := map[string]bool{}
	re := regexp.MustCompile(`(?m)^func (Test[A-Za-z0-9_]+)\(`)
	err := filepath.WalkDir("..", func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == ".git" || d.Name() == "node_modules" || d.Name() == "bin") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(p, "_test.go") {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		for _, m := range re.FindAllStringSubmatch(string(b), -1) {
			names[m[1]] = true
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return names
}
