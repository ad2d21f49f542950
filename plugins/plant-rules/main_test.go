package main

import (
	"strings"
	"testing"

	"github.com/plantgate/plantgate/sdk"
	"github.com/plantgate/plantgate/sdk/sdktest"
)

type validateCase struct {
	name    string
	plant   sdk.Plant
	code    int32 // 0: allow
	message string
}

func runValidate(t *testing.T, tests []validateCase) {
	t.Helper()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			d := sdktest.Validate(tt.plant)
			switch {
			case tt.code == 0 && !d.Allowed():
				t.Errorf("got %v, want allow", d)
			case tt.code != 0 && (!d.Denied() || d.Code() != tt.code || d.Message() != tt.message):
				t.Errorf("got %v, want deny %d: %s", d, tt.code, tt.message)
			}
		})
	}
}

func TestDefaults(t *testing.T) {
	sdktest.Configure(t, "")
	runValidate(t, []validateCase{
		{name: "minimal", plant: sdk.Plant{ID: 1, Name: "f"}},
		{name: "tagged", plant: sdk.Plant{ID: 9223372036854775807, Name: "Fern", Tag: "green", HasTag: true}},
		{name: "name of 100 runes", plant: sdk.Plant{ID: 1, Name: strings.Repeat("é", 100)}},
		{name: "spaces around count nothing", plant: sdk.Plant{ID: 1, Name: "  " + strings.Repeat("a", 100) + " \u3000"}},
		{name: "tag of 50 runes", plant: sdk.Plant{ID: 1, Name: "a", Tag: strings.Repeat("✿", 50), HasTag: true}},
		{name: "absent tag is not checked", plant: sdk.Plant{ID: 1, Name: "a", Tag: "", HasTag: false}},
		{name: "principal is ignored", plant: sdk.Plant{ID: 1, Name: "a", Principal: "ci"}},

		{name: "id zero", plant: sdk.Plant{ID: 0, Name: "a"}, code: 40050, message: "id must be at least 1, got 0"},
		{name: "id negative", plant: sdk.Plant{ID: -5, Name: "a"}, code: 40050, message: "id must be at least 1, got -5"},
		{name: "empty name", plant: sdk.Plant{ID: 1, Name: ""}, code: 40051, message: "name must be 1–100 characters after trimming, got 0"},
		{name: "blank name", plant: sdk.Plant{ID: 1, Name: "   "}, code: 40051, message: "name must be 1–100 characters after trimming, got 0"},
		{name: "name of 101 runes", plant: sdk.Plant{ID: 1, Name: strings.Repeat("é", 101)}, code: 40051, message: "name must be 1–100 characters after trimming, got 101"},
		{name: "control in name", plant: sdk.Plant{ID: 1, Name: "fé\x00rn"}, code: 40052, message: "name must not contain control characters, found U+0000 at character 3"},
		{name: "trailing newline in name", plant: sdk.Plant{ID: 1, Name: "fern\n"}, code: 40052, message: "name must not contain control characters, found U+000A at character 5"},
		{name: "tab is a control character", plant: sdk.Plant{ID: 1, Name: "\tfern"}, code: 40052, message: "name must not contain control characters, found U+0009 at character 1"},
		{name: "C1 control in name", plant: sdk.Plant{ID: 1, Name: "a\u0085"}, code: 40052, message: "name must not contain control characters, found U+0085 at character 2"},
		{name: "present empty tag", plant: sdk.Plant{ID: 1, Name: "a", Tag: "", HasTag: true}, code: 40053, message: "tag must be 1–50 characters after trimming, got 0"},
		{name: "tag of 51 runes", plant: sdk.Plant{ID: 1, Name: "a", Tag: strings.Repeat("t", 51), HasTag: true}, code: 40053, message: "tag must be 1–50 characters after trimming, got 51"},
		{name: "control in tag", plant: sdk.Plant{ID: 1, Name: "a", Tag: "\x7f", HasTag: true}, code: 40054, message: "tag must not contain control characters, found U+007F at character 1"},
		{name: "id is checked first", plant: sdk.Plant{ID: 0, Name: "", Tag: "", HasTag: true}, code: 40050, message: "id must be at least 1, got 0"},
		{name: "name before tag", plant: sdk.Plant{ID: 1, Name: "", Tag: "", HasTag: true}, code: 40051, message: "name must be 1–100 characters after trimming, got 0"},
	})
}

func TestConfigured(t *testing.T) {
	sdktest.Configure(t, `{"name_min": 3, "name_max": 5, "tag_min": 0, "tag_max": 2, "id_min": 10, "allow_control": true}`)
	t.Cleanup(func() { sdktest.Configure(t, "") })
	runValidate(t, []validateCase{
		{name: "in bounds", plant: sdk.Plant{ID: 10, Name: "abc", Tag: "", HasTag: true}},
		{name: "controls allowed", plant: sdk.Plant{ID: 10, Name: "a\x00b\n", Tag: "\t", HasTag: true}},
		{name: "id below", plant: sdk.Plant{ID: 9, Name: "abc"}, code: 40050, message: "id must be at least 10, got 9"},
		{name: "name short", plant: sdk.Plant{ID: 10, Name: "ab"}, code: 40051, message: "name must be 3–5 characters after trimming, got 2"},
		{name: "name long", plant: sdk.Plant{ID: 10, Name: "abcdef"}, code: 40051, message: "name must be 3–5 characters after trimming, got 6"},
		{name: "tag long", plant: sdk.Plant{ID: 10, Name: "abc", Tag: "abc", HasTag: true}, code: 40053, message: "tag must be 0–2 characters after trimming, got 3"},
	})
}

