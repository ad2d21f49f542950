package wasm

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/sys"

	"github.com/plantgate/plantgate/host"
	"github.com/plantgate/plantgate/sdk/abi"
)

// Messages clients see. Guest text from a fault never reaches them.
const (
	msgFault       = "policy plugin failed; request denied"
	msgBadDecision = "policy plugin returned an invalid decision; request denied"
	msgBusy        = "policy plugin busy"
	msgStoreDown   = "token store unavailable"
	msgClosed      = "policy plugin is shutting down"
)

// callError is a failed call into a plugin, with the reason for the log.
type callError struct {
	code   int32 // host.ErrPluginFault or host.ErrPluginBadDecision
	reason string
	err    error // the wazero error, if any
}

func (e *callError) Error() string {
	if e.err != nil {
		return e.reason + ": " + e.err.Error()
	}
	return e.reason
}

func (e *callError) Unwrap() error { return e.err }

func fault(reason string, err error) *callError {
	return &callError{code: host.ErrPluginFault, reason: reason, err: err}
}

func badDecision(reason string, err error) *callError {
	return &callError{code: host.ErrPluginBadDecision, reason: reason, err: err}
}

// Authorize runs the plugin's authorize phase. It returns the principal
// the plugin allowed as ("" for none), or an *host.Error: the plugin's deny,
// or a fault that fails closed. A plugin that does not serve the phase
// allows.
func (p *Plugin) Authorize(ctx context.Context, r host.AuthorizeRequest) (principal string, err error) {
	return p.authorize(ctx, r, credentialDigest(r.Credential), nil)
}

// credentialDigest is the SHA-256 of a credential, zero for none. It goes
// to the plugin with the request (hashing in the guest costs more than the
// rest of a typical authorize call) and keys the token prefetch.
func credentialDigest(credential string) (digest [32]byte) {
	if credential != "" {
		var buf [128]byte // a usual token fits: hashing it allocates nothing
		digest = sha256.Sum256(append(buf[:0], credential...))
	}
	return digest
}

// requestDigest is credentialDigest of the request's credential, taken
// from the token a host.CredentialResolver resolved it to when there is
// one: it hashed the same credential already (an access token is several
// hundred bytes).
func requestDigest(ctx context.Context, credential string) [32]byte {
	if x := host.ExchangeFrom(ctx); x != nil && credential != "" {
		if t, _, ok := x.Credential(); ok {
			return t.Digest
		}
	}
	return credentialDigest(credential)
}

// authorize is Authorize with the credential's digest made by the caller.
// kept is the chain's decision cache for this plugin, nil for none
// (decisioncache.go).
func (p *Plugin) authorize(ctx context.Context, r host.AuthorizeRequest, digest [32]byte, kept *decisions) (string, error) {
	if p.info.phases&abi.PhaseAuthorize == 0 {
		return "", nil
	}
	var sent []byte
	if r.Credential != "" {
		sent = digest[:]
	}
	tc := p.prepareTokens(ctx, r.Credential, digest)
	var key decisionKey
	var now time.Time
	keep := kept != nil && tc.fetched && tc.err == nil && !tc.stamp.IsZero()
	if keep {
		key, now = kept.key(r, digest, host.ExchangeFrom(ctx)), p.clock()
		if e, ok := kept.get(key, tc.stamp, now); ok {
			p.stats.kept.Add(1)
			// What the call's token_lookup did: the same answer, the same
			// principal.
			p.establishFor(ctx, &tc, digest, tc.tok)
			if e.deny != nil {
				return "", &host.Error{Code: e.deny.Code, Message: e.deny.Message}
			}
			return e.principal, nil
		}
	}
	in, err := p.acquire(ctx)
	if err != nil {
		return "", err
	}
	in.cc.tokens = tc
	if p.opa != nil {
		p.entryFor(in, abi.PhaseAuthorize)
		in.req = p.appendAuthorizeInput(in.req[:0], r, host.ExchangeFrom(ctx))
	} else {
		in.req = abi.AppendAuthorizeDigest(in.req[:0], r.Method, r.Path, r.Credential, sent)
		in.req = abi.AppendOperation(in.req, r.Route, r.PathID, r.HasPathID)
		in.req = p.appendContext(in.req, host.ExchangeFrom(ctx))
	}
	var out callOutcome
	principal, err := p.decide(ctx, in, in.authorize, abi.PhaseAuthorize, &out)
	if keep && out.keepable {
		e := keptDecision{principal: principal, stamp: tc.stamp, expires: now.Add(kept.cfg.TTL)}
		if tc.stamp.Before(e.expires) {
			e.expires = tc.stamp
		}
		if !tc.tok.Expires.IsZero() && tc.tok.Expires.Before(e.expires) {
			e.expires = tc.tok.Expires
		}
		var deny *host.Error
		if errors.As(err, &deny) {
			e.deny = &host.Error{Code: deny.Code, Message: deny.Message}
		}
		kept.put(key, e)
	}
	return principal, err
}

