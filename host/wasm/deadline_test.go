package wasm

import (
	"context"
	"log/slog"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/plantgate/plantgate/host"
)

// TestCallContext: a call context ends at the plugin's timeout or the
// request's deadline, whichever is first, and once it has fired it reports
// itself spent.
func TestCallContext(t *testing.T) {
	t.Parallel()
	c := newCallContext(nil)
	type key struct{}
	parent, cancel := context.WithTimeout(context.WithValue(context.Background(), key{}, "v"), time.Hour)
	defer cancel()
	ctx := c.begin(parent, time.Minute)
	if d, ok := ctx.Deadline(); !ok || time.Until(d) > time.Minute {
		t.Fatalf("Deadline() = %v %v, want within the timeout", d, ok)
	}
	if ctx.Value(key{}) != "v" || ctx.Err() != nil {
		t.Fatalf("Value %v, Err %v: want the parent's value and no error", ctx.Value(key{}), ctx.Err())
	}
	if tc, _ := ctx.Value(tokenCallKey{}).(*tokenCall); tc != &c.tokens {
		t.Fatalf("Value(tokenCallKey) = %p, want the call's own tokenCall", tc)
	}
	if !c.end() {
		t.Fatal("end() = false for a call well inside its deadline")
	}

	short, cancel2 := context.WithTimeout(context.Background(), 5*time.Millisecond)
	defer cancel2()
	ctx = c.begin(short, time.Minute)
	select {
	case <-ctx.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("not done 5 s after the request's 5 ms deadline")
	}
	if ctx.Err() != context.DeadlineExceeded || c.end() {
		t.Fatalf("Err %v, end() %v after the deadline; want DeadlineExceeded and spent", ctx.Err(), !c.end())
	}
}

