package docs

import (
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

var (
	// measuredRE finds a measured figure in a table row: a time, a rate,
	// a size or a share.
	measuredRE = regexp.MustCompile(`\d\s?(µs|ms|ns|req/s|MiB|KiB|KB|MB|%|×)`)
	// runRE is what names a run: its issue, date, commit, the benchmark or
	// test that made it, a chaos seed, or the runs the text just gave.
	runRE = regexp.MustCompile("issue \\d+|\\d{4}-\\d{2}-\\d{2}|\\b[0-9a-f]{7,40}\\b|-bench|make bench|make chaos|seed \\d+|`(Test|Benchmark)[A-Za-z]+|(runs?|pairs) above|same run")
)

// TestFiguresNameTheirRun: every table of measured figures in a guide is
// introduced (the paragraph before it, or its header) by the run it comes
// from, so a reader can tell a figure's machine, load and build.
func TestFiguresNameTheirRun(t *testing.T) {
	t.Parallel()
	// The guides that report measurements; the others' tables are
	// references (flags, codes, limits), whose numbers are settings.
	files := []string{"performance.md", "reliability.md", "writing-plugins.md", "fleet.md", "trying-a-policy.md"}
	tables := 0
	for _, name := range files {
		f := filepath.Join("..", "docs", name)
		lines := proseLines(t, f)
		var intro []string
		for i := 0; i < len(lines); i++ {
			l := lines[i]
			if strings.HasPrefix(l, "#") {
				intro = nil
				continue
			}
			if !strings.HasPrefix(l, "|") {
				intro = append(intro, l)
				continue
			}
			start := i
			for i < len(lines) && strings.HasPrefix(lines[i], "|") {
				i++
			}
			table := strings.Join(lines[start:i], "\n")
			if measuredRE.MatchString(strings.Join(lines[min(start+2, i):i], "\n")) {
				tables++
				if !runRE.MatchString(strings.Join(intro, "\n") + "\n" + lines[start]) {
					t.Errorf("%s: the table of figures starting %q does not name the run it comes from", "docs/"+name, firstLine(table))
				}
			}
			intro = nil
		}
	}
	if tables < 5 {
		t.Errorf("found %d tables of figures: has the table syntax changed?", tables)
	}
}

func firstLine(s string) string {
	l, _, _ := strings.Cut(s, "\n")
	return l
}
