package wasm

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"
	"time"

	"github.com/tetratelabs/wazero/api"

	"github.com/plantgate/plantgate/host"
	"github.com/plantgate/plantgate/sdk/abi"
)

// pool hands out a plugin's instances, one call at a time each.
//
// slots holds one entry per pool place: an idle instance, or nil for a free
// place whose instance was discarded and is made again on the next acquire.
// Taking an entry is the right to call; putting it back ends the call. A
// channel rather than sync.Pool: sync.Pool drops items on GC without
// closing them, and an instance that is not closed leaks its memory.
type pool struct {
	slots   chan *instance
	done    chan struct{}
	closing atomic.Bool
}

// init makes a pool of n free places.
func (pl *pool) init(n int) {
	pl.slots, pl.done = make(chan *instance, n), make(chan struct{})
	for range n {
		pl.slots <- nil
	}
}

// instance is one instantiated module with the state of its calls.
type instance struct {
	mod       api.Module
	mem       api.Memory
	buffer    api.Function
	authorize api.Function
	validate  api.Function
	configure api.Function
	env       api.Module   // an OPA policy's env module (opa.go), else nil
	opa       *opaInstance // an OPA policy's evaluation state, else nil

	stack   [2]uint64 // params and results of every call: at most two
	req     []byte    // the encoded request, reused
	bufPtr  uint32    // the guest's request buffer (0: ask plantgate_buffer)
	bufSize uint32    // ... valid for this many bytes (the largest size asked)
	calls   int
	memory  uint32 // linear memory size last counted in Plugin.stats.memory
	cc      *callContext
	runner  *runner // makes the calls when Limits.Interrupt is off, else nil
	guard   *guard  // stops a call of a guarded plugin (guard.go), else nil
	stdout  *logWriter
	stderr  *logWriter
}

// acquire takes an instance for one call, making it when its place is free,
// and waits for a place until ctx is done.
func (p *Plugin) acquire(ctx context.Context) (*instance, error) {
	if ctx.Err() != nil {
		// Calling with a done context would close the instance for nothing.
		return nil, &host.Error{Code: host.ErrPluginBusy, Message: msgBusy}
	}
	var in *instance
	select {
	case in = <-p.pool.slots:
	default:
		waitStart := time.Now()
		select {
		case in = <-p.pool.slots:
			p.noteWait(waitStart)
		case <-ctx.Done():
			p.noteWait(waitStart)
			return nil, &host.Error{Code: host.ErrPluginBusy, Message: msgBusy}
		case <-p.pool.done:
			return nil, &host.Error{Code: host.ErrNotReady, Message: msgClosed}
		}
	}
	if p.pool.closing.Load() {
		p.putBack(in)
		return nil, &host.Error{Code: host.ErrNotReady, Message: msgClosed}
	}
	if in == nil {
		var err error
		if in, err = p.newInstance(ctx); err != nil {
			p.putBack(nil)
			p.log.ErrorContext(ctx, "policy plugin instance failed to start", "err", err)
			return nil, &host.Error{Code: host.ErrPluginFault, Message: msgFault}
		}
	}
	return in, nil
}

// release ends a call, discarding the instance when it can no longer be
// trusted or has had its share of calls or memory.
func (p *Plugin) release(ctx context.Context, in *instance, discard bool) {
	if in.stderr.pending() {
		in.stderr.flush()
	}
	in.calls++
	size := in.mem.Size()
	if size != in.memory {
		p.stats.memory.Add(int64(size) - int64(in.memory))
		in.memory = size
	}
	if !discard && (in.calls >= p.limits.MaxCalls || size > p.limits.recycleBytes()) {
		discard = true
	}
	if discard {
		p.discard(ctx, in)
		// The next request takes another instance, or waits for this
		// one, rather than making one itself.
		go p.refill()
		return
	}
	p.putBack(in)
}

