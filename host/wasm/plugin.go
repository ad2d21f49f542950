package wasm

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/imports/wasi_snapshot_preview1"

	"github.com/plantgate/plantgate/host"
	"github.com/plantgate/plantgate/host/wasm/loopguard"
	"github.com/plantgate/plantgate/sdk/abi"
)

// Plugin is one loaded policy plugin: its compiled module, its own wazero
// runtime (so its memory limit is its own) and its pool of instances. It is
// safe for concurrent use.
type Plugin struct {
	info   PluginInfo
	log    *slog.Logger
	config []byte // nil: no config, plantgate_configure is not called
	limits Limits
	tokens TokenSource
	kv     host.KV    // nil: every KV call answers abi.KVUnavailable
	leases leases     // kv_take's budgets, shared by the instances (lease.go)
	slides leases     // kv_take_sliding's budgets, likewise
	isGo   bool       // built by Go (goBuilt): load errors name Go's fixes
	opa    *opaModule // an OPA policy (opa.go); nil for a Plantgate module
	// headers are the request headers the sidecar asks for, canonical.
	headers []string
	// decisionCfg is the sidecar's decision_cache; each chain keeps the
	// decisions (Chain), given a stamped token source.
	decisionCfg DecisionCache
	stamped     StampedTokenSource // Options.Tokens when it gives stamps
	obs         Observer           // nil: not observed
	clock       func() time.Time

	rt       wazero.Runtime
	compiled wazero.CompiledModule
	modCfg   wazero.ModuleConfig
	cache    *compileCache
	// guarded: Limits.Interrupt is on and the module was rewritten with
	// loop guards (guard.go), so it runs without wazero's termination
	// checks and each instance is stopped through its globals.
	guarded bool
	// wazeroCloses: wazero's termination checks are on, so wazero may
	// close an instance during a call, and its memory stays in the Go heap
	// (linearmem.go).
	wazeroCloses bool

	pool pool
	// late is how many of the pool's places are still out in calls that
	// Close gave up waiting for (pool.go, closeLate); 0 otherwise.
	late  atomic.Int64
	logs  logLimiter
	stats struct {
		created, discarded, calls, logDropped atomic.Uint64
		memory                                atomic.Int64 // bytes of linear memory of live instances
		prefetched, kept                      atomic.Uint64
		writtenOff                            atomic.Uint64 // calls abandoned at their deadline (runner.go)
		stuck                                 atomic.Int64  // ... that have not returned yet
		kvBadArguments, kvOverBudget          atomic.Uint64
	}
	// Tests: refilled is called after refill put an instance in the pool,
	// returned after a written-off call returned and was closed.
	refilled, returned func()
	rtOnce             sync.Once
	prefetch           atomic.Bool // see prefetch.go

	closeOnce sync.Once
	closeErr  error
	principal atomic.Pointer[string] // the last principal allowed as (principalString)

	// decisions records each phase call's decision (Options.Decisions);
	// nil: none.
	decisions host.DecisionRecorder
	// A shadow's sampling rate, or a canary's share of principals, in
	// percent (shadow.go); 0 for a live plugin.
	percent int
	// shadowPending bounds a shadow's calls in flight (maxShadowPending);
	// shadowRec is told their decisions.
	shadowPending chan struct{}
	shadowRec     ShadowRecorder
}

// PluginInfo describes a loaded plugin.
type PluginInfo struct {
	Name        string        // "auth" for 10-auth.wasm
	File        string        // the file name, "10-auth.wasm"
	Phases      []string      // the phases it serves: "authorize", "validate"
	ABIVersion  uint32        // the version the module speaks, abi.MinVersion to abi.Version
	Size        int64         // bytes of the .wasm file
	SHA256      [32]byte      // digest of the .wasm file
	CompileTime time.Duration // compiling, or reading the compilation cache
	HasConfig   bool          // a config was passed to plantgate_configure
	// ConfigRequired: the module's plantgate_config_required answered
	// non-zero, so it loads only with a config.
	ConfigRequired bool
	Limits         Limits // the limits in force
	Role           string // RoleLive, RoleShadow or RoleCanary (from the file name)
	Percent        int    // a shadow's sampling rate, a canary's share of principals; 0 when live
	// Kind is KindPlantgate for a module of Plantgate's ABI, KindRego for
	// an OPA policy (opa build -t wasm). A Rego policy's ABIVersion is
	// abi.Version: it is shown everything a module of that version is
	// (request context, principal), through its input.
	Kind string
	// OPAABI is a Rego policy's OPA Wasm ABI version ("1.3"); Builtins the
	// builtins it calls through the host (opa_builtinN), sorted.
	OPAABI   string
	Builtins []string

	phases uint32
}

