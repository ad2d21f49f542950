package abi

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"go/ast"
	"go/importer"
	"go/parser"
	"go/token"
	"go/types"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// The ABI document, docs/abi.md, is what authors of every language but Go
// read; these tests hold it to this package, so the two cannot drift: its
// constant table against every exported constant here (values from the
// type checker, so a changed or new constant fails), its hex examples
// against the encoders, and its Result and Take examples against the
// packers.

const docPath = "../../docs/abi.md"

func readDoc(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(docPath)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// section returns the body of the "## title" section of doc.
func section(t *testing.T, doc, title string) string {
	t.Helper()
	_, rest, ok := strings.Cut(doc, "\n## "+title+"\n")
	if !ok {
		t.Fatalf("docs/abi.md has no section %q", title)
	}
	if i := strings.Index(rest, "\n## "); i >= 0 {
		rest = rest[:i]
	}
	return rest
}

// tableRows returns the cells of each row of the Markdown tables in s,
// without the header and separator rows, each cell trimmed.
func tableRows(s string) [][]string {
	var rows [][]string
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		if !strings.HasPrefix(l, "|") || strings.HasPrefix(l, "|---") {
			continue
		}
		if i+1 < len(lines) && strings.HasPrefix(lines[i+1], "|---") {
			continue // a header row
		}
		cells := strings.Split(strings.Trim(l, "|"), "|")
		for j := range cells {
			cells[j] = strings.TrimSpace(cells[j])
		}
		rows = append(rows, cells)
	}
	return rows
}

// packageConstants type-checks this package's files (not its tests) and
// returns every exported constant's value as Go would print it exactly:
// "2", "\"plantgate\"".
func packageConstants(t *testing.T) map[string]string {
	t.Helper()
	fset := token.NewFileSet()
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	var parsed []*ast.File
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		af, err := parser.ParseFile(fset, f, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		parsed = append(parsed, af)
	}
	conf := types.Config{Importer: importer.ForCompiler(fset, "source", nil)}
	pkg, err := conf.Check("github.com/plantgate/plantgate/sdk/abi", fset, parsed, nil)
	if err != nil {
		t.Fatal(err)
	}
	consts := make(map[string]string)
	for _, name := range pkg.Scope().Names() {
		if c, ok := pkg.Scope().Lookup(name).(*types.Const); ok && c.Exported() {
			consts[name] = c.Val().ExactString()
		}
	}
	return consts
}

// TestDocConstants: every row of the document's constant table names a
// constant of this package with the value written, and every exported
// constant of this package has a row.
func TestDocConstants(t *testing.T) {
	t.Parallel()
	doc := readDoc(t)
	consts := packageConstants(t)
	if len(consts) < 40 {
		t.Fatalf("found %d constants in sdk/abi; the type check lost some", len(consts))
	}
	seen := make(map[string]bool)
	for _, row := range tableRows(section(t, doc, "Constants")) {
		name, value := strings.Trim(row[0], "`"), strings.Trim(row[1], "`")
		seen[name] = true
		got, ok := consts[name]
		switch {
		case !ok:
			t.Errorf("docs/abi.md names constant %s, which sdk/abi does not have", name)
		case got != value:
			t.Errorf("docs/abi.md: %s is %s, sdk/abi says %s", name, value, got)
		}
	}
	for name, v := range consts {
		if !seen[name] {
			t.Errorf("sdk/abi constant %s = %s is missing from the table in docs/abi.md#constants", name, v)
		}
	}
	for _, h := range ResponseHeaders {
		if !strings.Contains(section(t, doc, "Constants"), "`"+h+"`") {
			t.Errorf("docs/abi.md#constants does not list the response header %s", h)
		}
	}
}

// docExamples are the messages the document shows in hex, made again
// with the encoders.
func docExamples() map[string][]byte {
	sum := sha256.Sum256([]byte("tok"))
	auth := AppendAuthorizeDigest(nil, "GET", "/plants/7", "tok", sum[:])
	auth = AppendOperation(auth, "GET /plants/{id}", 7, true)
	auth, block := AppendContext(auth, "r1", []byte("192.0.2.7"))
	auth = AppendRequestHeader(auth, block, "X-Tenant", []byte("blue"))
	auth = AppendPrincipal(auth, "ci", []string{"plants:read"})
	val := AppendValidate(nil, 7, "Monstera", "tropical", true, "ci")
	val = AppendPrincipal(val, "ci", []string{"plants:write"})
	return map[string][]byte{
		"authorize":    auth,
		"validate":     val,
		"deny":         AppendDecision(nil, VerdictDeny, 40350, "no"),
		"deny-headers": AppendHeaderDecision(nil, VerdictDeny, 42950, "slow down", "Retry-After", "1"),
		"allow-as":     AppendDecision(nil, VerdictAllow, 0, "ci"),
		"token":        AppendTokenRecord(nil, 1700000000000, 0, false, sum[:], "ci", "plants:read", "plants:write"),
	}
}

// hexBlocks returns the document's ```hex NAME blocks, decoded: on each
// line, what comes before ';' is hex bytes.
func hexBlocks(t *testing.T, doc string) map[string][]byte {
	t.Helper()
	blocks := make(map[string][]byte)
	sc := bufio.NewScanner(strings.NewReader(doc))
	name := ""
	var buf bytes.Buffer
	for sc.Scan() {
		l := sc.Text()
		switch {
		case name == "" && strings.HasPrefix(l, "```hex "):
			name = strings.TrimPrefix(l, "```hex ")
			buf.Reset()
		case name != "" && l == "```":
			b, err := hex.DecodeString(buf.String())
			if err != nil {
				t.Fatalf("docs/abi.md hex block %s: %v", name, err)
			}
			blocks[name] = b
			name = ""
		case name != "":
			data, _, _ := strings.Cut(l, ";")
			buf.WriteString(strings.Join(strings.Fields(data), ""))
		}
	}
	return blocks
}

