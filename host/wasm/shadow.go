package wasm

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"runtime"
	"strings"
	"time"

	"github.com/plantgate/plantgate/host"
	"github.com/plantgate/plantgate/sdk/abi"
)

// Roles of a plugin file in a chain, read from its name. NN-name.wasm is
// the live plugin of the slot NN-name; NN-name.shadow.wasm runs in shadow
// beside it (its decisions are recorded, never enforced); NN-name.canary.wasm
// is enforced in place of the live one for a share of principals
// (Sidecar.CanaryPercent). A slot has at most one file of each role, so
// never more than one shadow per phase slot.
const (
	RoleLive   = "live"
	RoleShadow = "shadow"
	RoleCanary = "canary"
)

// FileRole splits a plugin file name into its slot and role:
// "20-policy.shadow.wasm" is the slot "20-policy", RoleShadow.
func FileRole(file string) (slot, role string) {
	base := strings.TrimSuffix(file, ".wasm")
	for _, r := range []string{RoleShadow, RoleCanary} {
		if s, ok := strings.CutSuffix(base, "."+r); ok {
			return s, r
		}
	}
	return base, RoleLive
}

// Outcomes of a shadow decision compared with the live chain's answer.
const (
	ShadowAgree      = "agree"       // both allowed, or both denied
	ShadowWouldDeny  = "would_deny"  // the shadow denied where the live chain allowed
	ShadowWouldAllow = "would_allow" // the shadow allowed where the live chain denied in its slot
	ShadowFault      = "fault"       // the shadow trapped, ran past its deadline or broke the ABI
)

// Verdict is one side of a shadow comparison.
type Verdict struct {
	Allow bool
	Code  int32 // the error code of a deny or fault; 0 when allowed
}

func verdictOf(err error) Verdict {
	if err == nil {
		return Verdict{Allow: true}
	}
	return Verdict{Code: host.Code(err)}
}

// ShadowDecision is one shadow call compared with the live chain: what a
// ShadowRecorder counts and logs. It holds the canonical input's
// non-secret fields only: never the credential.
type ShadowDecision struct {
	Plugin  string // the slot's name, "policy" for 20-policy.shadow.wasm
	File    string // the shadow's file, "20-policy.shadow.wasm"
	Phase   string // "authorize" or "validate"
	Outcome string // one of the Shadow* outcomes
	Live    Verdict
	Shadow  Verdict
	Took    time.Duration // the shadow's call

	RequestID string
	Principal string // who the live chain said the request is from; "" when none
	Method    string // authorize
	Route     string
	Path      string
	PathID    int64
	HasPathID bool
	Plant     *host.Plant // validate
}

// ShadowRecorder is told every shadow decision, off the request path, and
// every sampled shadow call dropped because the shadow's queue was full or
// its pool busy. Metrics, the fleet's diff log and the decision log
// implement it.
type ShadowRecorder interface {
	Shadow(d ShadowDecision)
	ShadowDropped(plugin string)
}

// compareShadow is the one place where a shadow's decision meets the live
// chain's: live is the chain's answer for the phase, shadow the shadow's
// call, and later reports that the live chain was ended by a plugin after
// the shadow's slot (so whatever the shadow says there, the answer would
// still be that deny).
func compareShadow(live, shadow error, later bool) string {
	switch {
	case outcome(shadow) == OutcomeFault:
		return ShadowFault
	case later:
		return ShadowAgree
	case live == nil && shadow != nil:
		return ShadowWouldDeny
	case live != nil && shadow == nil:
		return ShadowWouldAllow
	}
	return ShadowAgree
}

// maxShadowPending bounds the shadow calls of one shadow plugin waiting or
// running at once; samples beyond it are dropped (ShadowDropped), so a slow
// shadow costs at most this many goroutines and input copies.
const maxShadowPending = 64

// MaxShadowInstances bounds a shadow's pool ("limits.instances"), so the
// CPUs a shadow can hold at once: wazero's compiled code is not preempted
// by Go's scheduler, so each running call holds a CPU (a P) until it
// returns, at the latest at its deadline. A shadow is on trial: it must
// leave the CPUs to the live chain even when it spins.
const MaxShadowInstances = 2