// The kinds of module (PluginInfo.Kind).
const (
	KindPlantgate = "plantgate"
	KindRego      = "rego"
)

// Stats counts a plugin's instances and calls; tests and metrics read it.
type Stats struct {
	Live       int    // instances alive now, idle or in a call
	Created    uint64 // instances created, including the pre-warmed ones
	Discarded  uint64 // instances closed after a fault, recycling or Close
	Calls      uint64 // phase calls made
	LogDropped uint64 // log lines dropped by the rate limit
	// WrittenOff counts calls that did not return by their deadline with
	// Limits.Interrupt off: each instance was given up and replaced.
	WrittenOff uint64
	// Stuck is how many of those have not returned yet; each holds its
	// instance and a goroutine (Live counts it, the pool does not).
	Stuck int64
	// Kept counts authorize requests answered from a kept decision,
	// without a call (decisioncache.go).
	Kept uint64
	// KVBadArguments counts KV calls answered abi.KVBadArgument (a key,
	// value, TTL, window or buffer the host refuses): the guest's bugs.
	KVBadArguments uint64
	// KVOverBudget counts KV calls past a phase call's budget
	// (abi.KVBudget), answered abi.KVOverBudget.
	KVOverBudget uint64
}

// LoadPlugin compiles, checks and pre-warms the plugin at wasmPath. config,
// when not nil, is passed verbatim to the plugin's plantgate_configure
// (ReadSidecar reads it from the plugin's sidecar). The plugin runs with
// opts.Limits.
//
// It is for one file outside any chain (plugin check, plugin run): chains
// are built by Load and Reloader from a Source, through the same compile
// and pre-warm steps.
func LoadPlugin(ctx context.Context, wasmPath string, config []byte, opts Options) (*Plugin, error) {
	opts = opts.withDefaults()
	cache, err := newCompileCache(opts.CacheDir)
	if err != nil {
		return nil, err
	}
	defer cache.release(ctx)
	return loadPlugin(ctx, wasmPath, config, opts, cache)
}

// pluginName is the plugin's name for logs: the file name without its
// NN- prefix and .wasm extension.
func pluginName(file string) string {
	name := strings.TrimSuffix(file, ".wasm")
	if fileName.MatchString(file) {
		name = name[3:]
	}
	return name
}

func loadPlugin(ctx context.Context, path string, config []byte, opts Options, cache *compileCache) (*Plugin, error) {
	bin, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("plugin %s: %w", filepath.Base(path), err)
	}
	return loadPluginBytes(ctx, path, bin, config, opts, cache)
}

// loadPluginBytes is loadPlugin for a module already read from path, so a
// reload compiles exactly the bytes it hashed.
func loadPluginBytes(ctx context.Context, path string, bin, config []byte, opts Options, cache *compileCache) (*Plugin, error) {
	file := filepath.Base(path)
	p, err := compilePlugin(ctx, path, bin, bytes.Clone(config), opts, cache)
	if err != nil {
		err = memoryError(ctx, err, path, bin, config, opts, cache)
		return nil, fmt.Errorf("plugin %s: %w", file, err)
	}
	// Pre-warm: the channel is FIFO, so this replaces each free place once.
	for range p.limits.Instances {
		<-p.pool.slots
		in, err := p.newInstance(ctx)
		p.pool.slots <- in
		if err != nil {
			_ = p.Close(ctx)
			err = memoryError(ctx, err, path, bin, config, opts, cache)
			return nil, fmt.Errorf("plugin %s: %w", file, err)
		}
	}
	p.log.Debug("policy plugin loaded", "phases", p.info.Phases, "compile_time", p.info.CompileTime,
		"instances", p.limits.Instances)
	return p, nil
}