// callOutcome is what decide tells authorize about a call.
type callOutcome struct {
	// keepable: the call allowed or denied cleanly, with no response
	// headers, after looking up its credential's prefetched token and
	// nothing else outside the guest (decisioncache.go).
	keepable bool
}

// Validate runs the plugin's validate phase on the canonical plant and the
// principal the authorize chain allowed as. It returns nil to allow, or an
// *host.Error as Authorize does.
func (p *Plugin) Validate(ctx context.Context, plant host.Plant, principal string) error {
	if p.info.phases&abi.PhaseValidate == 0 {
		return nil
	}
	in, err := p.acquire(ctx)
	if err != nil {
		return err
	}
	var caller host.Principal
	if x := host.ExchangeFrom(ctx); x != nil {
		caller = x.Principal()
	}
	if p.opa != nil {
		p.entryFor(in, abi.PhaseValidate)
		in.req = appendValidateInput(in.req[:0], plant, principal, caller)
	} else {
		in.req = abi.AppendValidate(in.req[:0], plant.ID, plant.Name, plant.Tag, plant.HasTag, principal)
		in.req = abi.AppendPrincipal(in.req, caller.Name, caller.Scopes)
	}
	_, err = p.decide(ctx, in, in.validate, abi.PhaseValidate, nil)
	return err
}

