package sdk

import (
	"crypto/sha256"
	"strings"

	"github.com/plantgate/plantgate/sdk/abi"
)

// Request is what the authorize phase sees: the request line, the
// operation it asks for and the bearer credential, before the host reads
// the body.
//
// Its strings alias the SDK's request buffer and are valid only until the
// handler returns; copy one with strings.Clone to keep it.
type Request struct {
	Method     string // "DELETE"
	Path       string // "/plants/42"
	Credential string // the bearer token as sent, "" when there is none; never log it

	// Route is the operation asked for: the method and the path template of
	// the OpenAPI document, one of "GET /plants", "POST /plants",
	// "GET /plants/{id}" and "DELETE /plants/{id}" (a HEAD request names
	// the GET route). Key a policy on it rather than on Path. A host older
	// than this field sends "".
	Route string
	// PathID is the plant id of a /plants/{id} path, when HasPathID. A path
	// whose {id} is not an int64 has none; the host refuses it with a 400
	// after the authorize phase allows.
	PathID    int64
	HasPathID bool

	// RequestID is the X-Request-ID the gateway gave the request (and
	// answers with): log it to tie a decision to the access log.
	RequestID string
	// Client is the client's IP address, "192.0.2.7" or "2001:db8::1".
	Client string
	// Caller is who the request is from once a token lookup of its
	// credential found the token valid, by this plugin or an earlier one of
	// the chain: a plugin after bearer-auth sees the token's name and
	// scopes here without looking the token up again. Zero before that.
	Caller Principal

	digest  []byte // the host's SHA-256 of Credential, aliasing the request buffer; nil when it sent none
	headers []byte // the abi header block: the headers the sidecar asks for
}

// Principal is who a request is from: a valid token's name and scopes.
type Principal struct {
	Name   string // "" when no principal is established
	Scopes string // space-separated
}

// HasScope reports whether scope is one of p's scopes. It does not
// allocate.
func (p Principal) HasScope(scope string) bool { return hasScope(p.Scopes, scope) }

// Header returns the value of the request header name (in any case), as
// sent, and whether the request had it. The plugin sees only the headers
// its sidecar asks for, so a header it did not ask for is never there:
//
//	{"headers": ["X-Tenant"]}
//
// A value over abi.MaxHeaderValue bytes is cut. It does not allocate.
func (r Request) Header(name string) (string, bool) {
	for b := r.headers; len(b) > 0; {
		n, v, rest, ok := abi.NextHeader(b)
		if !ok {
			return "", false
		}
		if strings.EqualFold(borrow(n), name) {
			return borrow(v), true
		}
		b = rest
	}
	return "", false
}

// CredentialDigest returns the SHA-256 digest of Credential: the key
// [LookupToken] takes. The host sends it with the request, so asking costs
// a copy; only with a host that does not (or for a Request built by hand)
// is it computed here, which in a WebAssembly guest costs more than the
// rest of a typical authorize call.
func (r Request) CredentialDigest() [abi.DigestSize]byte {
	var d [abi.DigestSize]byte
	if len(r.digest) == abi.DigestSize {
		copy(d[:], r.digest)
		return d
	}
	return sha256.Sum256([]byte(r.Credential))
}

// Plant is what the validate phase sees: the host's strict, canonical
// decoding of the request body, never the raw bytes.
//
// Its strings alias the SDK's request buffer and are valid only until the
// handler returns; copy one with strings.Clone to keep it.
type Plant struct {
	ID     int64
	Name   string
	Tag    string
	HasTag bool // the body had a tag; "" is a valid tag, so presence is explicit
	// AllowedAs is the text the authorize chain allowed with ([AllowAs]:
	// the first non-empty one), "" when none. Who the request is from is
	// Caller; AllowedAs is whatever an authorize plugin chose to name.
	AllowedAs string
	// Deprecated: Principal is AllowedAs under its old name, which read as
	// the [Principal] type of Caller; it holds the same value.
	Principal string
	// Caller is who the request is from, as [Request.Caller]: a valid
	// token's name and scopes, zero when none was established.
	Caller Principal
}

// The registered handlers; nil when the plugin does not serve that phase.
var (
	configureHandler func(config []byte) error
	authorizeHandler func(Request) Decision
	validateHandler  func(Plant) Decision
)

// HandleConfigure registers f to receive the plugin's config: the "config"
// value of its sidecar file (NN-name.json beside NN-name.wasm), as JSON.
// The host calls it once per instance, before any request. When f returns an
// error the host refuses the plugin and logs the error's text, so make it
// say exactly what is wrong.
//
//	sdk.HandleConfigure(func(config []byte) error {
//		return json.Unmarshal(config, &cfg)
//	})
//
// # Notes
//
//   - config is the plugin's own copy; f may keep it.
//   - The host calls f only when the sidecar has a config, so the plugin's
//     defaults must be in force from init.
//   - Without a handler, a plugin accepts only an empty, null or {} config,
//     so an operator's config for a plugin that takes none is not ignored
//     silently.
//   - Registering again replaces the handler; nil removes it.
func HandleConfigure(f func(config []byte) error) { configureHandler = f }

// RequireConfig declares that the plugin cannot run without a config: the
// host then refuses to load it when its sidecar has no "config", and
// `plantgate plugin check` says so, instead of the plugin starting on
// defaults. Call it from init, beside [HandleConfigure].
//
//	func init() {
//		sdk.RequireConfig()
//		sdk.HandleConfigure(func(config []byte) error { return json.Unmarshal(config, &cfg) })
//	}
func RequireConfig() { configRequired = true }

// configRequired is what plantgate_config_required answers.
var configRequired bool

// HandleAuthorize registers f as the plugin's authorize phase, which runs
// before the host reads the body.
//
//	sdk.HandleAuthorize(func(r sdk.Request) sdk.Decision {
//		if r.Credential == "" {
//			return sdk.Unauthorized("missing bearer token")
//		}
//		return sdk.AllowAs("someone")
//	})
//
// Registering again replaces the handler; nil removes it and the phase.
func HandleAuthorize(f func(r Request) Decision) { authorizeHandler = f }

// HandleValidate registers f as the plugin's validate phase, which runs on
// the canonical plant after the authorize phase allowed.
//
//	sdk.HandleValidate(func(p sdk.Plant) sdk.Decision {
//		if p.ID < 1 {
//			return sdk.Deny(40050, "id must be at least 1")
//		}
//		return sdk.Allow()
//	})
//
// Registering again replaces the handler; nil removes it and the phase.
func HandleValidate(f func(p Plant) Decision) { validateHandler = f }

// phases is the [abi.ExportPhases] bit set of the registered handlers.
func phases() uint32 {
	var p uint32
	if authorizeHandler != nil {
		p |= abi.PhaseAuthorize
	}
	if validateHandler != nil {
		p |= abi.PhaseValidate
	}
	return p
}
