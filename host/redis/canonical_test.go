package redis

import (
	"encoding/json"
	"math"
	"testing"
	"unicode/utf8"

	"github.com/plantgate/plantgate/host"
)

func TestAppendCanonical(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		p    host.Plant
		want string
	}{
		{"no tag", plant(1, "Fern"), `{"id":1,"name":"Fern"}`},
		{"tag", tagged(1, "Fern", "indoor"), `{"id":1,"name":"Fern","tag":"indoor"}`},
		{"empty tag", tagged(1, "Fern", ""), `{"id":1,"name":"Fern","tag":""}`},
		{"empty name", plant(0, ""), `{"id":0,"name":""}`},
		{"min id", plant(math.MinInt64, "x"), `{"id":-9223372036854775808,"name":"x"}`},
		{"max id", plant(math.MaxInt64, "x"), `{"id":9223372036854775807,"name":"x"}`},
		{"short escapes", plant(1, "\"\\\n\r\t\b\f"), `{"id":1,"name":"\"\\\n\r\t\b\f"}`},
		{"control", plant(1, "\x00\x1f"), `{"id":1,"name":"\u0000\u001f"}`},
		{"not escaped", plant(1, "</script>&\u2028\x7f/é🌱"), `{"id":1,"name":"</script>&` + "\u2028\x7f/é🌱" + `"}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := string(appendCanonical(nil, tt.p)); got != tt.want {
				t.Fatalf("appendCanonical = %s, want %s", got, tt.want)
			}
		})
	}
}

// FuzzAppendCanonical: the encoding is valid JSON that decodes back to the
// same plant, so equal encodings mean equal plants.
func FuzzAppendCanonical(f *testing.F) {
	f.Add(int64(1), "Fern", "indoor", true)
	f.Add(int64(-1), "a\"\\\x00\u2028", "", true)
	f.Add(int64(math.MinInt64), "", "ignored", false)
	f.Fuzz(func(t *testing.T, id int64, name, tag string, hasTag bool) {
		if !utf8.ValidString(name) || !utf8.ValidString(tag) {
			t.Skip("CreatePlant refuses invalid UTF-8")
		}
		p := host.Plant{ID: id, Name: name, Tag: tag, HasTag: hasTag}
		enc := appendCanonical(nil, p)
		var back struct {
			ID   int64   `json:"id"`
			Name string  `json:"name"`
			Tag  *string `json:"tag"`
		}
		if err := json.Unmarshal(enc, &back); err != nil {
			t.Fatalf("%s: %v", enc, err)
		}
		if back.ID != id || back.Name != name || (back.Tag != nil) != hasTag || (hasTag && *back.Tag != tag) {
			t.Fatalf("%s decodes to %+v, want %+v", enc, back, p)
		}
	})
}

func TestIndexMember(t *testing.T) {
	t.Parallel()
	tests := []struct {
		id   int64
		want string
	}{
		{math.MinInt64, "0000000000000000"},
		{math.MinInt64 + 1, "0000000000000001"},
		{-256, "7fffffffffffff00"},
		{-1, "7fffffffffffffff"},
		{0, "8000000000000000"},
		{1, "8000000000000001"},
		{255, "80000000000000ff"},
		{math.MaxInt64, "ffffffffffffffff"},
	}
	for _, tt := range tests {
		if got := indexMember(tt.id); got != tt.want {
			t.Errorf("indexMember(%d) = %s, want %s", tt.id, got, tt.want)
		}
	}
}

func TestSelector(t *testing.T) {
	t.Parallel()
	d := [32]byte{0x01, 0x23, 0x45, 0x67, 0x89, 0xab, 0xcd, 0xef, 0xff}
	if got := selector(d); got != "0123456789abcdef" {
		t.Fatalf("selector = %s", got)
	}
}

func TestOptionsDefault(t *testing.T) {
	t.Parallel()
	got := optionsDefault(Options{ReadTimeout: 5, MaxRetries: -3})
	want := DefaultOptions()
	want.ReadTimeout = 5
	if got != want {
		t.Fatalf("optionsDefault = %+v, want %+v", got, want)
	}
	// A caller's copy of the defaults is its own.
	mine := DefaultOptions()
	mine.KeyPrefix = "evil:"
	if got := optionsDefault(Options{}).KeyPrefix; got != "plantgate:" {
		t.Fatalf("default key prefix %q after a caller changed its copy", got)
	}
}
