package wasm

import (
	"encoding/json"
	"net/netip"
	"os"
	"strings"
	"testing"

	"github.com/plantgate/plantgate/host"
)

// regoDoc returns docs/abi.md's Rego section.
func regoDoc(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile("../../docs/abi.md")
	if err != nil {
		t.Fatal(err)
	}
	_, sec, ok := strings.Cut(string(b), "\n## Rego policies\n")
	sec, _, _ = strings.Cut(sec, "\n## ")
	if !ok {
		t.Fatal("docs/abi.md has no Rego policies section")
	}
	return sec
}

// tableRows returns the cells of the rows of the Markdown tables in doc
// whose first cell is one of kinds.
func tableRows(doc string, kinds ...string) [][]string {
	var rows [][]string
	for _, l := range strings.Split(doc, "\n") {
		cells := strings.Split(strings.Trim(l, "|"), "|")
		for i := range cells {
			cells[i] = strings.Trim(strings.TrimSpace(cells[i]), "`")
		}
		for _, k := range kinds {
			if len(cells) > 1 && cells[0] == k {
				rows = append(rows, cells)
			}
		}
	}
	return rows
}

// TestDocOPASignatures: the OPA signature table of docs/abi.md is what
// the load checks want of an OPA policy (opa.go).
func TestDocOPASignatures(t *testing.T) {
	t.Parallel()
	want := map[string]string{}
	for _, e := range opaExports {
		want["opa export "+e.name] = e.sig.String()
	}
	for name, sig := range opaImports {
		want["opa import "+opaEnvModule+"."+name] = sig.String()
	}
	seen := map[string]bool{}
	for _, r := range tableRows(regoDoc(t), "opa export", "opa import") {
		key := r[0] + " " + r[1]
		seen[key] = true
		if w, ok := want[key]; !ok {
			t.Errorf("docs/abi.md lists %s, which the host does not know", key)
		} else if w != r[2] {
			t.Errorf("docs/abi.md: %s has signature %s, the host checks %s", key, r[2], w)
		}
	}
	for key, sig := range want {
		if !seen[key] {
			t.Errorf("docs/abi.md#opa-signatures lacks %s %s", key, sig)
		}
	}
}

// TestDocOPARefused: the refused builtins of docs/abi.md are the host's,
// with the same reasons.
func TestDocOPARefused(t *testing.T) {
	t.Parallel()
	_, table, ok := strings.Cut(regoDoc(t), "| refused builtin | why |\n")
	table, _, _ = strings.Cut(table, "\n\n")
	if !ok {
		t.Fatal("docs/abi.md has no refused builtin table")
	}
	doc := map[string]string{}
	for _, l := range strings.Split(table, "\n") {
		cells := strings.Split(strings.Trim(l, "|"), "|")
		if len(cells) == 2 && strings.HasPrefix(strings.TrimSpace(cells[0]), "`") {
			doc[strings.Trim(strings.TrimSpace(cells[0]), "`")] = strings.TrimSpace(cells[1])
		}
	}
	for name, why := range opaRefused {
		if doc[name] != why {
			t.Errorf("docs/abi.md: refused builtin %s: %q, the host says %q", name, doc[name], why)
		}
	}
	for name := range doc {
		if opaRefused[name] == "" {
			t.Errorf("docs/abi.md refuses %s, the host does not", name)
		}
	}
}

// TestDocOPAInput: the input examples of docs/abi.md are what the host
// builds for the requests they describe.
func TestDocOPAInput(t *testing.T) {
	t.Parallel()
	doc := regoDoc(t)
	block := func(name string) string {
		_, rest, ok := strings.Cut(doc, "```json "+name+"\n")
		if !ok {
			t.Fatalf("docs/abi.md has no json %s block", name)
		}
		b, _, _ := strings.Cut(rest, "```")
		return b
	}
	x := &host.Exchange{RequestID: "r1", Client: netip.MustParseAddr("192.0.2.7"), Header: mapHeader{"X-Tenant": "blue"}}
	x.SetPrincipal(host.Token{Name: "ci", Scopes: []string{"plants:read"}})
	p := &Plugin{headers: []string{"X-Tenant"}}
	got := p.appendAuthorizeInput(nil, host.AuthorizeRequest{Method: "GET", Path: "/plants/7", Route: "GET /plants/{id}", PathID: 7, HasPathID: true, Credential: "tok"}, x)
	if !sameJSON(got, json.RawMessage(block("rego-authorize"))) {
		t.Errorf("authorize input\n%s\ndocs/abi.md has\n%s", got, block("rego-authorize"))
	}
	got = appendValidateInput(nil, host.Plant{ID: 7, Name: "Monstera", Tag: "tropical", HasTag: true}, "ci", host.Principal{Name: "ci", Scopes: []string{"plants:write"}})
	if !sameJSON(got, json.RawMessage(block("rego-validate"))) {
		t.Errorf("validate input\n%s\ndocs/abi.md has\n%s", got, block("rego-validate"))
	}
}