// DefaultShadowInstances is a shadow's pool size when its sidecar gives no
// "instances": half the CPUs Go runs on, from 1 to MaxShadowInstances (1
// on a 2-CPU machine, so a spinning shadow leaves the other CPU to the
// live chain).
func DefaultShadowInstances() int {
	return min(max(runtime.GOMAXPROCS(0)/2, 1), MaxShadowInstances)
}

// shadowInstances is a shadow's pool size for a sidecar's "instances"
// (0: not given): never all the CPUs Go runs on (but one on one CPU).
// Measured on 2 CPUs, a spinning shadow of 2 instances moved live p50 from
// 0.2 to 9–74 ms and timed a live call out; of 1, to 0.4 ms.
func shadowInstances(asked int) int {
	if asked == 0 {
		return DefaultShadowInstances()
	}
	return min(asked, max(runtime.GOMAXPROCS(0)-1, 1))
}

// MaxShadowTimeout bounds a shadow's "timeout_ms". A call that spins holds
// its CPU until its deadline, and a garbage collection waits for it there
// (Go cannot preempt the compiled guest), stalling every live request for
// up to that long: the bound on what a spinning shadow adds to a live
// request's latency.
const MaxShadowTimeout = time.Second

// roleLimits applies what a shadow's or a canary's role demands of its
// limits l (the sidecar's over the defaults): interrupt never off, for a
// call nothing can stop would hold a CPU and stall the process at its next
// garbage collection (Limits.Interrupt); a shadow's small pool and short
// deadline.
func roleLimits(file string, sc Sidecar, l *Limits) error {
	json := strings.TrimSuffix(file, ".wasm") + ".json"
	_, role := FileRole(file)
	if role == RoleLive {
		return nil
	}
	if l.Interrupt == InterruptOff {
		return fmt.Errorf(`plugin %s: "limits.interrupt": false is refused for a %s: a call nothing can stop would hold a CPU and stall the gateway at its next garbage collection`, json, role)
	}
	if role != RoleShadow {
		return nil
	}
	if n := sc.Limits.Instances; n > MaxShadowInstances {
		return fmt.Errorf(`plugin %s: "limits.instances" of a shadow must be from 1 to %d, got %d: a shadow's calls must leave the CPUs to the live chain`, json, MaxShadowInstances, n)
	}
	l.Instances = shadowInstances(sc.Limits.Instances)
	if ms := sc.Limits.Timeout.Milliseconds(); ms > MaxShadowTimeout.Milliseconds() {
		return fmt.Errorf(`plugin %s: "limits.timeout_ms" of a shadow must be from 1 to %d, got %d: a garbage collection waits for a spinning call until its deadline, stalling live requests`, json, MaxShadowTimeout.Milliseconds(), ms)
	}
	l.Timeout = min(l.Timeout, MaxShadowTimeout) // a gateway-wide default above it
	return nil
}

// DefaultShadowSample is a shadow's sampling rate when its sidecar gives
// no "sample_percent".
const DefaultShadowSample = 100

// step is one slot of a phase in a chain with shadows or canaries.
type step struct {
	live, canary, shadow *Plugin // any may be nil
}

// extras are the slots of a chain that has shadows or canaries; nil for a
// chain of live plugins only, whose calls then take the plain path.
type extras struct {
	authorize, validate []step
}

// newExtras groups plugins by slot, in chain order; nil when every plugin
// is live.
func newExtras(plugins []*Plugin) *extras {
	var steps []step
	var slots []string
	plain := true
	for _, p := range plugins {
		slot, role := FileRole(p.info.File)
		if len(slots) == 0 || slots[len(slots)-1] != slot {
			slots, steps = append(slots, slot), append(steps, step{})
		}
		s := &steps[len(steps)-1]
		switch role {
		case RoleShadow:
			s.shadow, plain = p, false
		case RoleCanary:
			s.canary, plain = p, false
		default:
			s.live = p
		}
	}
	if plain {
		return nil
	}
	x := &extras{}
	for _, s := range steps {
		if a := s.only(abi.PhaseAuthorize); a != (step{}) {
			x.authorize = append(x.authorize, a)
		}
		if v := s.only(abi.PhaseValidate); v != (step{}) {
			x.validate = append(x.validate, v)
		}
	}
	return x
}

// only is s for one phase: each role's plugin when it serves the phase,
// nil when not. A live validate plugin whose shadow also authorizes is
// never called to authorize.
func (s step) only(bit uint32) step {
	serves := func(p *Plugin) *Plugin {
		if p != nil && p.info.phases&bit != 0 {
			return p
		}
		return nil
	}
	return step{live: serves(s.live), canary: serves(s.canary), shadow: serves(s.shadow)}
}