func TestExactLength(t *testing.T) {
	sdktest.Configure(t, `{"tag_min": 2, "tag_max": 2}`)
	t.Cleanup(func() { sdktest.Configure(t, "") })
	runValidate(t, []validateCase{
		{name: "exact", plant: sdk.Plant{ID: 1, Name: "a", Tag: "ab", HasTag: true}},
		{name: "other", plant: sdk.Plant{ID: 1, Name: "a", Tag: "abc", HasTag: true}, code: 40053, message: "tag must be exactly 2 characters after trimming, got 3"},
	})
}

func TestConfigErrors(t *testing.T) {
	t.Cleanup(func() { sdktest.Configure(t, "") })
	tests := []struct {
		name, config, want string
	}{
		{"unknown key", `{"name_min": 1, "colour": "green"}`,
			`plant-rules config: unknown key "colour" (known: allow_control, id_min, name_max, name_min, tag_max, tag_min)`},
		{"not an object", `[1]`,
			"plant-rules config: want a JSON object: json: cannot unmarshal array into Go value of type map[string]json.RawMessage"},
		{"malformed", `{"name_min": }`,
			"plant-rules config: want a JSON object: invalid character '}' looking for beginning of value"},
		{"negative", `{"name_min": -1}`, "plant-rules config: name_min must be an integer ≥ 0, got -1"},
		{"negative id", `{"id_min": -1}`, "plant-rules config: id_min must be an integer ≥ 0, got -1"},
		{"fraction", `{"tag_max": 1.5}`, "plant-rules config: tag_max must be an integer ≥ 0, got 1.5"},
		{"string", `{"name_max": "10"}`, `plant-rules config: name_max must be an integer ≥ 0, got "10"`},
		{"null", `{"name_max": null}`, "plant-rules config: name_max must be an integer ≥ 0, got null"},
		{"name min over max", `{"name_min": 10, "name_max": 5}`, "plant-rules config: name_min (10) must not exceed name_max (5)"},
		{"default max under min", `{"name_min": 101}`, "plant-rules config: name_min (101) must not exceed name_max (100)"},
		{"tag min over max", `{"tag_min": 3, "tag_max": 2}`, "plant-rules config: tag_min (3) must not exceed tag_max (2)"},
		{"allow_control not bool", `{"allow_control": 1}`, "plant-rules config: allow_control must be true or false, got 1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := sdktest.TryConfigure(tt.config)
			if err == nil || err.Error() != tt.want {
				t.Errorf("TryConfigure(%s) = %v\nwant %s", tt.config, err, tt.want)
			}
		})
	}
	// A rejected config leaves the one in force alone.
	if d := sdktest.Validate(sdk.Plant{ID: 1, Name: "a"}); !d.Allowed() {
		t.Errorf("after rejected configs: %v", d)
	}
}

func TestConfigAccepted(t *testing.T) {
	t.Cleanup(func() { sdktest.Configure(t, "") })
	for _, config := range []string{"", " ", "null", "{}", `{"allow_control": false}`, `{"name_min": 0, "name_max": 0}`} {
		if err := sdktest.TryConfigure(config); err != nil {
			t.Errorf("TryConfigure(%q) = %v", config, err)
		}
	}
}

func TestPhases(t *testing.T) {
	if got := sdktest.Phases(); got != 2 {
		t.Errorf("phases = %#b, want validate only", got)
	}
}

func TestAllowDoesNotAllocate(t *testing.T) {
	sdktest.Configure(t, "")
	p := sdk.Plant{ID: 1, Name: "  Monstera deliciosa  ", Tag: "tropical", HasTag: true}
	if n := testing.AllocsPerRun(1000, func() { validate(p) }); n != 0 {
		t.Errorf("validate allocates %v times on allow, want 0", n)
	}
}

// TestPrintable checks the eight-bytes-at-a-time test against the plain
// definition for every byte value at every position of strings up to 17
// bytes long, and a fast-path field against the general path's answer.
func TestPrintable(t *testing.T) {
	slow := func(s string) bool {
		for i := 0; i < len(s); i++ {
			if s[i] < 0x20 || s[i] > 0x7e {
				return false
			}
		}
		return true
	}
	for n := 1; n <= 17; n++ {
		for pos := 0; pos < n; pos++ {
			for c := 0; c < 256; c++ {
				b := []byte(strings.Repeat("a", n))
				b[pos] = byte(c)
				if got, want := printable(string(b)), slow(string(b)); got != want {
					t.Fatalf("printable(%q) = %v, want %v", b, got, want)
				}
			}
		}
	}
	if !printable("") || !printable(" ~ Monstera deliciosa ~ ") {
		t.Fatal("printable ASCII refused")
	}
}
