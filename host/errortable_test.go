package host_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/pb33f/libopenapi"

	"github.com/plantgate/plantgate/sdk/abi"
)

// TestErrorTableAgrees: the error table is one table in three places. Every
// code declared in error.go is a row of docs/errors.md's table and of the
// OpenAPI document's, with the status its hundreds give, unless error.go
// marks it internal (it never reaches a client), and then it is in
// neither. Every other row is a plugin range (xx50–xx99), and both tables
// have the same ones.
func TestErrorTableAgrees(t *testing.T) {
	declared, internal := declaredCodes(t)
	readme := readmeTable(t)
	openapi := openAPITable(t)
	for _, doc := range []struct {
		name string
		rows []tableRow
	}{{"docs/errors.md", readme}, {"http/openapi.yaml", openapi}} {
		documented := map[int32]bool{}
		for _, r := range doc.rows {
			if r.status != int(r.from/100) || r.status != int(r.to/100) {
				t.Errorf("%s: row %s has status %d, its hundreds say %d", doc.name, r, r.status, r.from/100)
			}
			if r.from == r.to {
				documented[r.from] = true
				if _, ok := declared[r.from]; !ok {
					t.Errorf("%s: code %d is not declared in error.go", doc.name, r.from)
				}
				if internal[r.from] {
					t.Errorf("%s: code %d is marked internal in error.go", doc.name, r.from)
				}
			} else if r.from%100 != 50 || r.to%100 != 99 || r.from/100 != r.to/100 {
				t.Errorf("%s: range %s is not a plugin range (xx50–xx99)", doc.name, r)
			}
		}
		for code, name := range declared {
			if !documented[code] && !internal[code] {
				t.Errorf("%s: %s (%d) is missing from the table", doc.name, name, code)
			}
		}
	}
	if r, o := ranges(readme), ranges(openapi); !slices.Equal(r, o) {
		t.Errorf("plugin ranges differ: docs/errors.md %v, http/openapi.yaml %v", r, o)
	}
	// The plugin ranges are the statuses a plugin may deny with, no more
	// and no fewer: what the SDK's ValidDenyCode accepts.
	var want []string
	for status := int32(100); status < 600; status++ {
		if abi.ValidDenyCode(status*100 + abi.PluginCodeMin) {
			want = append(want, tableRow{from: status*100 + abi.PluginCodeMin, to: status*100 + 99, status: int(status)}.String())
		}
	}
	if got := ranges(readme); !slices.Equal(got, want) {
		t.Errorf("docs/errors.md's plugin ranges %v, sdk/abi.ValidDenyCode accepts %v", got, want)
	}
	if len(declared) < 20 || len(readme) < 20 || len(openapi) < 20 {
		t.Fatalf("too few codes found (error.go %d, docs/errors.md %d rows, openapi.yaml %d rows): has a format changed?",
			len(declared), len(readme), len(openapi))
	}
}

// declaredCodes parses error.go's int32 constants: every Err* code, by
// value, and the ones whose comment starts "internal:".
func declaredCodes(t *testing.T) (codes map[int32]string, internal map[int32]bool) {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), "error.go", nil, parser.ParseComments)
	if err != nil {
		t.Fatal(err)
	}
	codes, internal = map[int32]string{}, map[int32]bool{}
	for _, d := range f.Decls {
		g, ok := d.(*ast.GenDecl)
		if !ok || g.Tok != token.CONST {
			continue
		}
		for _, s := range g.Specs {
			v := s.(*ast.ValueSpec)
			if len(v.Names) != 1 || len(v.Values) != 1 || !strings.HasPrefix(v.Names[0].Name, "Err") {
				continue
			}
			lit, ok := v.Values[0].(*ast.BasicLit)
			if !ok || lit.Kind != token.INT {
				t.Fatalf("%s is not a number literal", v.Names[0].Name)
			}
			n, err := strconv.ParseInt(lit.Value, 10, 32)
			if err != nil {
				t.Fatal(err)
			}
			code := int32(n)
			if other, dup := codes[code]; dup {
				t.Errorf("%s and %s are both %d", other, v.Names[0].Name, code)
			}
			codes[code] = v.Names[0].Name
			if strings.HasPrefix(strings.TrimSpace(v.Comment.Text()), "internal:") {
				internal[code] = true
			}
		}
	}
	return codes, internal
}

type tableRow struct {
	from, to int32
	status   int
}

func (r tableRow) String() string {
	if r.from == r.to {
		return strconv.Itoa(int(r.from))
	}
	return strconv.Itoa(int(r.from)) + "–" + strconv.Itoa(int(r.to))
}

func ranges(rows []tableRow) []string {
	var out []string
	for _, r := range rows {
		if r.from != r.to {
			out = append(out, r.String())
		}
	}
	return out
}

// A table row: "| 40001 | 400 | …" or "| 40050–40099 | 400 | …".
var rowRE = regexp.MustCompile(`^\s*\|\s*(\d{5})(?:\s*[–-]\s*(\d{5}))?\s*\|\s*(\d{3})\s*\|`)

func parseRows(t *testing.T, text string) []tableRow {
	t.Helper()
	var rows []tableRow
	for _, line := range strings.Split(text, "\n") {
		m := rowRE.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		from, _ := strconv.Atoi(m[1])
		to := from
		if m[2] != "" {
			to, _ = strconv.Atoi(m[2])
		}
		status, _ := strconv.Atoi(m[3])
		rows = append(rows, tableRow{int32(from), int32(to), status})
	}
	return rows
}

// readmeTable is the rows of docs/errors.md, the error table operators and
// clients read (it was the README's "Responses and the error table").
func readmeTable(t *testing.T) []tableRow {
	t.Helper()
	b, err := os.ReadFile("../docs/errors.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(b), "# Responses and the error table\n")
	if !ok {
		t.Fatal(`docs/errors.md has no "Responses and the error table" title`)
	}
	if end := strings.Index(section, "\n## "); end >= 0 {
		section = section[:end]
	}
	return parseRows(t, section)
}

// openAPITable is the rows of the table in the OpenAPI document's
// info.description, where clients read it.
func openAPITable(t *testing.T) []tableRow {
	t.Helper()
	b, err := os.ReadFile("http/openapi.yaml")
	if err != nil {
		t.Fatal(err)
	}
	doc, err := libopenapi.NewDocument(b)
	if err != nil {
		t.Fatal(err)
	}
	m, err := doc.BuildV3Model()
	if err != nil {
		t.Fatal(err)
	}
	return parseRows(t, m.Model.Info.Description)
}