// InCanary reports whether principal's requests go to a canary enforced
// for percent of principals: the first 8 bytes of SHA-256(principal),
// modulo 100, below percent. The same principal lands on the same side on
// every gateway and every request; no principal, no canary.
func InCanary(principal string, percent int) bool {
	if principal == "" || percent <= 0 {
		return false
	}
	sum := sha256.Sum256([]byte(principal))
	return binary.BigEndian.Uint64(sum[:8])%100 < uint64(percent)
}

// knownPrincipal is who the request is from so far: what an earlier
// plugin named, else what a token lookup established.
func knownPrincipal(ctx context.Context, named string) string {
	if named != "" {
		return named
	}
	if x := host.ExchangeFrom(ctx); x != nil {
		return x.Principal().Name
	}
	return ""
}

// authorizeExt is Authorize for a chain with shadows or canaries.
func (c *Chain) authorizeExt(ctx context.Context, r host.AuthorizeRequest) (principal string, err error) {
	digest := requestDigest(ctx, r.Credential)
	stopped := len(c.ext.authorize)
	for i, s := range c.ext.authorize {
		if s.live == nil && s.canary == nil {
			continue
		}
		var named string
		named, err = c.authorizeStep(ctx, s, r, digest, principal)
		if err != nil {
			stopped = i
			break
		}
		if principal == "" {
			principal = named
		}
	}
	for i, s := range c.ext.authorize {
		if s.shadow != nil && i <= stopped {
			s.shadow.shadowAuthorize(ctx, r, principal, err, err != nil && i < stopped)
		}
	}
	return principal, err
}

// authorizeStep calls the slot's live plugin, or its canary for a
// principal in the canary's share. When no earlier plugin named the
// principal, the live version runs first to learn it, and the canary's
// answer replaces its own for a principal in the share.
func (c *Chain) authorizeStep(ctx context.Context, s step, r host.AuthorizeRequest, digest [32]byte, principal string) (string, error) {
	call := func(p *Plugin) (string, error) {
		start := time.Now()
		named, err := p.authorize(ctx, r, digest, c.keptOf(p))
		p.note(ctx, "authorize", start, err)
		if p.decisions != nil && p.decisions.Wants(ctx) {
			p.recordAuthorize(ctx, r, named, start, err, false)
		}
		return named, err
	}
	if s.canary == nil {
		return call(s.live)
	}
	who := knownPrincipal(ctx, principal)
	if who == "" && s.live != nil {
		named, err := call(s.live)
		if who = knownPrincipal(ctx, named); !InCanary(who, s.canary.percent) {
			return named, err
		}
	}
	if InCanary(who, s.canary.percent) {
		return call(s.canary)
	}
	if s.live == nil {
		return "", nil
	}
	return call(s.live)
}

// validateExt is Validate for a chain with shadows or canaries.
func (c *Chain) validateExt(ctx context.Context, plant host.Plant, principal string) (err error) {
	stopped := len(c.ext.validate)
	who := knownPrincipal(ctx, principal)
	for i, s := range c.ext.validate {
		p := s.live
		if s.canary != nil && InCanary(who, s.canary.percent) {
			p = s.canary
		}
		if p == nil {
			continue
		}
		start := time.Now()
		err = p.Validate(ctx, plant, principal)
		p.note(ctx, "validate", start, err)
		if p.decisions != nil && p.decisions.Wants(ctx) {
			p.recordValidate(ctx, plant, principal, start, err, false)
		}
		if err != nil {
			stopped = i
			break
		}
	}
	for i, s := range c.ext.validate {
		if s.shadow != nil && i <= stopped {
			s.shadow.shadowValidate(ctx, plant, principal, err, err != nil && i < stopped)
		}
	}
	return err
}

// shadowJob is one sampled shadow call: a copy of the phase's canonical
// input and the live chain's answer, owned by the shadow's goroutine.
type shadowJob struct {
	ctx   context.Context // the request's values, without its deadline
	d     ShadowDecision
	req   host.AuthorizeRequest // authorize; Credential included, never recorded
	plant host.Plant
	x     *host.Exchange
	live  error
	later bool
}