// putBack returns a place to the pool: an idle instance, or nil for a
// free place. After a Close that gave up on running calls, the place is
// closed instead (closeLate).
func (p *Plugin) putBack(in *instance) {
	p.pool.slots <- in
	// After the send: Close sets late before it drains, so one of the two
	// takes this place whichever runs first.
	if p.late.Load() > 0 {
		p.closeLate()
	}
}

// closeLate closes the places that came back after Close gave up waiting
// for them, and the runtime with the last of them. Closing the runtime
// while a call runs would unmap the memory and code under it (linearmem.go;
// a host function writing a token record then crashed the process), so a
// call that outlives Close's deadline is let finish, and closes.
func (p *Plugin) closeLate() {
	for {
		select {
		case in := <-p.pool.slots:
			if in != nil {
				p.discard(context.Background(), in)
			}
			if p.late.Add(-1) == 0 && p.stats.stuck.Load() == 0 {
				_ = p.closeRuntime(context.Background())
			}
		default:
			return
		}
	}
}

// refill makes an instance for a free place of the pool, off the request
// path. On failure the place stays free: the next acquire tries again and
// fails its request closed if it cannot.
func (p *Plugin) refill() {
	var in *instance
	if !p.pool.closing.Load() {
		ctx := context.Background()
		var err error
		if in, err = p.newInstance(ctx); err != nil {
			p.log.ErrorContext(ctx, "policy plugin instance failed to start", "err", err)
			in = nil
		}
	}
	p.putBack(in)
	if p.refilled != nil {
		p.refilled()
	}
}

// discard closes an instance: a module that trapped or panicked stays
// callable in wazero, and one that is only dropped leaks its memory.
func (p *Plugin) discard(ctx context.Context, in *instance) {
	in.stdout.flush()
	in.stderr.flush()
	_ = in.mod.Close(ctx)
	if in.env != nil {
		_ = in.env.Close(ctx)
	}
	in.cc.stop()
	if in.runner != nil {
		close(in.runner.jobs)
	}
	p.stats.discarded.Add(1)
	p.stats.memory.Add(-int64(in.memory))
}

// close stops new calls and closes every instance as its call ends. When
// ctx ends first it returns how many places are still out in calls.
func (pl *pool) close(ctx context.Context, discard func(context.Context, *instance)) (running int, err error) {
	pl.closing.Store(true)
	close(pl.done)
	for i := range cap(pl.slots) {
		select {
		case in := <-pl.slots:
			if in != nil {
				discard(ctx, in)
			}
		case <-ctx.Done():
			return cap(pl.slots) - i, fmt.Errorf("calls still running: %w", ctx.Err())
		}
	}
	return 0, nil
}

