package wasm

import (
	"bytes"
	"context"
	"encoding/json"
	"os/exec"
	"reflect"
	"slices"
	"sort"
	"testing"

	"github.com/open-policy-agent/opa/v1/ast"

	"github.com/plantgate/plantgate/host"
	"github.com/plantgate/plantgate/host/wasm/wasmtest"
)

// TestOPABuiltinsMatchOPAEval is the differential test of the builtins:
// every case of testdata/rego/builtins has, in the module run by the host
// (OPA's compiled-in builtins and, for the rest, OPA's Go implementations
// behind opa_builtinN), the value opa eval gives it on the same input, and
// a case opa eval leaves undefined is undefined here too.
func TestOPABuiltinsMatchOPAEval(t *testing.T) {
	t.Parallel()
	opa := wasmtest.NeedOPA(t)
	p := load(t, needRego(t, "builtins"), nil, Limits{}, Options{})
	out, err := exec.Command(opa, "eval", "-f", "json", "-d", regoDir+"/builtins", "data.plantgate.cases").Output()
	if err != nil {
		t.Fatalf("opa eval: %v", err)
	}
	var res struct {
		Result []struct {
			Expressions []struct {
				Value map[string]json.RawMessage `json:"value"`
			} `json:"expressions"`
		} `json:"result"`
	}
	if err := json.Unmarshal(out, &res); err != nil || len(res.Result) != 1 {
		t.Fatalf("opa eval output %s: %v", out, err)
	}
	want := res.Result[0].Expressions[0].Value
	// The cases opa eval leaves undefined are in the file, not in its answer.
	cases := []string{"units.parse error"}
	for name := range want {
		cases = append(cases, name)
	}
	sort.Strings(cases)
	for _, name := range cases {
		err := p.Validate(context.Background(), host.Plant{ID: 1, Name: name}, "")
		e, ok := err.(*host.Error)
		if !ok {
			t.Errorf("%s: %v", name, err)
			continue
		}
		w, defined := want[name]
		switch {
		case !defined && (e.Code != 40050 || e.Message != ""):
			t.Errorf("%s: undefined in opa eval, here %d %s", name, e.Code, e.Message)
		case defined && e.Code != 40099:
			t.Errorf("%s: %d %q, want %s", name, e.Code, e.Message, w)
		case defined:
			var got []json.RawMessage
			if err := json.Unmarshal([]byte(e.Message), &got); err != nil || len(got) != 1 {
				t.Errorf("%s: message %q", name, e.Message)
			} else if !sameJSON(got[0], w) {
				t.Errorf("%s:\n here     %s\n opa eval %s", name, got[0], compact(w))
			}
		}
	}
	if len(want) < 50 {
		t.Errorf("opa eval defined %d cases, want the fixture's 50 and more", len(want))
	}
	// The fixture reaches the host: these are not compiled into the module.
	for _, b := range []string{"sprintf", "time.format", "semver.compare", "units.parse_bytes", "json.patch", "crypto.sha256", "urlquery.encode_object"} {
		if !slices.Contains(p.Info().Builtins, b) {
			t.Errorf("the module does not call %s through the host; it calls %v", b, p.Info().Builtins)
		}
	}
	t.Logf("%d cases, %d builtins through the host: %v", len(cases), len(p.Info().Builtins), p.Info().Builtins)
}

// sameJSON compares two JSON values decoded, numbers by their text.
func sameJSON(a, b json.RawMessage) bool {
	var x, y any
	da, db := json.NewDecoder(bytes.NewReader(a)), json.NewDecoder(bytes.NewReader(b))
	da.UseNumber()
	db.UseNumber()
	return da.Decode(&x) == nil && db.Decode(&y) == nil && reflect.DeepEqual(x, y)
}

func compact(b json.RawMessage) string {
	var buf bytes.Buffer
	_ = json.Compact(&buf, b)
	return buf.String()
}

// TestOPATermMatchesParseTerm: opaTerm, which reads JSON text with a JSON
// decoder, gives the term ast.ParseTerm gives for every kind of text
// opa_value_dump writes, JSON or not.
func TestOPATermMatchesParseTerm(t *testing.T) {
	t.Parallel()
	for _, text := range []string{
		`"Monstera"`, `"a\tb \u0000 \u00e9 é \ud83c\udf3f"`, `""`, `42`, `-0.5`, `1e400`, `12345678901234567890123`,
		`true`, `null`, `[]`, `{}`, `set()`, `{1, "a"}`, `{1: "one", "k": [1, {2}]}`,
		`{"id": 42, "name": "Fern", "tags": ["a", "b"], "nested": {"x": null}}`, `["%s %d", ["Fern", 42]]`,
		`[1, 2.50, -3e2, 0.000000000000000000001]`, `{"b": 1, "a": {"c": [true, false]}}`,
	} {
		want, err := ast.ParseTerm(text)
		if err != nil {
			t.Fatalf("ParseTerm(%s): %v", text, err)
		}
		got, err := opaTerm([]byte(text))
		if err != nil {
			t.Fatalf("opaTerm(%s): %v", text, err)
		}
		if !got.Equal(want) || reflect.TypeOf(got.Value) != reflect.TypeOf(want.Value) {
			t.Errorf("opaTerm(%s) = %v (%T), want %v (%T)", text, got, got.Value, want, want.Value)
		}
	}
	// Text ParseTerm refuses, opaTerm refuses: a string that is not
	// UTF-8 is not read as JSON, which would replace the bytes.
	for _, text := range []string{`{1,`, "\"bad \xff utf-8\"", `[1] [2]`} {
		if _, err := ast.ParseTerm(text); err == nil {
			t.Fatalf("ParseTerm accepted %q", text)
		}
		if _, err := opaTerm([]byte(text)); err == nil {
			t.Errorf("opaTerm accepted %q", text)
		}
	}
}
