// Command plant-rules is a validate-phase plugin that checks a plant's id,
// name and tag against configurable bounds.
//
// The rules, checked in this order (the first that fails decides):
//
//	code   rule (defaults)
//	40050  id is at least id_min (1)
//	40052  name has no control characters (unless allow_control)
//	40051  name has name_min–name_max (1–100) characters after trimming spaces
//	40054  tag has no control characters (unless allow_control), when present
//	40053  tag has tag_min–tag_max (1–50) characters after trimming, when present
//
// Characters are Unicode code points; trimming removes leading and trailing
// white space (strings.TrimSpace). Control characters (unicode.IsControl) are
// looked for in the whole value, as it would be stored.
//
// Config, every key optional:
//
//	{"name_min": 1, "name_max": 100, "tag_min": 1, "tag_max": 50, "id_min": 1, "allow_control": false}
//
// Build: GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -o plant-rules.wasm ./plugins/plant-rules
package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/plantgate/plantgate/sdk"
)

// Deny codes, one per rule (status 400).
const (
	codeID          int32 = 40050
	codeNameLength  int32 = 40051
	codeNameControl int32 = 40052
	codeTagLength   int32 = 40053
	codeTagControl  int32 = 40054
)

// config holds the bounds; every bound is inclusive.
type config struct {
	NameMin, NameMax int64
	TagMin, TagMax   int64
	IDMin            int64
	AllowControl     bool
}

var configDefault = config{NameMin: 1, NameMax: 100, TagMin: 1, TagMax: 50, IDMin: 1}

// cfg is the config in force; configure replaces it.
var cfg = configDefault

func init() {
	sdk.HandleConfigure(configure)
	sdk.HandleValidate(validate)
}

func main() {}

// validate applies the rules. The allow path does not allocate; messages
// are built only when denying.
func validate(p sdk.Plant) sdk.Decision {
	if p.ID < cfg.IDMin {
		return sdk.Deny(codeID, fmt.Sprintf("id must be at least %d, got %d", cfg.IDMin, p.ID))
	}
	if d, ok := check("name", p.Name, cfg.NameMin, cfg.NameMax, codeNameLength, codeNameControl); !ok {
		return d
	}
	if p.HasTag {
		if d, ok := check("tag", p.Tag, cfg.TagMin, cfg.TagMax, codeTagLength, codeTagControl); !ok {
			return d
		}
	}
	return sdk.Allow()
}

// check applies the control-character and length rules to one field.
func check(field, s string, lo, hi int64, codeLength, codeControl int32) (sdk.Decision, bool) {
	if printable(s) {
		// The usual field: no control characters, one character per byte,
		// and only spaces to trim.
		i, j := 0, len(s)
		for i < j && s[i] == ' ' {
			i++
		}
		for j > i && s[j-1] == ' ' {
			j--
		}
		if n := int64(j - i); n >= lo && n <= hi {
			return sdk.Decision{}, true
		}
	}
	if !cfg.AllowControl {
		for i, r := range s {
			if unicode.IsControl(r) {
				return sdk.Deny(codeControl, fmt.Sprintf("%s must not contain control characters, found %U at character %d",
					field, r, utf8.RuneCountInString(s[:i])+1)), false
			}
		}
	}
	if n := int64(utf8.RuneCountInString(strings.TrimSpace(s))); n < lo || n > hi {
		if lo == hi {
			return sdk.Deny(codeLength, fmt.Sprintf("%s must be exactly %d characters after trimming, got %d", field, lo, n)), false
		}
		return sdk.Deny(codeLength, fmt.Sprintf("%s must be %d–%d characters after trimming, got %d", field, lo, hi, n)), false
	}
	return sdk.Decision{}, true
}

// configure reads the config over the defaults and checks the bounds.
// printable reports whether s is all printable ASCII (0x20–0x7e), eight
// bytes at a time. With the host's deadline enforcement on, every loop
// iteration in the guest leaves native code for a check, so the common
// field is vetted in a few iterations instead of two or three per
// character; anything else takes the general path.
func printable(s string) bool {
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	for ; len(s) >= 8; s = s[8:] {
		w := uint64(s[0]) | uint64(s[1])<<8 | uint64(s[2])<<16 | uint64(s[3])<<24 |
			uint64(s[4])<<32 | uint64(s[5])<<40 | uint64(s[6])<<48 | uint64(s[7])<<56
		// A byte ≥ 0x80; a byte < 0x20 (exact for any bound ≤ 0x80); with
		// every byte < 0x80, adding 1 carries a 0x7f into the high bit.
		if w&highs != 0 || (w-0x20*ones)&^w&highs != 0 || (w+ones)&highs != 0 {
			return false
		}
	}
	for i := 0; i < len(s); i++ {
		if s[i] < 0x20 || s[i] > 0x7e {
			return false
		}
	}
	return true
}

func configure(raw []byte) error {
	c, err := parseConfig(raw)
	if err != nil {
		return fmt.Errorf("plant-rules config: %w", err)
	}
	cfg = c
	return nil
}

func parseConfig(raw []byte) (config, error) {
	c := configDefault
	if raw = bytes.TrimSpace(raw); len(raw) == 0 || string(raw) == "null" {
		return c, nil
	}
	var keys map[string]json.RawMessage
	if err := json.Unmarshal(raw, &keys); err != nil {
		return c, fmt.Errorf("want a JSON object: %w", err)
	}
	fields := map[string]*int64{
		"name_min": &c.NameMin, "name_max": &c.NameMax,
		"tag_min": &c.TagMin, "tag_max": &c.TagMax,
		"id_min": &c.IDMin,
	}
	// Sorted, so the first error reported does not depend on map order.
	for _, k := range slices.Sorted(maps.Keys(keys)) {
		v := keys[k]
		if k == "allow_control" {
			if string(v) != "true" && string(v) != "false" {
				return c, fmt.Errorf("allow_control must be true or false, got %s", v)
			}
			c.AllowControl = string(v) == "true"
			continue
		}
		p, ok := fields[k]
		if !ok {
			return c, fmt.Errorf("unknown key %q (known: allow_control, id_min, name_max, name_min, tag_max, tag_min)", k)
		}
		if err := json.Unmarshal(v, p); err != nil || string(v) == "null" || *p < 0 {
			return c, fmt.Errorf("%s must be an integer ≥ 0, got %s", k, v)
		}
	}
	if c.NameMin > c.NameMax {
		return c, fmt.Errorf("name_min (%d) must not exceed name_max (%d)", c.NameMin, c.NameMax)
	}
	if c.TagMin > c.TagMax {
		return c, fmt.Errorf("tag_min (%d) must not exceed tag_max (%d)", c.TagMin, c.TagMax)
	}
	return c, nil
}