// compilePlugin makes everything but the instances.
func compilePlugin(ctx context.Context, path string, bin, config []byte, opts Options, cache *compileCache) (*Plugin, error) {
	file := filepath.Base(path)
	limits := opts.Limits
	if err := limits.check(); err != nil {
		return nil, err
	}
	if len(config) > abi.MaxRequest {
		return nil, fmt.Errorf("config of %d bytes, over the %d bytes (abi.MaxRequest) a module can be sent", len(config), abi.MaxRequest)
	}
	var err error
	if !bytes.HasPrefix(bin, []byte("\x00asm")) {
		return nil, notWasm(bin)
	}
	name := pluginName(file)
	_, role := FileRole(file)
	p := &Plugin{
		info: PluginInfo{
			Name:      name,
			File:      file,
			Size:      int64(len(bin)),
			SHA256:    sha256.Sum256(bin),
			HasConfig: config != nil,
			Limits:    limits,
			Percent:   opts.percent,
			Role:      role,
			Kind:      KindPlantgate,
		},
		log:     opts.Logger.With("plugin", name),
		config:  config,
		limits:  limits,
		tokens:  opts.Tokens,
		kv:      opts.KV,
		headers: opts.headers,
		// Kept decisions need stamped token answers.
		decisionCfg: opts.decisions,
		obs:         opts.Observer,
		clock:       opts.clock,
		cache:       cache,
		percent:     opts.percent,

		shadowPending: make(chan struct{}, maxShadowPending),
		shadowRec:     opts.Shadows,
	}
	p.stamped, _ = opts.Tokens.(StampedTokenSource)
	p.pool.init(limits.Instances)
	p.logs.init(opts.clock())
	p.decisions = opts.Decisions
	code := bin
	if limits.Interrupt == InterruptOn && !opts.wazeroChecks {
		// A module the rewriter refuses keeps wazero's checks: compiling
		// it then gives the reason it is broken, if it is.
		if guarded, err := loopguard.Instrument(bin); err == nil {
			code, p.guarded = guarded, true
		}
	}
	p.wazeroCloses = limits.Interrupt == InterruptOn && !p.guarded
	rc := wazero.NewRuntimeConfig().
		WithCompilationCache(cache.c).
		WithMemoryLimitPages(limits.memoryPages()).
		WithCloseOnContextDone(p.wazeroCloses)
	p.rt = wazero.NewRuntimeWithConfig(ctx, rc)
	cache.acquire()

	start := time.Now()
	p.compiled, err = p.rt.CompileModule(ctx, code)
	p.info.CompileTime = time.Since(start)
	if err != nil {
		_ = p.Close(ctx)
		return nil, memorySuspect{fmt.Errorf("compile: %w", err)}
	}
	if isOPA(p.compiled) {
		if err := p.compileOPA(ctx); err != nil {
			_ = p.Close(ctx)
			return nil, err
		}
	} else {
		p.isGo = goBuilt(bin)
		if err := checkCompiled(p.compiled, p.isGo); err != nil {
			_ = p.Close(ctx)
			return nil, err
		}
		if err := p.instantiateImports(ctx); err != nil {
			_ = p.Close(ctx)
			return nil, err
		}
	}
	startFns := []string{abi.ExportInitialize}
	if p.guarded {
		startFns = nil // newInstance calls it under the instance's guard
	}
	p.modCfg = wazero.NewModuleConfig().
		WithName("").
		WithStartFunctions(startFns...).
		WithSysWalltime().
		WithSysNanotime().
		WithRandSource(rand.Reader)
	return p, nil
}

// instantiateImports provides the host module and WASI to the runtime.
func (p *Plugin) instantiateImports(ctx context.Context) error {
	_, err := p.rt.NewHostModuleBuilder(abi.HostModule).
		NewFunctionBuilder().
		WithGoModuleFunction(api.GoModuleFunc(p.hostLog), sigLog.params, sigLog.results).
		WithParameterNames("level", "ptr", "len").
		Export(abi.ImportLog).
		NewFunctionBuilder().
		WithGoModuleFunction(api.GoModuleFunc(p.hostTokenLookup), sigLookup.params, sigLookup.results).
		WithParameterNames("hash_ptr", "hash_len", "out_ptr", "out_cap").
		Export(abi.ImportTokenLookup).
		NewFunctionBuilder().
		WithGoModuleFunction(api.GoModuleFunc(p.hostKVGet), sigKVGet.params, sigKVGet.results).
		WithParameterNames("key_ptr", "key_len", "out_ptr", "out_cap").
		Export(abi.ImportKVGet).
		NewFunctionBuilder().
		WithGoModuleFunction(api.GoModuleFunc(p.hostKVSet), sigKVSet.params, sigKVSet.results).
		WithParameterNames("key_ptr", "key_len", "val_ptr", "val_len", "ttl_ms").
		Export(abi.ImportKVSet).
		NewFunctionBuilder().
		WithGoModuleFunction(api.GoModuleFunc(p.hostKVDelete), sigKVDelete.params, sigKVDelete.results).
		WithParameterNames("key_ptr", "key_len").
		Export(abi.ImportKVDelete).
		NewFunctionBuilder().
		WithGoModuleFunction(api.GoModuleFunc(p.hostKVIncr), sigKVCount.params, sigKVCount.results).
		WithParameterNames("key_ptr", "key_len", "delta", "window_ms").
		Export(abi.ImportKVIncr).
		NewFunctionBuilder().
		WithGoModuleFunction(api.GoModuleFunc(p.hostKVTake), sigKVCount.params, sigKVCount.results).
		WithParameterNames("key_ptr", "key_len", "limit", "window_ms").
		Export(abi.ImportKVTake).
		NewFunctionBuilder().
		WithGoModuleFunction(api.GoModuleFunc(p.hostKVTakeSliding), sigKVCount.params, sigKVCount.results).
		WithParameterNames("key_ptr", "key_len", "limit", "window_ms").
		Export(abi.ImportKVTakeSliding).
		Instantiate(ctx)
	if err != nil {
		return fmt.Errorf("host module: %w", err)
	}
	if _, err := wasi_snapshot_preview1.Instantiate(ctx, p.rt); err != nil {
		return fmt.Errorf("wasi: %w", err)
	}
	return nil
}

