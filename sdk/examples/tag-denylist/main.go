// Command tag-denylist is the worked example of the plugin author's guide
// (sdk/README.md): a validate-phase plugin that denies a plant whose tag is
// on a list taken from its config. It is not part of the bundled chain; an
// operator drops it in.
//
// Config (the sidecar's "config" value):
//
//	{"tags": ["weed", "plastic"], "code": 40070}
//
// "tags" is required and compared without regard to case; "code" is the
// deny code, 40050–40099 (a 400 Bad Request), 40070 when absent.
//
// Build: GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -o 30-tag-denylist.wasm ./sdk/examples/tag-denylist
package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/plantgate/plantgate/sdk"
)

// defaultCode is the deny code when the config names none.
const defaultCode int32 = 40070

// config is the plugin's configuration once checked.
type config struct {
	Tags []string `json:"tags"`
	Code *int32   `json:"code"`
}

// denied and code are set by configure, once per instance, before any
// request: handlers need no locks (an instance serves one call at a time).
var (
	denied []string
	code   = defaultCode
)

func init() {
	sdk.HandleConfigure(configure)
	sdk.HandleValidate(validate)
}

func main() {}

// validate allows without allocating; only a deny builds a message.
func validate(p sdk.Plant) sdk.Decision {
	if !p.HasTag {
		return sdk.Allow()
	}
	for _, t := range denied {
		if strings.EqualFold(p.Tag, t) {
			return sdk.Deny(code, fmt.Sprintf("tag %q is not allowed", t))
		}
	}
	return sdk.Allow()
}

// configure parses and checks the config; an error refuses the plugin at
// load, with this message in the operator's log.
func configure(raw []byte) error {
	var c config
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&c); err != nil {
		return fmt.Errorf("tag-denylist config: want {\"tags\": [...], \"code\": 40050-40099}: %w", err)
	}
	if len(c.Tags) == 0 {
		return errors.New("tag-denylist config: \"tags\" must list at least one tag")
	}
	code = defaultCode
	if c.Code != nil {
		if *c.Code < 40050 || *c.Code > 40099 {
			return fmt.Errorf("tag-denylist config: \"code\" must be 40050-40099, got %d", *c.Code)
		}
		code = *c.Code
	}
	denied = c.Tags
	sdk.Logf(sdk.LevelInfo, "denying %d tags", len(denied))
	return nil
}