// newInstance instantiates the module, checks its ABI version and phases
// and configures it.
func (p *Plugin) newInstance(ctx context.Context) (made *instance, err error) {
	ctx, cancel := context.WithTimeout(ctx, startTimeout)
	defer cancel()
	in := &instance{
		stdout: newLogWriter(p, "stdout", slog.LevelInfo),
		stderr: newLogWriter(p, "stderr", slog.LevelWarn),
		cc:     newCallContext(nil),
	}
	cfg := p.modCfg.WithStdout(in.stdout).WithStderr(in.stderr)
	if p.opa != nil {
		in.mod, err = p.instantiateOPA(ctx, in, cfg)
	} else {
		in.mod, err = p.rt.InstantiateModule(p.withLinearMemory(ctx), p.compiled, cfg)
	}
	if err != nil {
		in.stdout.flush()
		return nil, memorySuspect{fmt.Errorf("instantiate: %w", withCrash(err, in))}
	}
	p.stats.created.Add(1)
	defer func() {
		if err != nil {
			err = withCrash(err, in)
			p.discard(ctx, in)
		}
	}()
	if p.guarded {
		if err := p.startGuarded(ctx, in); err != nil {
			err = fmt.Errorf("instantiate: %w", err)
			if ctx.Err() != nil {
				return nil, err // a hang: more memory would not help
			}
			return nil, memorySuspect{err}
		}
		// The rest of the set-up runs under the start-up deadline too.
		unwatch := context.AfterFunc(ctx, in.guard.halt)
		defer unwatch()
		defer func() {
			if !unwatch() && err == nil {
				made, err = nil, startErr(ctx, errors.New("instance set-up failed"))
			}
		}()
	}
	if p.opa != nil {
		if err := p.setupOPA(ctx, in); err != nil {
			return nil, err
		}
		in.cc.opa = in
		return p.readied(in)
	}
	in.mem = in.mod.ExportedMemory(memoryName)
	in.memory = in.mem.Size()
	p.stats.memory.Add(int64(in.memory))
	in.buffer = in.mod.ExportedFunction(abi.ExportBuffer)
	in.authorize = in.mod.ExportedFunction(abi.ExportAuthorize)
	in.validate = in.mod.ExportedFunction(abi.ExportValidate)
	in.configure = in.mod.ExportedFunction(abi.ExportConfigure)

	version, err := in.callU32(ctx, abi.ExportABIVersion)
	if err != nil {
		return nil, memorySuspect{err}
	}
	if version < abi.MinVersion || version > abi.Version {
		return nil, fmt.Errorf("built for ABI version %d, this host speaks %d to %d", version, abi.MinVersion, abi.Version)
	}
	phases, err := in.callU32(ctx, abi.ExportPhases)
	if err != nil {
		return nil, memorySuspect{err}
	}
	if p.info.phases == 0 {
		if err := checkPhases(phases, p.compiled.ExportedFunctions(), p.isGo); err != nil {
			return nil, err
		}
		p.info.phases, p.info.Phases, p.info.ABIVersion = phases, phaseNames(phases), version
		if err := p.checkConfigRequired(ctx, in); err != nil {
			return nil, err
		}
	} else if phases != p.info.phases {
		return nil, fmt.Errorf("%s returned %#x, an earlier instance %#x", abi.ExportPhases, phases, p.info.phases)
	}
	if p.config != nil {
		if err := p.configureInstance(ctx, in); err != nil {
			return nil, err
		}
	}
	return p.readied(in)
}

// readied ends a new instance's set-up, for both kinds.
func (p *Plugin) readied(in *instance) (*instance, error) {
	// Otherwise every call would recycle it.
	if size := in.mem.Size(); size > p.limits.recycleBytes() {
		return nil, memorySuspect{fmt.Errorf("a new instance already uses %d KiB of memory, over the %d KiB at which it would be recycled (3/4 of memory_mib %d)",
			size>>10, p.limits.recycleBytes()>>10, p.limits.MemoryMiB)}
	}
	if p.limits.Interrupt == InterruptOff {
		p.startRunner(in)
		in.cc.expire = in.runner.abandon
	}
	return in, nil
}

func (in *instance) callU32(ctx context.Context, name string) (uint32, error) {
	if err := in.mod.ExportedFunction(name).CallWithStack(ctx, in.stack[:]); err != nil {
		return 0, fmt.Errorf("%s: %w", name, err)
	}
	return uint32(in.stack[0]), nil
}

// configureInstance passes the config to plantgate_configure.
func (p *Plugin) configureInstance(ctx context.Context, in *instance) error {
	if in.configure == nil {
		return fmt.Errorf("has a config but does not export %q", abi.ExportConfigure)
	}
	r, err := in.call(ctx, in.configure, p.config)
	if err != nil {
		return memorySuspect{fmt.Errorf("%s: %w", abi.ExportConfigure, err)}
	}
	if r == abi.ResultAllow {
		return nil
	}
	d, err := in.decision(r)
	if err != nil {
		return fmt.Errorf("%s: %w", abi.ExportConfigure, err)
	}
	switch d.Verdict {
	case abi.VerdictAllow:
		return nil
	case abi.VerdictFault:
		return fmt.Errorf("config refused: %s (sidecar %s; docs/abi.md#config)", d.Text, strings.TrimSuffix(p.info.File, ".wasm")+".json")
	}
	return fmt.Errorf("%s answered deny %d %q; it must answer allow or fault", abi.ExportConfigure, d.Code, d.Text)
}
