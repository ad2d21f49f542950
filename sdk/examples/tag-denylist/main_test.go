package main

import (
	"testing"

	"github.com/plantgate/plantgate/sdk"
	"github.com/plantgate/plantgate/sdk/sdktest"
)

func TestTagDenylist(t *testing.T) {
	sdktest.Configure(t, `{"tags": ["weed", "Plastic"]}`)
	for _, c := range []struct {
		name  string
		plant sdk.Plant
		deny  string // "" allows
	}{
		{"no tag", sdk.Plant{ID: 1, Name: "Fern"}, ""},
		{"allowed tag", sdk.Plant{ID: 1, Name: "Fern", Tag: "green", HasTag: true}, ""},
		{"denied tag", sdk.Plant{ID: 1, Name: "Dandelion", Tag: "weed", HasTag: true}, `tag "weed" is not allowed`},
		{"case does not matter", sdk.Plant{ID: 1, Name: "Rose", Tag: "PLASTIC", HasTag: true}, `tag "Plastic" is not allowed`},
		{"a longer tag is another tag", sdk.Plant{ID: 1, Name: "Oak", Tag: "weeds", HasTag: true}, ""},
	} {
		d := sdktest.Validate(c.plant)
		switch {
		case c.deny == "" && !d.Allowed():
			t.Errorf("%s: got %v, want allow", c.name, d)
		case c.deny != "" && (!d.Denied() || d.Code() != 40070 || d.Message() != c.deny):
			t.Errorf("%s: got %v, want deny 40070 %q", c.name, d, c.deny)
		}
	}
}

func TestConfig(t *testing.T) {
	sdktest.Configure(t, `{"tags": ["weed"], "code": 40071}`)
	if d := sdktest.Validate(sdk.Plant{ID: 1, Name: "a", Tag: "weed", HasTag: true}); d.Code() != 40071 {
		t.Fatalf("got %v, want code 40071", d)
	}
	for config, want := range map[string]string{
		`{"tags": []}`:                   `tag-denylist config: "tags" must list at least one tag`,
		`{"tags": ["a"], "code": 40300}`: `tag-denylist config: "code" must be 40050-40099, got 40300`,
		`{"tag": ["a"]}`:                 `tag-denylist config: want {"tags": [...], "code": 40050-40099}: json: unknown field "tag"`,
	} {
		if err := sdktest.TryConfigure(config); err == nil || err.Error() != want {
			t.Errorf("%s: %v, want %s", config, err, want)
		}
	}
}
