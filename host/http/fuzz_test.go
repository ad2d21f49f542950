package http

import (
	"bytes"
	"encoding/json"
	"math/big"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/plantgate/plantgate/host"
)

// The fuzz targets run their seeds (f.Add and testdata/fuzz/FuzzXxx) in
// every go test; `make fuzz` explores with -fuzz for FUZZTIME each.

// FuzzDecodePlant checks that DecodePlant never panics, refuses only with
// its documented codes, that an accepted body round-trips through the
// canonical encoding to the same plant, and that it agrees with an
// independent oracle (encoding/json and math/big) on every input the oracle
// can judge: valid UTF-8, no duplicate key, no lone surrogate escape.
func FuzzDecodePlant(f *testing.F) {
	for _, s := range []string{
		`{"id":1,"name":"fern"}`, `{"id":1.0,"name":"a","tag":""}`, `{"id":1e3,"name":"a","x":[{"k":1}]}`,
		`{"id":-0,"name":"a"}`, `{"id":9223372036854775807,"name":"a"}`, `{"id":-9223372036854775809,"name":"a"}`,
		`{"id":1e400,"name":"a"}`, `{"id":1,"name":"a","name":"b"}`, `{"id":1,"name":"\ud800"}`, `{"id":1,"name":"\u0000"}`,
		"\ufeff{}", "{\"id\":1,\"name\":\"\xc0\xaf\"}", `[[[[`, `null`, `{"id":NaN}`, `{"id":12.50e1,"name":null}`, ``,
		// A duplicate key is a syntax error and wins over the out-of-range
		// number before it (40007, not 40002); the oracle once lost the
		// duplicate because encoding/json's tokenizer failed on 1e700.
		`{"":1e700,"":""}`, `{"id":1e700,"id":1,"name":"a"}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		p, err := DecodePlant(body)
		if err != nil {
			e, ok := err.(*host.Error)
			if !ok {
				t.Fatalf("error %T %v is not a *host.Error", err, err)
			}
			switch e.Code {
			case host.ErrMalformedJSON, host.ErrSchema, host.ErrEmptyBody, host.ErrDuplicateKey, host.ErrInvalidUTF8:
			default:
				t.Fatalf("undocumented code %d: %s", e.Code, e.Message)
			}
			if e.Message == "" || !utf8.ValidString(e.Message) {
				t.Fatalf("message %q", e.Message)
			}
		} else {
			again, err := DecodePlant(canonical(p))
			if err != nil || again != p {
				t.Fatalf("canonical %s decodes to %+v, %v; want %+v", canonical(p), again, err, p)
			}
		}
		checkOracle(t, body, p, err)
	})
}

// canonical is the canonical encoding of p, as the store writes it.
func canonical(p host.Plant) []byte {
	b := strconv.AppendInt([]byte(`{"id":`), p.ID, 10)
	b, _ = jsontext.AppendQuote(append(b, `,"name":`...), p.Name)
	if p.HasTag {
		b, _ = jsontext.AppendQuote(append(b, `,"tag":`...), p.Tag)
	}
	return append(b, '}')
}

var loneSurrogate = regexp.MustCompile(`(?i)\\u d[89a-f]`)

func checkOracle(t *testing.T, body []byte, p host.Plant, err error) {
	t.Helper()
	if len(body) == 0 || !utf8.Valid(body) || loneSurrogate.Match(bytes.ReplaceAll(body, []byte(`\u`), []byte(`\u `))) {
		return
	}
	valid := json.Valid(body)
	if !valid {
		if err == nil {
			t.Fatalf("encoding/json refuses %q, DecodePlant accepts %+v", body, p)
		}
		return
	}
	if hasDuplicateKey(body) {
		if host.Code(err) != host.ErrDuplicateKey {
			t.Fatalf("duplicate key in %q: got %v, want 40007", body, err)
		}
		return
	}
	if code := host.Code(err); err != nil && code != host.ErrSchema {
		t.Fatalf("encoding/json accepts %q, DecodePlant says %v", body, err)
	}
	want, ok := oraclePlant(body)
	if ok && (err != nil || p != want) || !ok && err == nil {
		t.Fatalf("oracle %+v (ok=%v), DecodePlant %+v, %v, for %q", want, ok, p, err, body)
	}
}

// oraclePlant decodes body with encoding/json and checks the NewPlant schema
// with math/big. ok=false: not a NewPlant. Numbers too long to judge
// cheaply (over 300 bytes) count as out of range, as DecodePlant must
// find them (any whole number with 20+ significant digits is).
func oraclePlant(body []byte) (host.Plant, bool) {
	d := json.NewDecoder(bytes.NewReader(body))
	d.UseNumber()
	var m map[string]any
	if d.Decode(&m) != nil || m == nil {
		return host.Plant{}, false
	}
	var p host.Plant
	num, ok := m["id"].(json.Number)
	if !ok || len(num) > 300 {
		return p, false
	}
	mant, exp, _ := strings.Cut(strings.ToLower(string(num)), "e")
	if len(strings.TrimLeft(strings.TrimLeft(exp, "+-"), "0")) > 3 { // |exponent| ≥ 1000: decide without big arithmetic
		if strings.Trim(mant, "-0.") == "" {
			return plantFields(m, 0)
		}
		return p, false // too big for int64, or not whole
	}
	x, _, e := big.ParseFloat(string(num), 10, 4000, big.ToNearestEven)
	if e != nil || !x.IsInt() {
		return p, false
	}
	id, acc := x.Int64()
	if acc != big.Exact {
		return p, false
	}
	if x.Sign() == 0 {
		id = 0
	}
	return plantFields(m, id)
}

// plantFields completes the oracle's plant with id: name and tag.
func plantFields(m map[string]any, id int64) (host.Plant, bool) {
	p := host.Plant{ID: id}
	var ok bool
	if p.Name, ok = m["name"].(string); !ok {
		return p, false
	}
	if tag, present := m["tag"]; present {
		if p.Tag, ok = tag.(string); !ok {
			return p, false
		}
		p.HasTag = true
	}
	return p, true
}

// hasDuplicateKey walks body with encoding/json's tokenizer, which keeps
// duplicates, and reports whether an object names a key twice. Numbers stay
// json.Number: as float64 the tokenizer stops at one out of range (1e700)
// and would miss a duplicate after it.
func hasDuplicateKey(body []byte) bool {
	d := json.NewDecoder(bytes.NewReader(body))
	d.UseNumber()
	type frame struct {
		keys     map[string]bool
		inObject bool
		wantKey  bool
	}
	var stack []*frame
	for {
		tok, err := d.Token()
		if err != nil {
			return false
		}
		var top *frame
		if len(stack) > 0 {
			top = stack[len(stack)-1]
		}
		if top != nil && top.inObject && top.wantKey {
			if s, ok := tok.(string); ok {
				if top.keys[s] {
					return true
				}
				top.keys[s] = true
				top.wantKey = false
				continue
			}
		}
		if top != nil && top.inObject && !top.wantKey {
			top.wantKey = true // this token (or the value it opens) is the value
		}
		switch tok {
		case json.Delim('{'):
			stack = append(stack, &frame{keys: map[string]bool{}, inObject: true, wantKey: true})
		case json.Delim('['):
			stack = append(stack, &frame{})
		case json.Delim('}'), json.Delim(']'):
			stack = stack[:len(stack)-1]
		}
	}
}

// FuzzParseBearer checks ParseBearer against a regular expression of RFC
// 6750's grammar, and that it never panics nor answers another code.
func FuzzParseBearer(f *testing.F) {
	for _, s := range []string{"Bearer abc", "bearer  a.b-c~d+e/f==", "Bearer", "Bearer ", "Basic x", "Bearer a b",
		"Bearer\tabc", " Bearer abc\t", "@@ x", "Bearer a=b", "Bearer ä", "", "Bearer a, Bearer b"} {
		f.Add(s, "", false)
	}
	f.Add("Bearer a", "Bearer b", true)
	f.Fuzz(func(t *testing.T, v1, v2 string, two bool) {
		values := [][]byte{[]byte(v1)}
		if two {
			values = append(values, []byte(v2))
		}
		tok, err := ParseBearer(values)
		m := bearerGrammar.FindStringSubmatch(v1)
		switch {
		case two:
			if host.Code(err) != host.ErrMalformedAuth {
				t.Fatalf("two fields: %q, %v", tok, err)
			}
		case m != nil:
			if err != nil || tok != m[1] {
				t.Fatalf("ParseBearer(%q) = %q, %v; grammar says %q", v1, tok, err, m[1])
			}
		default:
			if err == nil {
				t.Fatalf("ParseBearer(%q) = %q; the grammar refuses it", v1, tok)
			}
			if c := host.Code(err); c != host.ErrMalformedAuth && c != host.ErrMissingCredential {
				t.Fatalf("ParseBearer(%q) code %d", v1, c)
			}
			if strings.Contains(err.Error(), v1) && len(v1) > 8 {
				t.Fatalf("error echoes the header: %v", err)
			}
		}
	})
}

var bearerGrammar = regexp.MustCompile(`^[ \t]*(?i:bearer) +([A-Za-z0-9._~+/-]+=*)[ \t]*$`)
