// Package sdktest runs a plugin's handlers natively, the way the host runs
// its WebAssembly module, so plugin logic is unit-tested with plain go test.
//
// Each call encodes its request with package abi into the SDK's request
// buffer, runs the SDK's export code (the same decoding, panic recovery and
// decision encoding as the wasm exports), and parses the decision record
// with abi.ParseDecision, as the host does.
//
//	func TestShortName(t *testing.T) {
//		sdktest.Configure(t, `{"name_min": 3}`)
//		d := sdktest.Validate(sdk.Plant{ID: 1, Name: "ab"})
//		if d.Code() != 40051 {
//			t.Errorf("got %v", d)
//		}
//	}
//
// # Notes
//
//   - A test binary holds one plugin instance: handlers registered in init,
//     the plugin's config and the fake host functions are all global. Calls
//     are serialized, so parallel subtests are fine as long as they share
//     one config and one token store.
//   - Decisions returned here own their text; they stay valid.
package sdktest

import (
	"crypto/sha256"
	"errors"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/plantgate/plantgate/sdk"
	"github.com/plantgate/plantgate/sdk/abi"
	"github.com/plantgate/plantgate/sdk/internal/module"
)

// mu makes the instance serve one call at a time, as the host's pool does.
var mu sync.Mutex

// Configure passes config (JSON, or "" for none) to the plugin's configure
// handler and fails the test when the plugin rejects it.
func Configure(t testing.TB, config string) {
	t.Helper()
	if err := TryConfigure(config); err != nil {
		t.Fatalf("configure %s: %v", config, err)
	}
}

// TryConfigure passes config to the plugin's configure handler and returns
// the reason the plugin rejected it, or nil when it accepted.
func TryConfigure(config string) error {
	d := call(module.Configure, []byte(config))
	switch {
	case d.Faulted():
		return errors.New(d.Message())
	case d != sdk.Allow():
		return errors.New("sdktest: configure answered " + d.String() + ", want allow or fault")
	}
	return nil
}

// Authorize runs the plugin's authorize phase on r, with its context
// (RequestID, Client, Caller) and the request headers given as name, value
// pairs: the host sends only those the plugin's sidecar asks for.
//
//	d := sdktest.Authorize(sdk.Request{Route: "GET /plants", Client: "192.0.2.7"}, "X-Tenant", "blue")
func Authorize(r sdk.Request, headers ...string) sdk.Decision {
	msg := abi.AppendOperation(abi.AppendAuthorize(nil, r.Method, r.Path, r.Credential), r.Route, r.PathID, r.HasPathID)
	msg, block := abi.AppendContext(msg, r.RequestID, []byte(r.Client))
	for i := 0; i+1 < len(headers); i += 2 {
		msg = abi.AppendRequestHeader(msg, block, headers[i], []byte(headers[i+1]))
	}
	return call(module.Authorize, abi.AppendPrincipal(msg, r.Caller.Name, scopes(r.Caller.Scopes)))
}

// Validate runs the plugin's validate phase on p.
func Validate(p sdk.Plant) sdk.Decision {
	allowedAs := p.AllowedAs
	if allowedAs == "" {
		allowedAs = p.Principal // the deprecated name, from tests written before AllowedAs
	}
	msg := abi.AppendValidate(nil, p.ID, p.Name, p.Tag, p.HasTag, allowedAs)
	return call(module.Validate, abi.AppendPrincipal(msg, p.Caller.Name, scopes(p.Caller.Scopes)))
}

// scopes splits space-separated scopes for abi.AppendPrincipal.
func scopes(s string) []string {
	if s == "" {
		return nil
	}
	return []string{s}
}

// Phases returns the plugin's abi.ExportPhases bit set.
func Phases() uint32 {
	mu.Lock()
	defer mu.Unlock()
	return module.Phases()
}

