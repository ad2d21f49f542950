package sdk

import (
	"strconv"

	"github.com/plantgate/plantgate/sdk/abi"
)

// Decision is a handler's answer: allow, deny with a code and message, or
// fault. Build one with [Allow], [AllowAs], [Deny], the named deny helpers
// such as [Unauthorized], or [Fault].
//
// # Notes
//
//   - The zero Decision is not an allow: the SDK reports it as a fault, so a
//     handler that forgets to decide fails closed.
//   - A Decision holds its text as given; the SDK copies it when it encodes
//     the decision, so text that aliases a request string is fine.
type Decision struct {
	kind kind
	code int32
	text string
	// hdr holds response headers as name, value pairs: one slot per name
	// of abi.ResponseHeaders, so adding one never allocates.
	hdr  [2 * len(abi.ResponseHeaders)]string
	nhdr uint8
}

// kind is a verdict plus one, so that the zero Decision is unset.
type kind uint8

const (
	unset kind = iota
	allowed
	denied
	faulted
)

// First plugin code of each status a plugin may deny with. A plugin picks its
// own codes in the same hundred (CodeUnauthorized+1 is 40151, and so on up to
// 99); see [abi.ValidDenyCode].
const (
	CodeBadRequest      int32 = 40050 // 400: the request breaks a rule
	CodeUnauthorized    int32 = 40150 // 401: no valid credential
	CodeForbidden       int32 = 40350 // 403: valid credential, not allowed
	CodeTooManyRequests int32 = 42950 // 429: rate limited
	CodeUnavailable     int32 = 50350 // 503: a dependency is down; retryable
)

// Allow allows the request. It is free: the host reads no memory for it.
func Allow() Decision { return Decision{kind: allowed} }

// AllowAs allows the request and names the principal it acts for, such as a
// token's name. The host logs it and hands it to the validate phase as
// [Plant.AllowedAs]. AllowAs("") is [Allow].
func AllowAs(principal string) Decision { return Decision{kind: allowed, text: principal} }

// Deny denies the request with code and a message the client sees. The
// HTTP status is code/100.
//
//	return sdk.Deny(40051, "name must not be empty") // 400
//
// # Notes
//
//   - code must satisfy [abi.ValidDenyCode]: its hundreds are 400, 401, 403,
//     429 or 503 and its last two digits 50–99 (00–49 belong to the host).
//     Any other code makes Deny return a [Fault] instead, so a typo fails
//     closed rather than allowing.
//   - A message longer than [abi.MaxText] bytes is cut at a character
//     boundary, and invalid UTF-8 in it becomes U+FFFD.
func Deny(code int32, message string) Decision {
	if !abi.ValidDenyCode(code) {
		return Fault("sdk: deny code " + strconv.Itoa(int(code)) +
			" is outside the plugin ranges " + abi.DenyRanges(0))
	}
	return Decision{kind: denied, code: code, text: message}
}

// BadRequest is Deny(CodeBadRequest, message): status 400.
func BadRequest(message string) Decision { return Deny(CodeBadRequest, message) }

// Unauthorized is Deny(CodeUnauthorized, message): status 401.
func Unauthorized(message string) Decision { return Deny(CodeUnauthorized, message) }

// Forbidden is Deny(CodeForbidden, message): status 403.
func Forbidden(message string) Decision { return Deny(CodeForbidden, message) }

// Unavailable is Deny(CodeUnavailable, message): status 503, which clients
// may retry.
func Unavailable(message string) Decision { return Deny(CodeUnavailable, message) }

// Fault reports that the plugin cannot decide, for example because its state
// is broken. The host fails closed (a 5xx the client sees without this text)
// and logs reason. The SDK also returns faults for panics and invalid denies.
func Fault(reason string) Decision { return Decision{kind: faulted, text: reason} }

// WithHeader returns d with the response header name set to value, for
// an allow or a deny (a fault ignores it). name must be one of
// [abi.ResponseHeaders] (Retry-After, RateLimit, RateLimit-Policy; any
// case) and value printable ASCII of at most abi.MaxHeaderValue bytes:
// anything else makes WithHeader return a [Fault], as the host would refuse
// the decision (500, error 50002). Setting a name again replaces its value.
//
//	return sdk.Deny(sdk.CodeTooManyRequests, "rate limit reached").
//		WithHeader("Retry-After", "1").
//		WithHeader("RateLimit", `"default";r=0;t=1`)
//
// It does not allocate.
func (d Decision) WithHeader(name, value string) Decision {
	if d.kind != allowed && d.kind != denied {
		return d
	}
	canon, ok := abi.ResponseHeader(name)
	if !ok {
		return Fault("sdk: response header " + strconv.Quote(name) + " is not allowed; see abi.ResponseHeaders")
	}
	if !headerValue(value) {
		return Fault("sdk: response header " + canon + " value must be 1 to 1024 bytes of printable ASCII")
	}
	for i := 0; i < int(d.nhdr); i++ {
		if d.hdr[2*i] == canon {
			d.hdr[2*i+1] = value
			return d
		}
	}
	d.hdr[2*d.nhdr], d.hdr[2*d.nhdr+1] = canon, value
	d.nhdr++
	return d
}

// Header returns the value d sets for the response header name, or "".
func (d Decision) Header(name string) string {
	canon, _ := abi.ResponseHeader(name)
	for i := 0; i < int(d.nhdr); i++ {
		if d.hdr[2*i] == canon {
			return d.hdr[2*i+1]
		}
	}
	return ""
}

func headerValue(v string) bool {
	if len(v) == 0 || len(v) > abi.MaxHeaderValue {
		return false
	}
	for i := 0; i < len(v); i++ {
		if v[i] < 0x20 || v[i] > 0x7E {
			return false
		}
	}
	return true
}

// Allowed reports whether d allows the request.
func (d Decision) Allowed() bool { return d.kind == allowed }

// Denied reports whether d denies the request with a code.
func (d Decision) Denied() bool { return d.kind == denied }

// Faulted reports whether d is a fault, including the zero Decision.
func (d Decision) Faulted() bool { return d.kind == faulted || d.kind == unset }

// Code returns the deny code, or 0 when d is not a deny.
func (d Decision) Code() int32 { return d.code }

// Message returns the deny message or the fault reason, else "".
func (d Decision) Message() string {
	if d.kind == unset {
		return zeroDecision
	}
	if d.kind == allowed {
		return ""
	}
	return d.text
}

// AllowedAs returns the text an allow names ([AllowAs]), else "".
func (d Decision) AllowedAs() string {
	if d.kind != allowed {
		return ""
	}
	return d.text
}

// Principal is [Decision.AllowedAs].
//
// Deprecated: the word principal is kept for who a request is from
// ([Principal], Request.Caller); use AllowedAs.
func (d Decision) Principal() string { return d.AllowedAs() }

// String describes d for test failures and logs: "allow", "allow as ci",
// "deny 40151: invalid token" or "fault: reason".
func (d Decision) String() string {
	switch d.kind {
	case allowed:
		if d.text == "" {
			return "allow"
		}
		return "allow as " + d.text
	case denied:
		return "deny " + strconv.Itoa(int(d.code)) + ": " + d.text
	default:
		return "fault: " + d.Message()
	}
}

const zeroDecision = "sdk: handler returned the zero Decision"
