package console

import (
	"bytes"
	"encoding/json"
	"regexp"
)

// Masked stands in for a config value the console does not show.
const Masked = "•••"

// secretKey matches the config keys whose values are masked, whatever
// their type (a nested object under "auth" is masked whole). It errs on
// the side of hiding: "monkey" is masked too.
var secretKey = regexp.MustCompile(`(?i)secret|token|passw|pwd|key|credential|auth|private|cookie|session|signature|salt|cert`)

// MaskConfig returns a plugin's sidecar config as the console shows it:
// indented JSON with the value of every key matching secretKey replaced by
// Masked. A config that is a bare string is masked too, as no key says
// what it is; one that is not JSON is not shown at all.
func MaskConfig(config []byte) string {
	if config == nil {
		return ""
	}
	dec := json.NewDecoder(bytes.NewReader(config))
	dec.UseNumber() // 12345678901234567890 stays as written
	var v any
	if err := dec.Decode(&v); err != nil {
		return Masked
	}
	if _, ok := v.(string); ok {
		return Masked
	}
	out, err := json.MarshalIndent(mask(v), "", "  ")
	if err != nil {
		return Masked
	}
	return string(out)
}

func mask(v any) any {
	switch v := v.(type) {
	case map[string]any:
		for k, e := range v {
			if secretKey.MatchString(k) {
				v[k] = Masked
			} else {
				v[k] = mask(e)
			}
		}
	case []any:
		for i, e := range v {
			v[i] = mask(e)
		}
	}
	return v
}
