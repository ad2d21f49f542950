package http

import (
	"strings"
	"testing"

	"github.com/plantgate/plantgate/host"
)

func TestDecodePlant(t *testing.T) {
	t.Parallel()
	ok := func(id int64, name string, tag ...string) host.Plant {
		p := host.Plant{ID: id, Name: name}
		if len(tag) > 0 {
			p.Tag, p.HasTag = tag[0], true
		}
		return p
	}
	tests := []struct {
		name string
		body string
		want host.Plant
		code int32
		msg  string
	}{
		{name: "minimal", body: `{"id":1,"name":"fern"}`, want: ok(1, "fern")},
		{name: "with tag", body: `{"id":2,"name":"fern","tag":"green"}`, want: ok(2, "fern", "green")},
		{name: "empty tag is a tag", body: `{"id":2,"name":"fern","tag":""}`, want: ok(2, "fern", "")},
		{name: "extra properties allowed", body: `{"id":3,"name":"a","x":{"y":[1,2,{"z":null}]},"w":true}`, want: ok(3, "a")},
		{name: "order free", body: `{"tag":"t","name":"n","id":4}`, want: ok(4, "n", "t")},
		{name: "1.0 is an integer", body: `{"id":1.0,"name":"a"}`, want: ok(1, "a")},
		{name: "1e3 is an integer", body: `{"id":1e3,"name":"a"}`, want: ok(1000, "a")},
		{name: "1E+3 is an integer", body: `{"id":1E+3,"name":"a"}`, want: ok(1000, "a")},
		{name: "12.50e1 is an integer", body: `{"id":12.50e1,"name":"a"}`, want: ok(125, "a")},
		{name: "-0 is zero", body: `{"id":-0,"name":"a"}`, want: ok(0, "a")},
		{name: "0e999999999999 is zero", body: `{"id":0e999999999999,"name":"a"}`, want: ok(0, "a")},
		{name: "max int64", body: `{"id":9223372036854775807,"name":"a"}`, want: ok(9223372036854775807, "a")},
		{name: "max int64 with fraction zero", body: `{"id":9223372036854775807.000,"name":"a"}`, want: ok(9223372036854775807, "a")},
		{name: "min int64", body: `{"id":-9223372036854775808,"name":"a"}`, want: ok(-9223372036854775808, "a")},
		{name: "escapes decoded", body: `{"id":1,"name":"a\u00e9\n\"b\""}`, want: ok(1, "aé\n\"b\"")},
		{name: "whitespace around", body: " \n{\"id\":1,\"name\":\"a\"}\r\n\t", want: ok(1, "a")},

		{name: "empty", body: ``, code: host.ErrEmptyBody, msg: "request body is empty; want a JSON NewPlant object"},
		{name: "only whitespace", body: "  ", code: host.ErrMalformedJSON, msg: "malformed JSON: unexpected end of input"},
		{name: "truncated", body: `{"id":1,"name":"a`, code: host.ErrMalformedJSON, msg: "malformed JSON: unexpected end of input"},
		{name: "invalid token", body: `{"id":1,"name":tru}`, code: host.ErrMalformedJSON, msg: "malformed JSON at byte 18"},
		{name: "trailing garbage", body: `{"id":1,"name":"a"}x`, code: host.ErrMalformedJSON, msg: "malformed JSON at byte 19"},
		{name: "two values", body: `{"id":1,"name":"a"} {}`, code: host.ErrMalformedJSON, msg: "malformed JSON: unexpected data after the top-level value at byte 19"},
		{name: "BOM", body: "\ufeff{\"id\":1,\"name\":\"a\"}", code: host.ErrMalformedJSON, msg: "malformed JSON at byte 0"},
		{name: "invalid UTF-8", body: "{\"id\":1,\"name\":\"a\xff\"}", code: host.ErrInvalidUTF8, msg: "request body is not valid UTF-8 (first invalid byte at offset 17)"},
		{name: "overlong UTF-8", body: "{\"id\":1,\"name\":\"\xc0\xaf\"}", code: host.ErrInvalidUTF8, msg: "request body is not valid UTF-8 (first invalid byte at offset 16)"},
		{name: "lone surrogate escape", body: `{"id":1,"name":"\ud800"}`, code: host.ErrMalformedJSON, msg: "malformed JSON at byte 16"},
		{name: "duplicate key top", body: `{"id":1,"id":2,"name":"a"}`, code: host.ErrDuplicateKey, msg: "malformed JSON: duplicate key in object at byte 8"},
		{name: "duplicate name", body: `{"id":1,"name":"a","name":"b"}`, code: host.ErrDuplicateKey, msg: "malformed JSON: duplicate key in object at byte 19"},
		{name: "duplicate key nested", body: `{"id":1,"name":"a","x":{"k":1,"k":2}}`, code: host.ErrDuplicateKey, msg: "malformed JSON: duplicate key in object at byte 30"},
		{name: "syntax error beats schema", body: `{"id":"x","name":"a",}`, code: host.ErrMalformedJSON, msg: "malformed JSON at byte 21"},

		{name: "array", body: `[1]`, code: host.ErrSchema, msg: "request body must be a JSON object, got array"},
		{name: "string", body: `"a"`, code: host.ErrSchema, msg: "request body must be a JSON object, got string"},
		{name: "null", body: `null`, code: host.ErrSchema, msg: "request body must be a JSON object, got null"},
		{name: "number", body: `12`, code: host.ErrSchema, msg: "request body must be a JSON object, got number"},
		{name: "missing id", body: `{"name":"a"}`, code: host.ErrSchema, msg: "id is required"},
		{name: "missing name", body: `{"id":1}`, code: host.ErrSchema, msg: "name is required"},
		{name: "id string", body: `{"id":"1","name":"a"}`, code: host.ErrSchema, msg: "id must be an integer, got string"},
		{name: "id null", body: `{"id":null,"name":"a"}`, code: host.ErrSchema, msg: "id must be an integer, got null"},
		{name: "id fraction", body: `{"id":1.5,"name":"a"}`, code: host.ErrSchema, msg: "id must be an integer, got 1.5"},
		{name: "id tiny exponent", body: `{"id":1e-1,"name":"a"}`, code: host.ErrSchema, msg: "id must be an integer, got 1e-1"},
		{name: "id max+1", body: `{"id":9223372036854775808,"name":"a"}`, code: host.ErrSchema, msg: "id must be between -9223372036854775808 and 9223372036854775807, got 9223372036854775808"},
		{name: "id min-1", body: `{"id":-9223372036854775809,"name":"a"}`, code: host.ErrSchema, msg: "id must be between -9223372036854775808 and 9223372036854775807, got -9223372036854775809"},
		{name: "id 1e400", body: `{"id":1e400,"name":"a"}`, code: host.ErrSchema, msg: "id must be between -9223372036854775808 and 9223372036854775807, got 1e400"},
		{name: "id 1e19", body: `{"id":1e19,"name":"a"}`, code: host.ErrSchema, msg: "id must be between -9223372036854775808 and 9223372036854775807, got 1e19"},
		{name: "name number", body: `{"id":1,"name":5}`, code: host.ErrSchema, msg: "name must be a string, got number"},
		{name: "name null", body: `{"id":1,"name":null}`, code: host.ErrSchema, msg: "name must be a string, got null"},
		{name: "tag null", body: `{"id":1,"name":"a","tag":null}`, code: host.ErrSchema, msg: "tag must be a string, got null"},
		{name: "tag object", body: `{"id":1,"name":"a","tag":{}}`, code: host.ErrSchema, msg: "tag must be a string, got object"},
		{name: "first schema error wins", body: `{"name":1,"id":"x"}`, code: host.ErrSchema, msg: "name must be a string, got number"},
		{name: "huge id is clipped", body: `{"id":` + strings.Repeat("9", 100) + `,"name":"a"}`, code: host.ErrSchema, msg: "id must be between -9223372036854775808 and 9223372036854775807, got " + strings.Repeat("9", 40) + "…"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, err := DecodePlant([]byte(tc.body))
			if tc.code == 0 {
				if err != nil {
					t.Fatalf("DecodePlant(%q) error %v", tc.body, err)
				}
				if got != tc.want {
					t.Fatalf("DecodePlant(%q) = %+v, want %+v", tc.body, got, tc.want)
				}
				return
			}
			e, ok := err.(*host.Error)
			if !ok {
				t.Fatalf("DecodePlant(%q) error %v (%T), want *host.Error %d", tc.body, err, err, tc.code)
			}
			if e.Code != tc.code || e.Message != tc.msg {
				t.Fatalf("DecodePlant(%q) = %d %q, want %d %q", tc.body, e.Code, e.Message, tc.code, tc.msg)
			}
		})
	}
}

