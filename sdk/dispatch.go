package sdk

import (
	"bytes"
	"fmt"
	"runtime"
	"strconv"
	"strings"
	"unicode/utf8"
	"unsafe"

	"github.com/plantgate/plantgate/sdk/abi"
)

// This file is the guest side of every export, shared by the wasip1 build
// (which adds address translation and the //go:wasmexport functions) and the
// native build (which package sdktest drives). Each export function takes a
// request in the abi layout and returns a decision record in the static
// record buffer, or nil for abi.ResultAllow. None of them allocates unless a
// handler does, a buffer must grow, or something is wrong.

// Buffer sizes for [abi.ExportBuffer]. The host writes every request and the
// config into one buffer, so it grows to the largest message and stays.
const (
	minRequest = 4 << 10
	maxRequest = abi.MaxRequest // the host never asks for more; a larger size gets address 0
)

var (
	// request is the buffer abi.ExportBuffer hands out; len == cap.
	request = make([]byte, minRequest)
	// record holds the decision record a phase export points to.
	record [abi.MaxDecision]byte
)

// buffer returns the request buffer, grown to at least size bytes, or nil
// when size is over maxRequest. It grows only when asked for more than its
// length, which is at least any size asked before: that keeps the ABI's
// promise that a buffer stays put until a larger one is asked for (see
// abi.ExportBuffer). A grown buffer replaces the old one.
func buffer(size uint32) []byte {
	if size > maxRequest {
		return nil
	}
	if int(size) > len(request) {
		n := len(request)
		for n < int(size) {
			n <<= 1
		}
		request = make([]byte, n)
	}
	return request
}

// noHandlers is the fault of a plugin that registered no handler at all:
// almost always handlers registered in main(), which neither the host (a
// c-shared module runs init but never main) nor go test runs.
const noHandlers = "sdk: no handler is registered: register handlers in init(), not in main() (neither a c-shared module nor go test runs main)"

// configure is the body of [abi.ExportConfigure].
func configure(msg []byte) []byte {
	h := configureHandler
	if h == nil {
		if c := bytes.TrimSpace(msg); len(c) == 0 || string(c) == "null" || string(c) == "{}" {
			return nil
		}
		if phases() == 0 {
			return encodeFault(noHandlers)
		}
		return encodeFault("the plugin takes no config, got " + quote(msg) + `: remove "config" from its sidecar, or handle it with sdk.HandleConfigure`)
	}
	if err := runConfigure(h, bytes.Clone(msg)); err != nil {
		return encodeFault(err.Error())
	}
	return nil
}

// authorize is the body of [abi.ExportAuthorize].
func authorize(msg []byte) []byte {
	h := authorizeHandler
	if h == nil {
		if phases() == 0 {
			return encodeFault(noHandlers)
		}
		return encodeFault("sdk: authorize called but the plugin registered no authorize handler")
	}
	a, err := abi.ParseAuthorize(msg)
	if err != nil {
		return encodeFault("sdk: authorize request: " + err.Error())
	}
	return encode(inPhase(abi.PhaseAuthorize, "authorize", runAuthorize(h, Request{
		Method:     borrow(a.Method),
		Path:       borrow(a.Path),
		Credential: borrow(a.Credential),
		Route:      borrow(a.Route),
		PathID:     a.PathID,
		HasPathID:  a.HasPathID,
		RequestID:  borrow(a.RequestID),
		Client:     borrow(a.Client),
		Caller:     Principal{Name: borrow(a.Principal), Scopes: borrow(a.Scopes)},
		digest:     a.Digest,
		headers:    a.Headers,
	})))
}

// validate is the body of [abi.ExportValidate].
func validate(msg []byte) []byte {
	h := validateHandler
	if h == nil {
		if phases() == 0 {
			return encodeFault(noHandlers)
		}
		return encodeFault("sdk: validate called but the plugin registered no validate handler")
	}
	v, err := abi.ParseValidate(msg)
	if err != nil {
		return encodeFault("sdk: validate request: " + err.Error())
	}
	return encode(inPhase(abi.PhaseValidate, "validate", runValidate(h, Plant{
		ID:        v.ID,
		Name:      borrow(v.Name),
		Tag:       borrow(v.Tag),
		HasTag:    v.HasTag,
		AllowedAs: borrow(v.Principal),
		Principal: borrow(v.Principal),
		Caller:    Principal{Name: borrow(v.CallerName), Scopes: borrow(v.CallerScopes)},
	})))
}

