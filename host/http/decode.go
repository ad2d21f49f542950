package http

import (
	"bytes"
	"errors"
	"io"
	"sync"
	"unicode/utf8"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/plantgate/plantgate/host"
)

// DecodePlant decodes a NewPlant body strictly into the canonical plant.
//
// Strict means one reading of the bytes that any JSON parser would share, so
// a policy plugin can never be shown a different plant than the one stored:
// invalid UTF-8, duplicate keys (at any depth), trailing data and lone
// surrogates are refused rather than repaired. The schema follows JSON Schema
// semantics: id is any number with zero fraction that fits int64 (1.0 and
// 1e3 included), name and tag are strings (null is not a string), and
// unknown properties are allowed and ignored.
//
// Syntax errors win over schema errors: a body is reported as not a NewPlant
// (ErrSchema) only when it is well-formed JSON. ReadValue checks the whole
// value first (duplicates included), so the walk below meets no syntax error.
func DecodePlant(body []byte) (host.Plant, error) {
	var p host.Plant
	if len(body) == 0 {
		return p, &host.Error{Code: host.ErrEmptyBody, Message: "request body is empty; want a JSON NewPlant object"}
	}
	if !utf8.Valid(body) {
		return p, host.Errorf(host.ErrInvalidUTF8, "request body is not valid UTF-8 (first invalid byte at offset %d)", invalidUTF8At(body))
	}
	pd := decoders.Get().(*plantDecoder)
	defer pd.release()
	d := pd.reset(body)
	top, err := d.ReadValue()
	if err != nil {
		return p, syntaxError(err)
	}
	kind := top.Kind() // top is voided by the next call
	if err := drain(d); err != nil {
		return p, err
	}
	if kind != '{' {
		return p, host.Errorf(host.ErrSchema, "request body must be a JSON object, got %s", kindName(kind))
	}
	// The body is one well-formed object now; walk it.
	d = pd.reset(body)
	if _, err := d.ReadToken(); err != nil {
		return p, syntaxError(err)
	}
	var schema *host.Error // first schema violation, reported if the JSON is well-formed
	var hasID, hasName bool
	for d.PeekKind() != '}' {
		name, err := d.ReadValue()
		if err != nil {
			return p, syntaxError(err)
		}
		var buf [8]byte
		field := string(unquote(buf[:0], name)) // no allocation: compared, never kept
		var which int
		switch field {
		case "id":
			which = 1
		case "name":
			which = 2
		case "tag":
			which = 3
		default:
			if err := d.SkipValue(); err != nil {
				return p, syntaxError(err)
			}
			continue
		}
		v, err := d.ReadValue()
		if err != nil {
			return p, syntaxError(err)
		}
		if schema != nil {
			continue // keep the first violation; the rest is already known well-formed
		}
		switch which {
		case 1:
			hasID = true
			p.ID, schema = decodeID(v)
		case 2:
			hasName = true
			p.Name, schema = decodeString("name", v)
		case 3:
			p.HasTag = true
			p.Tag, schema = decodeString("tag", v)
		}
	}
	switch {
	case schema != nil:
		return p, schema
	case !hasID:
		return p, &host.Error{Code: host.ErrSchema, Message: "id is required"}
	case !hasName:
		return p, &host.Error{Code: host.ErrSchema, Message: "name is required"}
	}
	return p, nil
}

// drain refuses anything after the top-level value: a body is exactly one
// JSON value.
func drain(d *jsontext.Decoder) error {
	off := d.InputOffset()
	if _, err := d.ReadToken(); err != io.EOF {
		if err != nil {
			return syntaxError(err)
		}
		return host.Errorf(host.ErrMalformedJSON, "malformed JSON: unexpected data after the top-level value at byte %d", off)
	}
	return nil
}

// plantDecoder is a pooled decoder reading a body in place (a bytes.Buffer
// is read without a copy): a fresh decoder and its state cost a create a
// dozen allocations.
type plantDecoder struct {
	d   *jsontext.Decoder
	buf bytes.Buffer
}

var decoders = sync.Pool{New: func() any {
	pd := &plantDecoder{}
	pd.d = jsontext.NewDecoder(&pd.buf)
	return pd
}}

// reset points the decoder at the start of body.
func (pd *plantDecoder) reset(body []byte) *jsontext.Decoder {
	pd.buf = *bytes.NewBuffer(body)
	pd.d.Reset(&pd.buf)
	return pd.d
}

// release returns the decoder to the pool, holding no request's bytes.
func (pd *plantDecoder) release() {
	pd.reset(nil)
	decoders.Put(pd)
}

// unquote appends the value of the JSON string v (already validated by the
// decoder) to dst, or returns v's contents when it has no escape: no copy.
func unquote(dst []byte, v jsontext.Value) []byte {
	if bytes.IndexByte(v, '\\') < 0 {
		return v[1 : len(v)-1]
	}
	u, err := jsontext.AppendUnquote(dst, v)
	if err != nil { // cannot happen: the decoder validated the string
		return nil
	}
	return u
}

