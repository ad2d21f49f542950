package wasm

import (
	"context"
	"errors"
	"fmt"

	"github.com/tetratelabs/wazero/api"

	"github.com/plantgate/plantgate/host/wasm/loopguard"
	"github.com/plantgate/plantgate/sdk/abi"
)

// A plugin with Limits.Interrupt on runs a module rewritten by loopguard
// rather than wazero's termination checks (WithCloseOnContextDone), which
// exit to Go at every loop iteration and start a goroutine per call: the
// bundled bearer-auth paid ~7 µs of an 11 µs call for them. Its calls cost a load,
// a store and a branch per iteration instead, and a call past its deadline
// is stopped by its callContext's timer setting the instance's stop global
// (halt): the guest traps at its next loop header, host functions see the
// context done as before, and the instance is discarded.
//
// The guard exits to Go every loopguard.Fuel iterations, so a spinning
// guest holds off a garbage collection only that long: without it the GC's
// stop-the-world would wait for the guest and the timer that would stop
// the guest would wait for the GC (TestGuardedHangSurvivesGC).

// guard is an instance's pair of loopguard globals.
type guard struct {
	stop api.MutableGlobal
}

// halt stops the instance's call at its next loop header. It may run on
// any goroutine, during the call.
func (g *guard) halt() {
	g.stop.Set(1)
}

// startGuarded finds the instance's guard and runs its _initialize (not a
// start function for a guarded plugin: a start function runs before the
// guard can be reached) under ctx, which bounds it.
func (p *Plugin) startGuarded(ctx context.Context, in *instance) error {
	stop, _ := in.mod.ExportedGlobal(loopguard.StopGlobal).(api.MutableGlobal)
	if stop == nil {
		return errors.New("loop guard globals missing") // a loopguard bug
	}
	in.guard = &guard{stop: stop}
	in.cc.expire = in.guard.halt
	fn := in.mod.ExportedFunction(abi.ExportInitialize)
	if fn == nil {
		return nil
	}
	unwatch := context.AfterFunc(ctx, in.guard.halt)
	err := fn.CallWithStack(ctx, nil)
	if !unwatch() && err == nil {
		err = errors.New("returned after its deadline")
	}
	if err != nil {
		// Worded as wazero words a failed start function.
		return fmt.Errorf("module[] function[%s] failed: %w", abi.ExportInitialize, startErr(ctx, err))
	}
	return nil
}

// startErr names a set-up call's trap as its deadline when ctx ended.
func startErr(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return fmt.Errorf("%w (ran past its start-up deadline)", err)
	}
	return err
}