// The run functions call a handler and turn a panic into a fault. Their
// deferred closures are open-coded, so they cost no allocation.

func runConfigure(h func([]byte) error, config []byte) (err error) {
	defer func() {
		if v := recover(); v != nil {
			err = fmt.Errorf("sdk: configure handler panicked: %v%s", v, panicSite())
		}
	}()
	return h(config)
}

func runAuthorize(h func(Request) Decision, r Request) (d Decision) {
	defer func() {
		if v := recover(); v != nil {
			d = Fault(fmt.Sprintf("sdk: authorize handler panicked: %v%s", v, panicSite()))
		}
	}()
	return h(r)
}

func runValidate(h func(Plant) Decision, p Plant) (d Decision) {
	defer func() {
		if v := recover(); v != nil {
			d = Fault(fmt.Sprintf("sdk: validate handler panicked: %v%s", v, panicSite()))
		}
	}()
	return h(p)
}

// panicSite names where a recovered panic happened, for the fault text
// the host logs: ", in main.validate at /src/main.go:31", or "" when the
// stack does not say. Called from a deferred recover, so the panicking
// function is the first frame below runtime.gopanic that is not the
// runtime's own (a nil map write panics in runtime.mapassign).
func panicSite() string {
	var pcs [32]uintptr
	frames := runtime.CallersFrames(pcs[:runtime.Callers(2, pcs[:])])
	below := false
	for {
		f, more := frames.Next()
		if below && !strings.HasPrefix(f.Function, "runtime.") {
			return ", in " + f.Function + " at " + f.File + ":" + strconv.Itoa(f.Line)
		}
		below = below || f.Function == "runtime.gopanic"
		if !more {
			return ""
		}
	}
}

// inPhase turns a deny with a code the phase may not use
// (abi.PhaseDenies) into a fault that says so: the host would refuse it as
// an invalid decision, and sdktest shows the author the reason.
func inPhase(phase uint32, name string, d Decision) Decision {
	if d.kind == denied && !abi.PhaseDenies(phase, d.code) {
		return Fault("sdk: " + name + " may not deny with " + strconv.Itoa(int(d.code)) + "; it may use " + abi.DenyRanges(phase))
	}
	return d
}

// encode writes d into the record buffer, or returns nil for a plain allow.
func encode(d Decision) []byte {
	switch d.kind {
	case allowed:
		if d.text == "" && d.nhdr == 0 {
			return nil
		}
		return abi.AppendHeaderDecision(record[:0], abi.VerdictAllow, 0, cut(d.text), d.hdr[:2*d.nhdr]...)
	case denied:
		return abi.AppendHeaderDecision(record[:0], abi.VerdictDeny, d.code, cut(d.text), d.hdr[:2*d.nhdr]...)
	case faulted:
		return encodeFault(d.text)
	default:
		return encodeFault(zeroDecision)
	}
}

func encodeFault(reason string) []byte {
	return abi.AppendDecision(record[:0], abi.VerdictFault, 0, cut(reason))
}

// cut makes s valid decision text: invalid UTF-8 becomes U+FFFD (the host
// refuses a record whose text is not UTF-8) and text over abi.MaxText bytes
// is shortened without splitting a character (abi.AppendDecision would cut
// at a byte). Valid, short text, the usual case, passes through untouched.
func cut(s string) string {
	if !utf8.ValidString(s) {
		s = strings.ToValidUTF8(s, "\uFFFD")
	}
	if len(s) <= abi.MaxText {
		return s
	}
	n := abi.MaxText
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// borrow returns b as a string without copying. The string is valid only
// while b's buffer is not rewritten: until the handler returns.
func borrow(b []byte) string { return unsafe.String(unsafe.SliceData(b), len(b)) }

// quote quotes at most 64 bytes of b for a fault message.
func quote(b []byte) string {
	if len(b) > 64 {
		return fmt.Sprintf("%q…", b[:64])
	}
	return fmt.Sprintf("%q", b)
}
