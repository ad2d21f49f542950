package jsonenc

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"
)

// TestAppendString pins the encoding byte for byte: stored plants are
// compared by their bytes, so a change here would turn a safe retry into a
// conflict for every plant stored before it.
func TestAppendString(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("Монстера 🌱 ", 500)
	tests := []struct {
		name, in, want string
	}{
		{"empty", "", `""`},
		{"plain", "Fern", `"Fern"`},
		{"quote and backslash", `a"b\c`, `"a\"b\\c"`},
		{"short escapes", "\b\f\n\r\t", `"\b\f\n\r\t"`},
		{"other controls", "\x00\x01\x0b\x1f", `"\u0000\u0001\u000b\u001f"`},
		{"DEL kept", "\x7f", "\"\x7f\""},
		{"line and paragraph separators kept", "\u2028\u2029", "\"\u2028\u2029\""},
		{"html characters kept", "</script>&<b>", `"</script>&<b>"`},
		{"slash kept", "a/b", `"a/b"`},
		{"invalid byte", "a\xffb", "\"a\uFFFDb\""},
		{"a run of invalid bytes is one replacement", "a\xff\xfe\xfdb", "\"a\uFFFDb\""},
		{"truncated sequence", "é\xe2\x82", "\"é\uFFFD\""},
		{"surrogate half", "\xed\xa0\x80", "\"\uFFFD\""},
		{"long non-ASCII", long, `"` + long + `"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			prefix := []byte("x:")
			got := AppendString(prefix, tt.in)
			if string(got) != "x:"+tt.want {
				t.Fatalf("AppendString(%q) = %q, want %q", tt.in, got[2:], tt.want)
			}
		})
	}
}

// FuzzAppendString: the output is one valid JSON string that decodes to the
// input (to its valid-UTF-8 form when the input is not valid).
func FuzzAppendString(f *testing.F) {
	f.Add("Fern")
	f.Add("a\"\\\x00\u2028<>&\x7f")
	f.Add("a\xff\xfeb")
	f.Fuzz(func(t *testing.T, s string) {
		enc := AppendString(nil, s)
		var back string
		if err := json.Unmarshal(enc, &back); err != nil {
			t.Fatalf("%q encodes to invalid JSON %q: %v", s, enc, err)
		}
		want := s
		if !utf8.ValidString(s) {
			want = strings.ToValidUTF8(s, "\uFFFD")
		}
		if back != want {
			t.Fatalf("%q encodes to %q, which decodes to %q", s, enc, back)
		}
	})
}

func BenchmarkAppendString(b *testing.B) {
	for _, c := range []struct{ name, s string }{
		{"ascii", "Monstera deliciosa"},
		{"non-ascii", "Монстера 🌱"},
		{"escapes", "line\none\t\"two\""},
	} {
		b.Run(c.name, func(b *testing.B) {
			buf := make([]byte, 0, 64)
			b.ReportAllocs()
			for b.Loop() {
				buf = AppendString(buf[:0], c.s)
			}
		})
	}
}