// Info describes the plugin.
func (p *Plugin) Info() PluginInfo {
	info := p.info
	info.Phases = slices.Clone(info.Phases)
	info.Builtins = slices.Clone(info.Builtins)
	return info
}

// Stats returns the plugin's counters.
func (p *Plugin) Stats() Stats {
	created, discarded := p.stats.created.Load(), p.stats.discarded.Load()
	return Stats{
		Live:       int(created - discarded),
		Created:    created,
		Discarded:  discarded,
		Calls:      p.stats.calls.Load(),
		LogDropped: p.stats.logDropped.Load(),
		WrittenOff: p.stats.writtenOff.Load(),
		Stuck:      p.stats.stuck.Load(),
		Kept:       p.stats.kept.Load(),

		KVBadArguments: p.stats.kvBadArguments.Load(),
		KVOverBudget:   p.stats.kvOverBudget.Load(),
	}
}

// Memory is the linear memory, in bytes, of the plugin's live instances as
// of the end of each one's last call. WebAssembly memory never shrinks, so
// a steady figure under load means the guests' heaps are steady.
func (p *Plugin) Memory() int64 { return p.stats.memory.Load() }

// Close waits for the calls in flight (until ctx is done), then closes every
// instance and the runtime. Calls after Close fail with host.ErrNotReady.
//
// A written-off call (Stats.Stuck) is not waited for: its runtime and
// compiled code stay open under it, as closing them could crash the call's
// goroutine, until it returns (if ever), and Close says so in its error.
// Neither are calls still running when ctx ends: each closes its instance
// as it returns, and the last of them the runtime.
func (p *Plugin) Close(ctx context.Context) error {
	p.closeOnce.Do(func() {
		var running int
		running, p.closeErr = p.pool.close(ctx, p.discard)
		if running > 0 {
			p.late.Store(int64(running))
			p.closeLate() // the ones that came back meanwhile
			p.closeErr = fmt.Errorf("%w; each closes as it returns", p.closeErr)
		} else if n := p.stats.stuck.Load(); n > 0 {
			err := fmt.Errorf("%d call(s) past their deadline never returned (limits.interrupt is off); their runtime is left open", n)
			p.closeErr = errors.Join(p.closeErr, err)
		} else if err := p.closeRuntime(ctx); err != nil && p.closeErr == nil {
			p.closeErr = err
		}
		if p.closeErr != nil {
			p.closeErr = fmt.Errorf("plugin %s: close: %w", p.info.File, p.closeErr)
		}
	})
	return p.closeErr
}

// closeRuntime closes the runtime, once: from Close, or from the last
// written-off call to return after Close.
func (p *Plugin) closeRuntime(ctx context.Context) (err error) {
	p.rtOnce.Do(func() {
		if p.rt == nil {
			return
		}
		// Closes whatever is still running when Close's ctx ended first.
		err = p.rt.Close(ctx)
		p.cache.release(ctx)
	})
	return err
}

// compileCache is a wazero compilation cache shared by the plugins of one
// Load and closed when the last of them is. Plugins with Limits.Interrupt
// on and off can share it: wazero keys compiled code by the module's bytes
// and whether it was compiled with termination checks
// (TestInterruptKindsNotShared).
type compileCache struct {
	c    wazero.CompilationCache
	refs atomic.Int32
}

func newCompileCache(dir string) (*compileCache, error) {
	c := &compileCache{c: wazero.NewCompilationCache()}
	if dir != "" {
		var err error
		if c.c, err = wazero.NewCompilationCacheWithDir(dir); err != nil {
			return nil, fmt.Errorf("plugin compilation cache: %w", err)
		}
	}
	c.refs.Store(1)
	return c, nil
}

func (c *compileCache) acquire() { c.refs.Add(1) }

func (c *compileCache) release(ctx context.Context) {
	if c.refs.Add(-1) == 0 {
		_ = c.c.Close(ctx)
	}
}