// call copies msg into the buffer the SDK hands out, runs export on it and
// parses the decision record.
func call(export func([]byte) []byte, msg []byte) sdk.Decision {
	mu.Lock()
	defer mu.Unlock()
	buf := module.Buffer(uint32(len(msg)))
	if buf == nil {
		return sdk.Fault("sdktest: the SDK refused a buffer of " + strconv.Itoa(len(msg)) + " bytes")
	}
	rec := export(buf[:copy(buf, msg)])
	if rec == nil {
		return sdk.Allow()
	}
	d, err := abi.ParseDecision(rec)
	if err != nil {
		return sdk.Fault("sdktest: the SDK encoded a bad decision: " + err.Error())
	}
	text := string(d.Text)
	var out sdk.Decision
	switch d.Verdict {
	case abi.VerdictAllow:
		out = sdk.AllowAs(text)
	case abi.VerdictDeny:
		out = sdk.Deny(d.Code, text)
	default:
		return sdk.Fault(text)
	}
	for b := d.Headers; len(b) > 0; {
		name, value, rest, _ := abi.NextHeader(b)
		out, b = out.WithHeader(string(name), string(value)), rest
	}
	return out
}

// Digest returns the SHA-256 digest of a token, the key of the token store.
func Digest(token string) [abi.DigestSize]byte { return sha256.Sum256([]byte(token)) }

// SetTokens makes the fake token store hold tokens, keyed by their Digest,
// until the test ends.
//
//	sdktest.SetTokens(t, sdk.Token{Digest: sdktest.Digest("s3cret"), Name: "ci", Scopes: "plants:write"})
func SetTokens(t testing.TB, tokens ...sdk.Token) {
	store := make(map[[abi.DigestSize]byte]sdk.Token, len(tokens))
	for _, tok := range tokens {
		store[tok.Digest] = tok
	}
	SetTokenLookup(t, func(digest [abi.DigestSize]byte) (sdk.Token, error) {
		tok, ok := store[digest]
		if !ok {
			return sdk.Token{}, sdk.ErrTokenNotFound
		}
		return tok, nil
	})
}

// tokenRecord is reused by the fake lookups, so that they do not allocate
// and a plugin's own allocation test measures the plugin alone.
var tokenRecord []byte

// SetTokenLookup makes f answer the plugin's token lookups until the test
// ends. f returns a token, or sdk.ErrTokenNotFound or sdk.ErrUnavailable
// (any other error reads as unavailable). The token travels to the plugin
// encoded as an abi.TokenRecord, so the returned Digest may differ from the
// digest asked for, to test the plugin's comparison.
func SetTokenLookup(t testing.TB, f func(digest [abi.DigestSize]byte) (sdk.Token, error)) {
	lookup := func(digest, out []byte) int32 {
		if len(digest) != abi.DigestSize {
			return abi.LookupBadArgument
		}
		tok, err := f([abi.DigestSize]byte(digest))
		switch {
		case errors.Is(err, sdk.ErrTokenNotFound):
			return abi.LookupNotFound
		case err != nil:
			return abi.LookupUnavailable
		}
		rec := abi.AppendTokenRecord(tokenRecord[:0], unixMilli(tok.Created), unixMilli(tok.Expires),
			tok.Revoked, tok.Digest[:], tok.Name, tok.Scopes)
		tokenRecord = rec
		if len(rec) <= len(out) {
			copy(out, rec)
		}
		return int32(len(rec))
	}
	swap(t, &module.TokenLookup, lookup)
}

// SetLog sends the plugin's log lines to f until the test ends, for example
// to t.Log:
//
//	sdktest.SetLog(t, func(level sdk.Level, msg string) { t.Log(level, msg) })
func SetLog(t testing.TB, f func(level sdk.Level, msg string)) {
	swap(t, &module.Log, func(level int32, msg string) { f(sdk.Level(level), strings.Clone(msg)) })
}

// swap sets a host function and restores the old one when the test ends.
func swap[F any](t testing.TB, hook *F, f F) {
	mu.Lock()
	old := *hook
	*hook = f
	mu.Unlock()
	t.Cleanup(func() {
		mu.Lock()
		*hook = old
		mu.Unlock()
	})
}

// unixMilli is the record's form of t: Unix milliseconds, 0 when t is zero.
func unixMilli(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixMilli()
}