// shadowAuthorize samples one authorize call for the shadow p.
func (p *Plugin) shadowAuthorize(ctx context.Context, r host.AuthorizeRequest, principal string, live error, later bool) {
	if !p.sampled() {
		return
	}
	j := p.newJob(ctx, "authorize", principal, live, later)
	// The request's strings may be borrowed from the HTTP layer's buffers,
	// which the next request on the connection overwrites: copied.
	j.req = host.AuthorizeRequest{Method: strings.Clone(r.Method), Path: strings.Clone(r.Path), Credential: strings.Clone(r.Credential),
		Route: strings.Clone(r.Route), PathID: r.PathID, HasPathID: r.HasPathID}
	j.d.Method, j.d.Route, j.d.Path, j.d.PathID, j.d.HasPathID = j.req.Method, j.req.Route, j.req.Path, r.PathID, r.HasPathID
	p.startShadow(j)
}

// shadowValidate samples one validate call for the shadow p.
func (p *Plugin) shadowValidate(ctx context.Context, plant host.Plant, principal string, live error, later bool) {
	if !p.sampled() {
		return
	}
	j := p.newJob(ctx, "validate", principal, live, later)
	j.plant = host.Plant{ID: plant.ID, Name: strings.Clone(plant.Name), Tag: strings.Clone(plant.Tag), HasTag: plant.HasTag}
	j.d.Plant = &j.plant
	p.startShadow(j)
}

func (p *Plugin) sampled() bool {
	return p.percent >= 100 || rand.IntN(100) < p.percent
}

func (p *Plugin) newJob(ctx context.Context, phase, principal string, live error, later bool) *shadowJob {
	slot, _ := FileRole(p.info.File)
	// The request's values without its deadline: the decision log's and
	// the tracer's (its span, the parent of the shadow's own); the
	// exchange and the access log's trace are replaced in runShadow.
	j := &shadowJob{live: live, later: later, ctx: context.WithoutCancel(ctx)}
	j.d = ShadowDecision{Plugin: pluginName(slot + ".wasm"), File: p.info.File, Phase: phase, Live: verdictOf(live),
		Principal: strings.Clone(knownPrincipal(ctx, principal))}
	if x := host.ExchangeFrom(ctx); x != nil {
		j.x = x.Detach(p.headers)
		j.d.RequestID = j.x.RequestID
	} else {
		j.x = &host.Exchange{}
	}
	return j
}

// startShadow runs j on its own goroutine, after the request's answer is
// decided and never waited for, or drops it when maxShadowPending calls
// of p are pending already.
func (p *Plugin) startShadow(j *shadowJob) {
	select {
	case p.shadowPending <- struct{}{}:
	default:
		if p.shadowRec != nil {
			p.shadowRec.ShadowDropped(j.d.Plugin)
		}
		return
	}
	go func() {
		defer func() { <-p.shadowPending }()
		p.runShadow(j)
	}()
}

// runShadow makes the shadow call under the shadow's own deadline (pool
// wait included) and records it.
func (p *Plugin) runShadow(j *shadowJob) {
	// No access-log trace: the request's answer is written already, and
	// a shadow never names itself as the plugin that denied it.
	ctx, cancel := context.WithTimeout(host.WithTrace(host.WithExchange(j.ctx, j.x), nil), 2*p.limits.Timeout)
	defer cancel()
	start := time.Now()
	var err error
	var named string
	if j.d.Phase == "authorize" {
		named, err = p.Authorize(ctx, j.req)
	} else {
		err = p.Validate(ctx, j.plant, j.d.Principal)
	}
	j.d.Took = time.Since(start)
	p.note(ctx, j.d.Phase, start, err)
	if p.decisions != nil && p.decisions.Wants(ctx) {
		if j.d.Phase == "authorize" {
			p.recordAuthorize(ctx, j.req, named, start, err, true)
		} else {
			p.recordValidate(ctx, j.plant, j.d.Principal, start, err, true)
		}
	}
	if p.shadowRec == nil {
		return
	}
	if outcome(err) == OutcomeBusy {
		// Pool exhausted or shutting down: a cost bound, not the shadow's verdict.
		p.shadowRec.ShadowDropped(j.d.Plugin)
		return
	}
	j.d.Shadow = verdictOf(err)
	j.d.Outcome = compareShadow(j.live, err, j.later)
	p.shadowRec.Shadow(j.d)
}