func TestParseBearer(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		values []string
		want   string
		code   int32
	}{
		{name: "plain", values: []string{"Bearer abc"}, want: "abc"},
		{name: "scheme case-insensitive", values: []string{"bEaReR abc"}, want: "abc"},
		{name: "all token68 characters", values: []string{"Bearer aZ09-._~+/=="}, want: "aZ09-._~+/=="},
		{name: "several spaces allowed by RFC 6750", values: []string{"Bearer   abc"}, want: "abc"},
		{name: "surrounding whitespace", values: []string{" Bearer abc\t"}, want: "abc"},
		{name: "no header", values: nil, code: host.ErrMissingCredential},
		{name: "empty header", values: []string{""}, code: host.ErrMissingCredential},
		{name: "other scheme", values: []string{"Basic dXNlcjpwYXNz"}, code: host.ErrMissingCredential},
		{name: "scheme only", values: []string{"Bearer"}, code: host.ErrMalformedAuth},
		{name: "scheme and space", values: []string{"Bearer "}, code: host.ErrMalformedAuth},
		{name: "two tokens", values: []string{"Bearer a b"}, code: host.ErrMalformedAuth},
		{name: "comma list", values: []string{"Bearer a, Bearer b"}, code: host.ErrMalformedAuth},
		{name: "two headers", values: []string{"Bearer a", "Bearer b"}, code: host.ErrMalformedAuth},
		{name: "non-token68 character", values: []string{"Bearer a\"b"}, code: host.ErrMalformedAuth},
		{name: "padding in the middle", values: []string{"Bearer a=b"}, code: host.ErrMalformedAuth},
		{name: "only padding", values: []string{"Bearer ==="}, code: host.ErrMalformedAuth},
		{name: "tab separator", values: []string{"Bearer\tabc"}, code: host.ErrMalformedAuth},
		{name: "garbage scheme", values: []string{"@@@ abc"}, code: host.ErrMalformedAuth},
		{name: "non-ASCII token", values: []string{"Bearer äbc"}, code: host.ErrMalformedAuth},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var vals [][]byte
			for _, v := range tc.values {
				vals = append(vals, []byte(v))
			}
			got, err := ParseBearer(vals)
			if tc.code == 0 {
				if err != nil || got != tc.want {
					t.Fatalf("ParseBearer(%q) = %q, %v; want %q", tc.values, got, err, tc.want)
				}
				return
			}
			if c := host.Code(err); c != tc.code {
				t.Fatalf("ParseBearer(%q) code %d (%v), want %d", tc.values, c, err, tc.code)
			}
		})
	}
}