// decide makes one phase call with in.req under the plugin's deadline,
// releases the instance and turns the result into a principal or an error.
// out, when not nil, is told whether the decision may be kept.
func (p *Plugin) decide(ctx context.Context, in *instance, fn api.Function, phaseBit uint32, out *callOutcome) (string, error) {
	phase := phaseName(phaseBit)
	p.stats.calls.Add(1)
	cctx := in.cc.begin(ctx, p.limits.Timeout)
	var r abi.Result
	var err error
	if in.runner != nil {
		var ok bool
		if r, err, ok = in.runner.run(cctx, fn); !ok {
			return "", p.writeOff(ctx, fn, phase)
		}
	} else {
		r, err = in.call(cctx, fn, in.req)
	}
	storeFailed := in.cc.tokens.storeFailed
	clean := in.cc.tokens.matched && !in.cc.tokens.uncacheable && !storeFailed
	spent := !in.cc.end()
	if spent && err != nil && p.guarded {
		// The guard's trap ("unreachable") is the deadline's doing.
		err = fault(fn.Definition().ExportNames()[0]+" ran past its deadline", err)
	}
	if spent && err == nil && p.limits.Interrupt == InterruptOff {
		// It returned just as its deadline passed: too late to count.
		err = fault(fn.Definition().ExportNames()[0]+" ran past its deadline (limits.interrupt is off: it could not be stopped)", nil)
	}
	var d abi.Decision
	if err == nil && r != abi.ResultAllow {
		d, err = in.decision(r)
	}
	if err == nil && d.Headers != nil && d.Verdict != abi.VerdictFault {
		err = respondWith(ctx, d.Headers)
	}
	if err != nil {
		if storeFailed {
			// The guest failed after the store failed it (ran out of time
			// waiting, most likely): the store is the cause, and a retry
			// may succeed once it answers.
			err = &storeFault{err}
		}
		return "", p.failed(ctx, in, phase, err)
	}
	switch {
	case r == abi.ResultAllow:
		p.release(ctx, in, spent)
		out.set(clean)
		return "", nil
	case d.Verdict == abi.VerdictAllow:
		principal := p.principalString(d.Text)
		p.release(ctx, in, spent)
		out.set(clean && d.Headers == nil)
		return principal, nil
	case d.Verdict == abi.VerdictDeny && !abi.PhaseDenies(phaseBit, d.Code):
		// A validate plugin's 401 would tell the client its credential is
		// bad after the authorize chain accepted it: fail closed instead.
		return "", p.failed(ctx, in, phase, badDecision(fmt.Sprintf("%s denied with %d, a code the %s phase may not use (%s only: %s)",
			fn.Definition().ExportNames()[0], d.Code, phase, phaseStatuses[phaseBit], abi.DenyRanges(phaseBit)), nil))
	case d.Verdict == abi.VerdictDeny:
		e := &host.Error{Code: d.Code, Message: string(d.Text)}
		p.release(ctx, in, spent)
		out.set(clean && d.Headers == nil)
		return "", e
	}
	return "", p.failed(ctx, in, phase, fault("plugin reported a fault: "+string(d.Text), nil))
}

func (o *callOutcome) set(keepable bool) {
	if o != nil {
		o.keepable = keepable
	}
}

// phaseStatuses names, for a log line, the statuses each phase may deny
// with (abi.PhaseDenies).
var phaseStatuses = map[uint32]string{
	abi.PhaseAuthorize: "401, 403, 429, 503",
	abi.PhaseValidate:  "400, 403, 429, 503",
}

// principalString returns b as a string, reusing the last one the plugin
// allowed as when it is the same: a busy client's principal (a token name)
// then costs no allocation per request.
func (p *Plugin) principalString(b []byte) string {
	if last := p.principal.Load(); last != nil && *last == string(b) {
		return *last
	}
	s := string(b)
	p.principal.Store(&s)
	return s
}

// failed logs a failed call, discards the instance and returns the error
// the client sees. The log names the plugin, phase and reason, never the
// request: it may hold a credential.
func (p *Plugin) failed(ctx context.Context, in *instance, phase string, err error) error {
	var ce *callError
	if !errors.As(err, &ce) {
		ce = fault("call failed", err)
	}
	// One line that names the cause: a Go guest's crash dump on stderr
	// says it better than the exit code it ended with.
	attrs := []any{"phase", phase, "code", ce.code, "reason", ce.reason}
	if crash := p.crashed(in, exportOf(phase)); crash != "" {
		attrs[5] = crash
	} else if ce.err != nil {
		// wazero's text goes on with the guest's stack trace, a line per
		// frame (dozens for a Rust panic): the first line names the trap.
		msg, _, _ := strings.Cut(ce.err.Error(), "\n")
		attrs = append(attrs, "err", msg)
	}
	p.log.ErrorContext(ctx, "policy plugin failed; request denied", attrs...)
	p.release(ctx, in, true)
	var sf *storeFault
	if ce.code == host.ErrPluginFault && errors.As(err, &sf) {
		return &host.Error{Code: host.ErrStoreUnavailable, Message: msgStoreDown}
	}
	msg := msgFault
	if ce.code == host.ErrPluginBadDecision {
		msg = msgBadDecision
	}
	return &host.Error{Code: ce.code, Message: msg}
}

// storeFault is a failed call in which a token lookup found the store
// unavailable.
type storeFault struct{ err error }

func (e *storeFault) Error() string { return e.err.Error() }
func (e *storeFault) Unwrap() error { return e.err }

