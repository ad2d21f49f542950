package wasm

import (
	"context"
	"fmt"
	"log/slog"
	"runtime"
	"time"

	"github.com/plantgate/plantgate/host"
	"github.com/plantgate/plantgate/host/pluginsig"
)

// TokenSource answers a plugin's token_lookup host call. host.Store
// satisfies it.
type TokenSource interface {
	// Token returns the token whose SHA-256 digest is digest, or an error
	// whose host.Code is host.ErrTokenNotFound when there is none.
	Token(ctx context.Context, digest [32]byte) (host.Token, error)
}

var _ TokenSource = host.Store(nil)

// StampedTokenSource is a TokenSource whose answers carry a stamp that
// identifies the store read they come from (tokencache.Cache.TokenStamped),
// zero when the answer was not kept. A plugin's kept decisions
// (decisioncache.go) need one: with another TokenSource nothing is kept.
type StampedTokenSource interface {
	TokenSource
	TokenStamped(ctx context.Context, digest [32]byte) (host.Token, time.Time, error)
}

// Options configure Load and LoadPlugin. The zero value is ready to use:
// every field has a default, applied in one place (Options.withDefaults).
type Options struct {
	// CacheDir keeps compiled plugins on disk between runs, keyed by content,
	// so that a standard-Go plugin starts in ~0.1 s instead of ~1 s.
	//
	// Optional. Default: "" (an in-memory cache that dies with the process).
	CacheDir string

	// Tokens answers the token_lookup host function.
	//
	// Optional. Default: nil, and every lookup answers abi.LookupUnavailable.
	Tokens TokenSource

	// Logger receives plugin faults, plugin log lines and their stdout and
	// stderr, each with the attribute plugin=<name>.
	//
	// Optional. Default: slog.Default().
	Logger *slog.Logger

	// Limits apply to every plugin; a sidecar file overrides them field by
	// field. Zero fields take the defaults of DefaultLimits.
	//
	// Optional. Default: DefaultLimits().
	Limits Limits

	// Observer is told about every phase call and reload, for metrics.
	//
	// Optional. Default: nil (nothing is observed).
	Observer Observer

	// Decisions receives every phase call's decision, for the decision log
	// and trace spans (host.Decision). Wants is asked first, so a request
	// that records nothing builds nothing.
	//
	// Optional. Default: nil (no decision is recorded).
	Decisions host.DecisionRecorder

	// KV backs the plugins' KV host functions (abi.ImportKVGet and its
	// siblings), each plugin in its own namespace. host.KV is implemented
	// by the Redis store, so the KV is fleet-wide.
	//
	// Optional. Default: nil, and every KV call answers abi.KVUnavailable.
	KV host.KV

	// headers are the request headers one plugin's sidecar asks for
	// (Sidecar.Headers); the loaders set it per plugin.
	headers []string

	// decisions is one plugin's sidecar "decision_cache"; the loaders
	// set it per plugin.
	decisions DecisionCache
	// Shadows is told every shadow plugin's decision compared with the live
	// chain's, and every sampled shadow call dropped (shadow.go).
	//
	// Optional. Default: nil (shadows run, nothing records them).
	Shadows ShadowRecorder

	// percent is one shadow's sampling rate or one canary's share
	// (Sidecar.SamplePercent, Sidecar.CanaryPercent); the loaders set it.
	percent int

	// Trust, when it holds keys, makes every plugin carry a valid signature
	// by one of them over its module and sidecar (see package pluginsig);
	// an unsigned or tampered plugin refuses the chain.
	//
	// Optional. Default: nil (signatures are neither needed nor checked).
	Trust *pluginsig.Keyring

	// wazeroChecks makes Limits.Interrupt on use wazero's termination
	// checks rather than the loop guard (guard.go): benchmarks compare them.
	wazeroChecks bool

	// clock is the time source of the log rate limiter and the KV windows;
	// tests stop it.
	clock func() time.Time
}

// Limits bound one plugin. Each field is also a key of the sidecar file's
// "limits" object, named in its comment.
type Limits struct {
	// MemoryMiB caps each instance's linear memory ("memory_mib"). An
	// instance whose memory grows past three quarters of it is recycled
	// after its call, as WebAssembly memory never shrinks.
	//
	// Optional. Default: 64.
	MemoryMiB uint32

	// Timeout bounds one phase call ("timeout_ms"). A call still running
	// at the deadline is stopped and fails closed.
	//
	// Optional. Default: 100 ms.
	Timeout time.Duration

	// Instances is the size of the plugin's pool, so the number of calls
	// into the plugin that can run at once ("instances"). All are created at
	// load. Each holds a Go guest's linear memory (a few MiB), so more
	// instances than can run at once cost memory for nothing: one per CPU,
	// plus one so that a call waiting on the store does not idle a CPU.
	//
	// Optional. Default: runtime.GOMAXPROCS(0) + 1.
	Instances int

	// MaxCalls recycles an instance after this many calls ("max_calls"), so
	// a guest's heap growth and fragmentation cannot pile up. An instance is
	// also recycled as soon as its memory passes three quarters of
	// MemoryMiB, so this is the slow backstop: making a standard-Go
	// instance costs milliseconds and fresh memory, and at 10,000 calls it
	// was 3% of the gateway's CPU under load.
	//
	// Optional. Default: 100000.
	MaxCalls int

	// Interrupt says whether a call still running at Timeout is stopped
	// ("interrupt": true or false).
	//
	// On, the module is rewritten with a loop guard (guard.go, package
	// loopguard): every loop iteration reads a stop flag the call's timer
	// sets, and the call traps at its deadline; a module the rewriter
	// refuses gets wazero's termination checks (WithCloseOnContextDone),
	// which exit to Go at every loop iteration instead (several times
	// slower for a standard-Go plugin, see BenchmarkBundled).
	// Off, the plugin runs without either, and nothing can stop a call: each
	// instance makes its calls on a goroutine of its own (runner.go), so a
	// call still running at Timeout answers its request with a fault then,
	// logged once; its instance is written off (Stats.WrittenOff) and
	// replaced in the background, and closed if the call ever returns. A
	// written-off call that reaches a host function is ended there. One that
	// spins without calling the host holds a CPU, and Go cannot preempt the
	// native code it runs: the next garbage collection waits for it, which
	// stalls the whole process. Turn interrupt off only for plugins the
	// operator trusts to end their calls, as for any code linked into the
	// gateway itself; memory limits and the sandbox still apply.
	//
	// Optional. Default: InterruptOn.
	Interrupt Interrupt
}

