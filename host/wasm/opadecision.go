package wasm

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/plantgate/plantgate/sdk/abi"
)

// An OPA entrypoint evaluates to a result set: [] when the rule is
// undefined, [{"result": value}] otherwise. The value is the decision:
//
//	true                                        allow
//	false                                       deny with the phase's first code
//	{"allow": true}                             allow ("message" may be given; it is ignored)
//	{"allow": false}                            deny with the phase's first code
//	{"allow": false, "code": N, "message": "…"} deny with code N
//
// An undefined result denies, never allows. Any other value, a key other
// than these, a code that is not an integer or a message that is not a
// string is an invalid decision (500, 50002), as is a code outside the
// phase's ranges (decide checks that for both kinds).

// opaAllowResult is the result set of an allow by true, the common answer.
var opaAllowResult = []byte(`[{"result":true}]`)

// phaseFirstCode is the code a deny without one takes: the first of the
// phase's ranges (abi.DenyRanges).
func phaseFirstCode(phase uint32) int32 {
	for _, status := range [...]int32{400, 401, 403, 429, 503} {
		if code := status*100 + abi.PluginCodeMin; abi.PhaseDenies(phase, code) {
			return code
		}
	}
	return 0
}

// decide turns an evaluation's result set into a Result: 0 to allow,
// otherwise 1 with the deny in o.decision.
func (o *opaInstance) decide(result []byte) (abi.Result, error) {
	if bytes.Equal(result, opaAllowResult) {
		return abi.ResultAllow, nil
	}
	var set []map[string]json.RawMessage
	if err := json.Unmarshal(result, &set); err != nil || len(set) > 1 {
		return 0, badDecision(fmt.Sprintf("%s returned %.200q, not a result set", opaExportEval, result), err)
	}
	if len(set) == 0 {
		return o.deny(o.firstCode, nil), nil // undefined: deny
	}
	v, ok := set[0]["result"]
	if !ok || len(set[0]) != 1 {
		return 0, badDecision(fmt.Sprintf("%s returned %.200q, not a result set", opaExportEval, result), nil)
	}
	switch string(v) {
	case "true":
		return abi.ResultAllow, nil
	case "false":
		return o.deny(o.firstCode, nil), nil
	}
	invalid := func(why string) error {
		return badDecision(fmt.Sprintf("%s evaluated to %.200s: %s; want true, false, {\"allow\": true} or {\"allow\": false, \"code\": N, \"message\": \"…\"}", o.entryName, v, why), nil)
	}
	var d map[string]json.RawMessage
	if err := json.Unmarshal(v, &d); err != nil {
		return 0, invalid("not a boolean or an object")
	}
	var allow bool
	if err := json.Unmarshal(d["allow"], &allow); err != nil || d["allow"] == nil {
		return 0, invalid(`"allow" must be true or false`)
	}
	var msg string
	if m, ok := d["message"]; ok {
		if len(m) == 0 || m[0] != '"' || json.Unmarshal(m, &msg) != nil {
			return 0, invalid(`"message" must be a string`)
		}
	}
	code := o.firstCode
	if c, ok := d["code"]; ok {
		if allow {
			return 0, invalid(`an allow has no "code"`)
		}
		n, err := strconv.ParseInt(string(c), 10, 32)
		if err != nil {
			return 0, invalid(`"code" must be an integer`)
		}
		code = int32(n)
	}
	for k := range d {
		if k != "allow" && k != "code" && k != "message" {
			return 0, invalid(fmt.Sprintf("unknown key %q", k))
		}
	}
	if allow {
		return abi.ResultAllow, nil
	}
	if len(msg) > abi.MaxText {
		return 0, invalid(fmt.Sprintf("a message of %d bytes, over the %d-byte maximum", len(msg), abi.MaxText))
	}
	return o.deny(code, []byte(msg)), nil
}

// deny records a deny for decision to read.
func (o *opaInstance) deny(code int32, msg []byte) abi.Result {
	o.text = append(o.text[:0], msg...)
	o.decision = abi.Decision{Verdict: abi.VerdictDeny, Code: code, Text: o.text}
	return 1
}