// call copies req into the buffer plantgate_buffer hands out and calls fn
// with it. The ABI keeps a buffer valid until a larger one is asked for, so
// plantgate_buffer is called only when req outgrows the last size asked:
// usually once per instance, which halves the calls per phase.
func (in *instance) call(ctx context.Context, fn api.Function, req []byte) (abi.Result, error) {
	if in.opa != nil {
		return in.callOPA(ctx, fn, req)
	}
	if len(req) > abi.MaxRequest {
		// The ABI promises plantgate_buffer is never asked for more.
		return 0, fault(fmt.Sprintf("request of %d bytes, over the %d bytes (abi.MaxRequest) a module is sent", len(req), abi.MaxRequest), nil)
	}
	n := uint32(len(req))
	if in.bufPtr == 0 || n > in.bufSize {
		if err := in.askBuffer(ctx, n); err != nil {
			return 0, err
		}
	}
	if !in.mem.Write(in.bufPtr, req) {
		return 0, badDecision(fmt.Sprintf("%s(%d) returned %#x, outside memory", abi.ExportBuffer, in.bufSize, in.bufPtr), nil)
	}
	in.stack[0], in.stack[1] = uint64(in.bufPtr), uint64(n)
	if err := fn.CallWithStack(ctx, in.stack[:]); err != nil {
		return 0, callFailed(fn.Definition().ExportNames()[0], err)
	}
	return in.stack[0], nil
}

// askBuffer asks plantgate_buffer for n bytes and keeps the buffer it
// hands out, or returns why it is no buffer.
func (in *instance) askBuffer(ctx context.Context, n uint32) error {
	in.bufPtr, in.bufSize = 0, 0
	in.stack[0] = uint64(n)
	if err := in.buffer.CallWithStack(ctx, in.stack[:]); err != nil {
		return callFailed(abi.ExportBuffer, err)
	}
	ptr := uint32(in.stack[0])
	if ptr == 0 {
		return fault(fmt.Sprintf("%s(%d) returned 0: no buffer", abi.ExportBuffer, n), nil)
	}
	if uint64(ptr)+uint64(n) > uint64(in.mem.Size()) {
		return badDecision(fmt.Sprintf("%s(%d) returned %#x, outside memory", abi.ExportBuffer, n, ptr), nil)
	}
	in.bufPtr, in.bufSize = ptr, n
	return nil
}

// callFailed names why a call into the guest returned an error.
func callFailed(export string, err error) *callError {
	var exit *sys.ExitError
	if errors.As(err, &exit) {
		switch exit.ExitCode() {
		case sys.ExitCodeDeadlineExceeded:
			return fault(export+" ran past its deadline", err)
		case sys.ExitCodeContextCanceled:
			return fault(export+" was canceled", err)
		}
		return fault(fmt.Sprintf("%s exited with code %d", export, exit.ExitCode()), err)
	}
	return fault(export+" trapped", err)
}

// decision reads and checks the decision record a Result points to.
func (in *instance) decision(r abi.Result) (abi.Decision, error) {
	if in.opa != nil {
		return in.opa.decision, nil // callOPA checked it
	}
	ptr, n := abi.UnpackResult(r)
	if n > abi.MaxDecision {
		return abi.Decision{}, badDecision(fmt.Sprintf("decision of %d bytes, over the %d-byte maximum", n, abi.MaxDecision), nil)
	}
	b, ok := in.mem.Read(ptr, n)
	if !ok {
		return abi.Decision{}, badDecision(fmt.Sprintf("decision at %#x (%d bytes) is outside memory", ptr, n), nil)
	}
	d, err := abi.ParseDecision(b)
	if err != nil {
		return abi.Decision{}, badDecision("bad decision", err)
	}
	if !utf8.Valid(d.Text) {
		return abi.Decision{}, badDecision("decision text is not UTF-8", nil)
	}
	return d, nil
}