// TestDocHexExamples: each hex example is byte for byte what the encoder
// writes, and parses back to the fields the document says.
func TestDocHexExamples(t *testing.T) {
	t.Parallel()
	doc := readDoc(t)
	blocks := hexBlocks(t, doc)
	want := docExamples()
	for name, w := range want {
		got, ok := blocks[name]
		if !ok {
			t.Errorf("docs/abi.md has no hex block %q", name)
			continue
		}
		if !bytes.Equal(got, w) {
			t.Errorf("docs/abi.md hex block %s:\n% x\nthe encoder writes\n% x", name, got, w)
		}
	}
	for name := range blocks {
		if _, ok := want[name]; !ok {
			t.Errorf("docs/abi.md hex block %q is not checked here: add it to docExamples", name)
		}
	}
	a, err := ParseAuthorize(blocks["authorize"])
	if err != nil || string(a.Method) != "GET" || string(a.Route) != "GET /plants/{id}" || a.PathID != 7 ||
		string(a.Client) != "192.0.2.7" || string(a.Principal) != "ci" || string(a.Scopes) != "plants:read" {
		t.Errorf("authorize example parses as %+v, %v", a, err)
	}
	if name, value, _, ok := NextHeader(a.Headers); !ok || string(name) != "X-Tenant" || string(value) != "blue" {
		t.Errorf("authorize example's header block: %q %q %v", name, value, ok)
	}
	v, err := ParseValidate(blocks["validate"])
	if err != nil || v.ID != 7 || string(v.Name) != "Monstera" || !v.HasTag || string(v.Principal) != "ci" ||
		string(v.CallerScopes) != "plants:write" {
		t.Errorf("validate example parses as %+v, %v", v, err)
	}
	for name, code := range map[string]int32{"deny": 40350, "deny-headers": 42950} {
		if d, err := ParseDecision(blocks[name]); err != nil || d.Verdict != VerdictDeny || d.Code != code {
			t.Errorf("%s example parses as %+v, %v", name, d, err)
		}
	}
	if tr, err := ParseTokenRecord(blocks["token"]); err != nil || tr.Created != 1700000000000 || string(tr.Scopes) != "plants:read plants:write" {
		t.Errorf("token example parses as %+v, %v", tr, err)
	}
	// The sizes the document gives in prose.
	for _, s := range []string{
		fmt.Sprintf("(%d bytes):\n\n```hex authorize", len(want["authorize"])),
		fmt.Sprintf("(%d bytes):\n\n```hex validate", len(want["validate"])),
	} {
		if !strings.Contains(doc, s) {
			t.Errorf("docs/abi.md does not say %q", s)
		}
	}
}

// TestDocPackedExamples: the Result and Take values quoted in the
// document are what PackResult and PackTake make of the fields it names.
func TestDocPackedExamples(t *testing.T) {
	t.Parallel()
	doc := readDoc(t)
	for _, c := range []struct {
		v    uint64
		near string
	}{
		{PackResult(0x1000, 13), "A record of 13 bytes at `0x1000`"},
		{uint64(PackTake(false, 2, 41000)), "allowed with 2 left and 41 s to go"},
		{uint64(PackTake(true, 0, 19000)), "denied with 19 s to wait"},
		{PackResult(0, 10), "(i64.const 0x0000_0000_0000_000a)"},
	} {
		lit := fmt.Sprintf("`%#016x`", c.v)
		if c.near[0] == '(' {
			lit = c.near // the WAT example spells it with underscores
		}
		i := strings.Index(doc, c.near)
		if i < 0 || !strings.Contains(doc[i:min(len(doc), i+len(c.near)+120)], lit) {
			t.Errorf("docs/abi.md: want %s beside %q", lit, c.near)
		}
	}
	// The WAT example's record is a deny 40350 "no", 10 bytes at 0.
	rec := AppendDecision(nil, VerdictDeny, 40350, "no")
	var esc strings.Builder
	for _, b := range rec[:8] {
		fmt.Fprintf(&esc, `\%02x`, b)
	}
	if !strings.Contains(doc, `(data (i32.const 0) "`+esc.String()+`no")`) || len(rec) != 10 {
		t.Errorf("docs/abi.md's WAT example does not hold the record % x", rec)
	}
	// Deny code ranges: each phase's table row names the ranges ValidDenyCode allows.
	for _, status := range []int32{400, 401, 403, 429, 503} {
		lo, hi := status*100+PluginCodeMin, status*100+99
		if !ValidDenyCode(lo) || !ValidDenyCode(hi) || ValidDenyCode(lo-1) {
			t.Fatalf("status %d: range %d–%d is not what ValidDenyCode allows", status, lo, hi)
		}
		if !regexp.MustCompile(fmt.Sprintf(`\| %d \| %d–%d \|`, status, lo, hi)).MatchString(doc) {
			t.Errorf("docs/abi.md#phases-and-deny-codes has no row for %d with codes %d–%d", status, lo, hi)
		}
	}
}