func decodeString(field string, v jsontext.Value) (string, *host.Error) {
	if v.Kind() != '"' {
		return "", host.Errorf(host.ErrSchema, "%s must be a string, got %s", field, kindName(v.Kind()))
	}
	var buf [64]byte
	return string(unquote(buf[:0], v)), nil
}

func decodeID(v jsontext.Value) (int64, *host.Error) {
	if v.Kind() != '0' {
		return 0, host.Errorf(host.ErrSchema, "id must be an integer, got %s", kindName(v.Kind()))
	}
	id, ok, inRange := exactInt64(v)
	switch {
	case !ok:
		return 0, host.Errorf(host.ErrSchema, "id must be an integer, got %s", clip(string(v), 40))
	case !inRange:
		return 0, host.Errorf(host.ErrSchema, "id must be between -9223372036854775808 and 9223372036854775807, got %s", clip(string(v), 40))
	}
	return id, nil
}

// exactInt64 reads a JSON number (already validated by the decoder) and
// reports whether its value is a whole number and whether it fits int64.
// It works on the decimal digits, so 1e3, 1.0 and 9223372036854775807.0 are
// exact and 1e400 or a million-digit number cost no more than their length.
// No library offers this exact check without big-number arithmetic that an
// exponent like 1e999999999 would make expensive, so it is written here.
func exactInt64(num []byte) (v int64, whole, inRange bool) {
	neg := num[0] == '-'
	if neg {
		num = num[1:]
	}
	var digits [32]byte // a usual id's digits fit: no allocation
	mant := digits[:0]  // significant digits, integer and fraction parts joined
	exp := 0            // power of ten applied to mant
	i := 0
	for ; i < len(num) && num[i] >= '0' && num[i] <= '9'; i++ {
	}
	mant = append(mant, num[:i]...)
	if i < len(num) && num[i] == '.' {
		j := i + 1
		for ; j < len(num) && num[j] >= '0' && num[j] <= '9'; j++ {
		}
		mant = append(mant, num[i+1:j]...)
		exp -= j - i - 1
		i = j
	}
	if i < len(num) && (num[i] == 'e' || num[i] == 'E') {
		i++
		eneg := false
		if num[i] == '+' || num[i] == '-' {
			eneg = num[i] == '-'
			i++
		}
		e := 0
		for ; i < len(num); i++ {
			if e < 1e9 { // saturate: anything past this is out of range or zero anyway
				e = e*10 + int(num[i]-'0')
			}
		}
		if eneg {
			e = -e
		}
		exp += e
	}
	for len(mant) > 0 && mant[0] == '0' {
		mant = mant[1:]
	}
	for len(mant) > 0 && mant[len(mant)-1] == '0' {
		mant = mant[:len(mant)-1]
		exp++
	}
	if len(mant) == 0 {
		return 0, true, true // zero in any spelling, -0 included
	}
	if exp < 0 {
		return 0, false, false
	}
	if len(mant)+exp > 19 {
		return 0, true, false
	}
	var u uint64
	for _, c := range mant {
		u = u*10 + uint64(c-'0')
	}
	for ; exp > 0; exp-- {
		u *= 10 // at most 19 digits in all: fits uint64
	}
	const limit = 1 << 63
	switch {
	case neg && u <= limit:
		return int64(-u), true, true // -(1<<63) wraps to MinInt64 exactly
	case !neg && u < limit:
		return int64(u), true, true
	}
	return 0, true, false
}

func syntaxError(err error) *host.Error {
	var se *jsontext.SyntacticError
	off := int64(-1)
	if errors.As(err, &se) {
		off = se.ByteOffset
	}
	switch {
	case errors.Is(err, jsontext.ErrDuplicateName):
		return host.Errorf(host.ErrDuplicateKey, "malformed JSON: duplicate key in object at byte %d", off)
	case errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF):
		return &host.Error{Code: host.ErrMalformedJSON, Message: "malformed JSON: unexpected end of input"}
	case off >= 0:
		return host.Errorf(host.ErrMalformedJSON, "malformed JSON at byte %d", off)
	}
	return &host.Error{Code: host.ErrMalformedJSON, Message: "malformed JSON"}
}

func kindName(k jsontext.Kind) string {
	switch k {
	case '{':
		return "object"
	case '[':
		return "array"
	case '"':
		return "string"
	case '0':
		return "number"
	case 't', 'f':
		return "boolean"
	case 'n':
		return "null"
	}
	return "invalid"
}

func invalidUTF8At(b []byte) int {
	for i := 0; i < len(b); {
		r, n := utf8.DecodeRune(b[i:])
		if r == utf8.RuneError && n <= 1 {
			return i
		}
		i += n
	}
	return -1
}

// clip shortens s for an error message so a huge number is not echoed whole.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
