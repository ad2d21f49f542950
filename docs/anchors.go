// Package docs is the Markdown documentation; its Go code is what the
// tests of the guides share: the anchors GitHub makes of their headings.
package docs

import (
	"strconv"
	"strings"
	"unicode"
)

// Anchors returns the GitHub anchors of a Markdown text's headings (outside
// fenced code): the title lowercased, spaces to dashes, punctuation other
// than - and _ dropped, and -1, -2… after a repeated one. A message or a
// guide that names "docs/abi.md#config" is checked against it.
func Anchors(markdown string) map[string]bool {
	found := map[string]bool{}
	seen := map[string]int{}
	fence := false
	for _, l := range strings.Split(markdown, "\n") {
		if strings.HasPrefix(strings.TrimSpace(l), "```") {
			fence = !fence
			continue
		}
		if fence || !strings.HasPrefix(l, "#") {
			continue
		}
		title := strings.ToLower(strings.TrimSpace(strings.TrimLeft(l, "#")))
		var a strings.Builder
		for _, r := range title {
			switch {
			case r == ' ':
				a.WriteByte('-')
			case r == '-' || r == '_' || 'a' <= r && r <= 'z' || '0' <= r && r <= '9' || r > 127 && unicode.IsLetter(r):
				a.WriteRune(r)
			}
		}
		s := a.String()
		if n := seen[s]; n > 0 {
			found[s+"-"+strconv.Itoa(n)] = true
		} else {
			found[s] = true
		}
		seen[s]++
	}
	return found
}
