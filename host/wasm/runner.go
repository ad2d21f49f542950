package wasm

import (
	"context"
	"sync/atomic"

	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/sys"

	"github.com/plantgate/plantgate/host"
	"github.com/plantgate/plantgate/sdk/abi"
)

// A plugin with Limits.Interrupt off runs without wazero's termination
// checks, so nothing can stop one of its calls. Each of its instances makes
// its phase calls on a goroutine of its own (a runner), handed each call
// over a channel: the request waits for the answer or the call's deadline,
// whichever comes first, and at the deadline it leaves with its Error while
// the call keeps the runner's goroutine. The instance is written off (it is
// mid-call, so it can never serve again), a replacement is made in the
// background, and if the call ever returns the runner closes the instance.
//
// The hand-over costs two goroutine switches a call (BenchmarkCall,
// nointerrupt/authorize against interrupt's), a fraction of what the
// termination checks cost a standard-Go guest.
//
// # Notes
//
//   - A written-off call that reaches a host function is ended there
//     (hostExitIfSpent): a guest spinning through log or token_lookup
//     calls stops at once.
//   - A guest spinning without calling the host can be stopped by nothing,
//     and Go cannot preempt the native code it runs in: the next
//     stop-the-world of the Go runtime (a garbage collection) waits for it
//     forever, which stalls the whole process. Only Limits.Interrupt on
//     protects against that; this is why it is the default.
type runner struct {
	jobs    chan runJob
	results chan runResult // buffered: the runner never waits for the request
	state   atomic.Int32   // runIdle, runBusy, runDone, runAbandoned
}

type runJob struct {
	ctx context.Context
	fn  api.Function
}

type runResult struct {
	r         abi.Result
	err       error
	abandoned bool // sent by abandon, not by the runner
}

// States of a runner's current call. The runner moves busy → done when the
// call returns, the request busy → abandoned at the deadline; whichever
// moves first decides who owns the instance.
const (
	runIdle int32 = iota
	runBusy
	runDone
	runAbandoned
)

// startRunner gives in a runner goroutine.
func (p *Plugin) startRunner(in *instance) {
	in.runner = &runner{jobs: make(chan runJob), results: make(chan runResult, 1)}
	go p.runCalls(in)
}

// runCalls is the runner goroutine: it makes each call handed to it, until
// the instance is discarded (jobs closed) or a call is abandoned.
func (p *Plugin) runCalls(in *instance) {
	rn := in.runner
	for j := range rn.jobs {
		r, err := in.call(j.ctx, j.fn, in.req)
		if rn.state.CompareAndSwap(runBusy, runDone) {
			rn.results <- runResult{r: r, err: err}
			continue
		}
		p.returnedLate(in)
		return
	}
}

// run makes one call on the runner. ok is false when the call's deadline
// passed first: the call is abandoned and the instance belongs to the runner
// from then on. Exactly one of the runner and abandon answers each call, so
// the request waits on one channel (a select on two cost more).
func (rn *runner) run(ctx context.Context, fn api.Function) (r abi.Result, err error, ok bool) {
	rn.state.Store(runBusy)
	rn.jobs <- runJob{ctx, fn}
	res := <-rn.results
	return res.r, res.err, !res.abandoned
}

// abandon is the instance's callContext expiring: if the call is still
// running, its request is answered now.
func (rn *runner) abandon() {
	if rn.state.CompareAndSwap(runBusy, runAbandoned) {
		rn.results <- runResult{abandoned: true}
	}
}

// writeOff answers a request whose call was abandoned at its deadline and
// replaces the instance in the pool. The request goroutine must not touch
// the instance after this: its call is still running.
func (p *Plugin) writeOff(ctx context.Context, fn api.Function, phase string) error {
	p.stats.writtenOff.Add(1)
	p.stats.stuck.Add(1)
	p.log.ErrorContext(ctx, "policy plugin failed; request denied", "phase", phase, "code", host.ErrPluginFault,
		"reason", fn.Definition().ExportNames()[0]+" ran past its deadline and cannot be stopped (limits.interrupt is off): its instance is written off and replaced",
		"timeout", p.limits.Timeout)
	go p.refill()
	return &host.Error{Code: host.ErrPluginFault, Message: msgFault}
}

// returnedLate closes the instance of an abandoned call that returned after
// all; on the runner's goroutine, which owns it.
func (p *Plugin) returnedLate(in *instance) {
	in.cc.end()
	p.log.Warn("a written-off policy plugin call returned; its instance is closed")
	p.discard(context.Background(), in)
	if p.stats.stuck.Add(-1) == 0 && p.pool.closing.Load() && p.late.Load() == 0 {
		_ = p.closeRuntime(context.Background())
	}
	if p.returned != nil {
		p.returned()
	}
}

// errCallSpent ends a call from a host function: wazero reports it as the
// call's error, which callFailed names "ran past its deadline".
var errCallSpent = sys.NewExitError(sys.ExitCodeDeadlineExceeded)

// hostExitIfSpent ends, from inside a host function, a call past its
// deadline, such as a written-off call of a plugin with Limits.Interrupt
// off: wazero turns the panic into the call's error, as for WASI's
// proc_exit.
func hostExitIfSpent(ctx context.Context) {
	if c, ok := ctx.(*callContext); ok && c.expired.Load() {
		panic(errCallSpent)
	}
}
