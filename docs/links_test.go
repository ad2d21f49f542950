// The guides are read by people who follow their links and paste their
// commands, so both are checked like code.

package docs

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// pending are the guides other branches add (issues 30, 31, 32): the index
// links them already. A link to one is checked once it exists; until then
// it is only logged. Remove an entry once its file has landed.
var pending = map[string]bool{}

// guides are the Markdown files whose links are checked, relative to the
// repository's root: the front page, every guide in docs/ and the kits'
// guides, which link into docs/.
func guides(t *testing.T) []string {
	t.Helper()
	files := []string{"README.md", "sdk/README.md", "sdk/rust/README.md", "sdk/c/README.md", "sdk/assemblyscript/README.md", "testdata/expect/README.md"}
	more, err := filepath.Glob(filepath.Join("..", "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range more {
		files = append(files, filepath.ToSlash(strings.TrimPrefix(m, ".."+string(filepath.Separator))))
	}
	return files
}

var (
	linkRE       = regexp.MustCompile(`\]\(([^)\s]+)\)`)
	inlineCodeRE = regexp.MustCompile("`[^`]*`")
)

// TestLinks: every relative link of the guides names a file that exists,
// and every #anchor a heading of the file it points into, as GitHub makes
// anchors.
func TestLinks(t *testing.T) {
	t.Parallel()
	checked := 0
	for _, file := range guides(t) {
		for _, target := range links(t, file) {
			if strings.HasPrefix(target, "http://") || strings.HasPrefix(target, "https://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			checked++
			path, anchor, _ := strings.Cut(target, "#")
			dest := file
			if path != "" {
				dest = filepath.ToSlash(filepath.Clean(filepath.Join(filepath.Dir(file), path)))
			}
			key := dest
			if anchor != "" {
				key += "#" + anchor
			}
			if _, err := os.Stat(filepath.Join("..", dest)); err != nil {
				if pending[dest] {
					t.Logf("%s links %s, which another branch adds", file, target)
					continue
				}
				t.Errorf("%s links %s: %s does not exist", file, target, dest)
				continue
			}
			if anchor == "" || !strings.HasSuffix(dest, ".md") {
				continue
			}
			if !anchors(t, filepath.Join("..", dest))[anchor] {
				if pending[key] {
					t.Logf("%s links %s, a section another branch adds", file, target)
					continue
				}
				t.Errorf("%s links %s: %s has no heading with the anchor #%s", file, target, dest, anchor)
			}
		}
	}
	if checked < 50 {
		t.Errorf("checked only %d links: has the link syntax changed?", checked)
	}
}

// TestPendingStillPending: an entry of pending whose file has landed is
// checked like any other link, so the list must not keep it.
func TestPendingStillPending(t *testing.T) {
	t.Parallel()
	for p := range pending {
		path, anchor, _ := strings.Cut(p, "#")
		if _, err := os.Stat(filepath.Join("..", path)); err != nil {
			continue
		}
		if anchor == "" || anchors(t, filepath.Join("..", path))[anchor] {
			t.Errorf("%s exists now: remove it from pending in docs/links_test.go", p)
		}
	}
}

// links returns the targets of the Markdown links of file, outside code
// blocks and inline code.
func links(t *testing.T, file string) []string {
	t.Helper()
	var out []string
	for _, l := range proseLines(t, filepath.Join("..", file)) {
		for _, m := range linkRE.FindAllStringSubmatch(inlineCodeRE.ReplaceAllString(l, ""), -1) {
			out = append(out, m[1])
		}
	}
	return out
}

// proseLines returns the lines of a Markdown file outside fenced code
// blocks.
func proseLines(t *testing.T, path string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	fence := false
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(strings.TrimSpace(l), "```") {
			fence = !fence
			continue
		}
		if !fence {
			out = append(out, l)
		}
	}
	return out
}

// anchors returns the GitHub anchors of the Markdown file at path.
func anchors(t *testing.T, path string) map[string]bool {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return Anchors(string(b))
}