// TestLoopStopsAtRequestDeadline: a request deadline shorter than the
// plugin's timeout stops a looping call, and the instance is replaced.
func TestLoopStopsAtRequestDeadline(t *testing.T) {
	t.Parallel()
	p := load(t, "loop", nil, Limits{Timeout: time.Minute}, Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := p.Authorize(ctx, host.AuthorizeRequest{Path: "/x"})
	if took := time.Since(start); took > 10*time.Second {
		t.Fatalf("took %v", took)
	}
	wantError(t, err, errFault)
	if s := p.Stats(); s.Discarded != 1 {
		t.Fatalf("Stats() = %+v, want the instance discarded", s)
	}
}

// TestInterruptOff: a plugin run with limits.interrupt off is not stopped at
// its deadline, but its request gets its Error then, logged once; the
// instance is written off and replaced, and closed when its late call
// returns.
//
// Not parallel, like TestInterruptKindsNotShared: a call that cannot be
// interrupted holds a thread that Go's scheduler cannot preempt either, so
// two of them at once would stall every other test on a 2-core machine.
//
// The deadline is 50 ms: the quick calls must answer within it on a loaded
// CI machine (at 5 ms they sometimes did not), and slow's spin (about
// 0.47 s on the 2-vCPU VM) must still overrun it many times over.
func TestInterruptOff(t *testing.T) {
	opts, logs := testOptions()
	p := load(t, "slow", nil, Limits{Timeout: 50 * time.Millisecond, Interrupt: InterruptOff}, opts)
	returned, returnedC := signal()
	p.returned = returned
	ctx := context.Background()
	if _, err := p.Authorize(ctx, host.AuthorizeRequest{Path: "/plants"}); err != nil {
		t.Fatalf("a quick call: %v", err)
	}
	_, err := p.Authorize(ctx, host.AuthorizeRequest{Path: "/x"})
	wantError(t, err, errFault)
	rec := logs.find(t, "policy plugin failed; request denied")
	if want := "plantgate_authorize ran past its deadline and cannot be stopped (limits.interrupt is off): its instance is written off and replaced"; rec.Attrs["reason"] != want || rec.Attrs["plugin"] != "slow" || rec.Attrs["timeout"] != "50ms" {
		t.Fatalf("log %+v, want reason %q", rec, want)
	}
	if _, err := p.Authorize(ctx, host.AuthorizeRequest{Path: "/plants"}); err != nil {
		t.Fatalf("after the overrun: %v", err)
	}
	await(t, returnedC, "the late call returning")
	if s := p.Stats(); s.Discarded != 1 || s.Created != 2 || s.Calls != 3 || s.WrittenOff != 1 || s.Stuck != 0 {
		t.Fatalf("Stats() = %+v, want the late instance discarded and replaced", s)
	}
	if n := logs.count("policy plugin failed; request denied"); n != 1 {
		t.Fatalf("%d failure lines, want 1", n)
	}
}

// TestInterruptKindsNotShared: code compiled without termination checks
// (interrupt off) must never be what a plugin loaded with interrupt on
// runs: not from the in-memory cache one Load shares, nor from the cache
// directory after a restart. wazero keys compiled code by the module's
// bytes and that flag together; this guards that we can rely on it. The
// same bytes, compiled uninterruptible first, must still be stopped at the
// deadline when loaded with interrupt on.
func TestInterruptKindsNotShared(t *testing.T) {
	for _, disk := range []bool{false, true} {
		t.Run(map[bool]string{false: "memory", true: "disk"}[disk], func(t *testing.T) {
			dir := ""
			if disk {
				dir = t.TempDir()
			}
			ctx := context.Background()
			loadWith := func(cache *compileCache, interrupt Interrupt) (*Plugin, *logRecorder) {
				opts, logs := testOptions()
				opts.Limits = Limits{Timeout: 20 * time.Millisecond, Interrupt: interrupt, Instances: 1}.Or(DefaultLimits())
				p, err := loadPlugin(ctx, fixture("slow"), nil, opts.withDefaults(), cache)
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { _ = p.Close(ctx) })
				return p, logs
			}
			cache, err := newCompileCache(dir)
			if err != nil {
				t.Fatal(err)
			}
			defer cache.release(ctx)
			off, _ := loadWith(cache, InterruptOff)
			if _, err := off.Authorize(ctx, host.AuthorizeRequest{Path: "/plants"}); err != nil {
				t.Fatal(err)
			}
			if disk { // as after a restart: a new cache on the same directory
				if cache, err = newCompileCache(dir); err != nil {
					t.Fatal(err)
				}
				defer cache.release(ctx)
			}
			on, logs := loadWith(cache, InterruptOn)
			done := make(chan error, 1)
			go func() {
				_, err := on.Authorize(ctx, host.AuthorizeRequest{Path: "/x"})
				done <- err
			}()
			select {
			case err := <-done:
				wantError(t, err, errFault)
			case <-time.After(30 * time.Second):
				t.Fatal("interrupt on, but the call was not stopped: it runs code compiled without termination checks")
			}
			if rec := logs.find(t, "policy plugin failed; request denied"); rec.Attrs["reason"] != "plantgate_authorize ran past its deadline" {
				t.Fatalf("reason %q: the call was not interrupted", rec.Attrs["reason"])
			}
		})
	}
}

// TestGuardedSpinSurvivesGC: with limits.interrupt on, a guest spinning
// without calling the host is stopped at its deadline even while garbage
// collections keep asking to stop the world. Go cannot preempt the guest's
// native code, so a collection waits for it, and with it the timer that
// would stop it: the loop guard's periodic exit to Go is what lets the
// collection through (without it this test never ends).
func TestGuardedSpinSurvivesGC(t *testing.T) {
	t.Parallel()
	spinning := make(chan struct{})
	var once sync.Once
	opts := Options{Logger: slog.New(signalHandler(func() { once.Do(func() { close(spinning) }) }))}
	p := load(t, "spinquiet", nil, Limits{Timeout: 200 * time.Millisecond}, opts)
	if !p.guarded {
		t.Fatal("spinquiet is not loop-guarded")
	}
	done := make(chan error, 1)
	go func() {
		_, err := p.Authorize(context.Background(), host.AuthorizeRequest{Path: "/x"})
		done <- err
	}()
	<-spinning
	collections := 0
	for {
		select {
		case err := <-done:
			wantError(t, err, errFault)
			if s := p.Stats(); s.Discarded != 1 {
				t.Fatalf("Stats() = %+v, want the instance discarded", s)
			}
			if collections == 0 {
				t.Fatal("no collection ran during the call")
			}
			return
		default:
			runtime.GC()
			collections++
		}
	}
}

// signalHandler is a slog handler that calls f on every record.
type signalHandler func()

func (h signalHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h signalHandler) Handle(context.Context, slog.Record) error {
	h()
	return nil
}
func (h signalHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h signalHandler) WithGroup(string) slog.Handler      { return h }