// Interrupt is Limits.Interrupt: unset, on or off.
type Interrupt uint8

const (
	InterruptUnset Interrupt = iota // take the default (on)
	InterruptOn
	InterruptOff
)

func (i Interrupt) String() string {
	switch i {
	case InterruptOn:
		return "on"
	case InterruptOff:
		return "off"
	}
	return "unset"
}

// Defaults and bounds of Limits.
const (
	DefaultMemoryMiB = 64
	DefaultTimeout   = 100 * time.Millisecond
	DefaultMaxCalls  = 100000

	maxMemoryMiB = 4096 // 65536 pages: all that wasm32 can address
	maxTimeout   = time.Minute
	maxInstances = 1024
	maxMaxCalls  = 1 << 30
)

// startTimeout bounds making one instance: its start function (Go's runtime
// and package init), the ABI checks and plantgate_configure.
const startTimeout = 5 * time.Second

// DefaultLimits returns the limits a plugin gets when neither Options nor
// its sidecar say otherwise.
func DefaultLimits() Limits {
	return Limits{
		MemoryMiB: DefaultMemoryMiB,
		Timeout:   DefaultTimeout,
		Instances: runtime.GOMAXPROCS(0) + 1,
		MaxCalls:  DefaultMaxCalls,
		Interrupt: InterruptOn,
	}
}

// Or returns l with each zero field taken from base.
func (l Limits) Or(base Limits) Limits {
	if l.MemoryMiB == 0 {
		l.MemoryMiB = base.MemoryMiB
	}
	if l.Timeout == 0 {
		l.Timeout = base.Timeout
	}
	if l.Instances == 0 {
		l.Instances = base.Instances
	}
	if l.MaxCalls == 0 {
		l.MaxCalls = base.MaxCalls
	}
	if l.Interrupt == InterruptUnset {
		l.Interrupt = base.Interrupt
	}
	return l
}

// check reports the first limit outside its bounds, naming its sidecar key.
func (l Limits) check() error {
	switch {
	case l.MemoryMiB < 1 || l.MemoryMiB > maxMemoryMiB:
		return rangeError("memory_mib", int64(l.MemoryMiB), 1, maxMemoryMiB)
	case l.Timeout < time.Millisecond || l.Timeout > maxTimeout:
		return rangeError("timeout_ms", l.Timeout.Milliseconds(), 1, maxTimeout.Milliseconds())
	case l.Instances < 1 || l.Instances > maxInstances:
		return rangeError("instances", int64(l.Instances), 1, maxInstances)
	case l.MaxCalls < 1 || l.MaxCalls > maxMaxCalls:
		return rangeError("max_calls", int64(l.MaxCalls), 1, maxMaxCalls)
	case l.Interrupt != InterruptOn && l.Interrupt != InterruptOff:
		return fmt.Errorf(`"limits.interrupt" must be true or false, got %s`, l.Interrupt)
	}
	return nil
}

// memoryPages is MemoryMiB in 64 KiB WebAssembly pages.
func (l Limits) memoryPages() uint32 { return l.MemoryMiB * 16 }

// recycleBytes is the memory size past which an instance is recycled.
func (l Limits) recycleBytes() uint32 {
	return uint32(uint64(l.MemoryMiB) << 20 * 3 / 4)
}

// WithRequestHeaders returns o showing a plugin loaded by LoadPlugin the
// request headers names lists, as its sidecar's "headers" does
// (Sidecar.Headers, checked and canonical). LoadPlugin loads one file
// outside any chain (plugin check, plugin run) and reads no sidecar; Load
// and Reloader take each plugin's list from its own sidecar instead.
//
//	p, err := wasm.LoadPlugin(ctx, file, sc.Config, opts.WithRequestHeaders(sc.Headers))
func (o Options) WithRequestHeaders(names []string) Options {
	o.headers = names
	return o
}

func (o Options) withDefaults() Options {
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	o.Limits = o.Limits.Or(DefaultLimits())
	if o.clock == nil {
		o.clock = time.Now
	}
	return o
}
