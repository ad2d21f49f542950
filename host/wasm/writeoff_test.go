package wasm

import (
	"context"
	"runtime/pprof"
	"strings"
	"testing"
	"time"

	"github.com/plantgate/plantgate/host"
)

// holdingTokens holds every lookup, whatever its context, until release is
// closed: from the host's side, a call that does not return.
type holdingTokens struct {
	entered chan struct{}
	release chan struct{}
}

func (h *holdingTokens) Token(context.Context, [32]byte) (host.Token, error) {
	h.entered <- struct{}{}
	<-h.release
	return host.Token{}, host.Errorf(host.ErrTokenNotFound, "no such token")
}

// signal returns a hook that reports each call on the channel it returns.
func signal() (func(), chan struct{}) {
	c := make(chan struct{}, 16)
	return func() { c <- struct{}{} }, c
}

// await waits for one value from c; the bound only turns a hang into a failure.
func await(t *testing.T, c <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-c:
	case <-time.After(30 * time.Second):
		var b strings.Builder
		_ = pprof.Lookup("goroutine").WriteTo(&b, 1)
		t.Fatalf("not within 30 s: %s\n%s", what, b.String())
	}
}

// TestWrittenOffAtDeadline: with limits.interrupt off, a call that does not
// return answers its request at the deadline with 500 50001, its instance is
// written off (counted, logged once) and replaced, the pool serves the next
// request, and Close does not wait for the stuck call. When it returns at
// last, its instance is closed.
func TestWrittenOffAtDeadline(t *testing.T) {
	t.Parallel()
	tokens := &holdingTokens{entered: make(chan struct{}, 1), release: make(chan struct{})}
	opts, logs := testOptions()
	opts.Tokens = tokens
	p := load(t, "hang", nil, Limits{Instances: 1, Timeout: 50 * time.Millisecond, Interrupt: InterruptOff}, opts)
	returned, returnedC := signal()
	p.returned = returned
	ctx := context.Background()

	errA := make(chan error, 1)
	go func() {
		_, err := p.Authorize(ctx, host.AuthorizeRequest{Path: "/x", Credential: cred32})
		errA <- err
	}()
	<-tokens.entered
	select {
	case err := <-errA:
		wantError(t, err, errFault)
	case <-time.After(30 * time.Second):
		close(tokens.release)
		t.Fatal("the request did not get its Error at the deadline")
	}
	if s := p.Stats(); s.WrittenOff != 1 || s.Stuck != 1 {
		t.Fatalf("Stats() = %+v, want one call written off and stuck", s)
	}
	const reason = "plantgate_authorize ran past its deadline and cannot be stopped (limits.interrupt is off): its instance is written off and replaced"
	if rec := logs.find(t, "policy plugin failed; request denied"); rec.Attrs["reason"] != reason || rec.Attrs["phase"] != "authorize" || rec.Attrs["plugin"] != "hang" {
		t.Fatalf("log %+v", rec)
	}

	// One instance, and it is stuck: the replacement serves.
	bctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if _, err := p.Authorize(bctx, host.AuthorizeRequest{Path: "/plants"}); err != nil {
		t.Fatalf("the request after the write-off: %v", err)
	}
	if n := logs.count("policy plugin failed; request denied"); n != 1 {
		t.Fatalf("%d failure lines, want the write-off logged once", n)
	}

	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	err := p.Close(cctx)
	if want := "plugin hang.wasm: close: 1 call(s) past their deadline never returned (limits.interrupt is off); their runtime is left open"; err == nil || err.Error() != want {
		t.Fatalf("Close() = %v, want %q", err, want)
	}
	if cctx.Err() != nil {
		t.Fatal("Close waited for the stuck call until its ctx ended")
	}

	close(tokens.release)
	await(t, returnedC, "the written-off call returning")
	if s := p.Stats(); s.Stuck != 0 || s.Live != 0 || s.Discarded != s.Created {
		t.Fatalf("Stats() = %+v after the stuck call returned, want every instance closed", s)
	}
}

// TestWrittenOffSpinEndsAtHostCall: a guest spinning through host calls
// (log) with limits.interrupt off is ended at the first one after its
// deadline, so it gives its goroutine back: either before the request was
// answered (the host call came first) or after (the write-off came first).
func TestWrittenOffSpinEndsAtHostCall(t *testing.T) {
	t.Parallel()
	p := load(t, "hang", nil, Limits{Instances: 1, Timeout: 20 * time.Millisecond, Interrupt: InterruptOff}, Options{})
	returned, returnedC := signal()
	p.returned = returned
	_, err := p.Authorize(context.Background(), host.AuthorizeRequest{Path: "/s"})
	wantError(t, err, errFault)
	if p.Stats().WrittenOff == 1 {
		await(t, returnedC, "the written-off spinning call ended at a host call")
	}
	if s := p.Stats(); s.Stuck != 0 || s.Discarded != 1 {
		t.Fatalf("Stats() = %+v, want the spinning call ended and its instance closed", s)
	}
}

// TestRefillOffRequestPath: the instance a fault discards is made again in
// the background, so the request after the fault finds one ready and makes
// none itself.
func TestRefillOffRequestPath(t *testing.T) {
	t.Parallel()
	p := load(t, "trap", nil, Limits{Instances: 1}, Options{})
	refilled, refilledC := signal()
	p.refilled = refilled
	ctx := context.Background()
	_, err := p.Authorize(ctx, host.AuthorizeRequest{Path: "/x"})
	wantError(t, err, errFault)
	await(t, refilledC, "the pool refilled after the fault")
	created := p.Stats().Created
	if _, err := p.Authorize(ctx, host.AuthorizeRequest{Path: "/plants"}); err != nil {
		t.Fatal(err)
	}
	if s := p.Stats(); s.Created != created || created != 2 || s.Discarded != 1 {
		t.Fatalf("Stats() = %+v (created %d before the request), want the request to make no instance", s, created)
	}
}

// TestReloaderCloseWithStuckCall: a Reloader's Close does not wait for a
// written-off call either.
func TestReloaderCloseWithStuckCall(t *testing.T) {
	t.Parallel()
	dir := copyFixtures(t, map[string]string{
		"10-hang.wasm": "hang",
		"10-hang.json": `{"limits": {"interrupt": false, "timeout_ms": 50, "instances": 1}}`,
	})
	tokens := &holdingTokens{entered: make(chan struct{}, 1), release: make(chan struct{})}
	defer close(tokens.release)
	opts, _ := testOptions()
	opts.Tokens = tokens
	ctx := context.Background()
	r, err := NewReloader(ctx, Dir(dir), opts, ReloadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	_, err = r.Authorize(ctx, host.AuthorizeRequest{Path: "/x", Credential: cred32})
	wantError(t, err, errFault)
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := r.Close(cctx); err != nil || cctx.Err() != nil {
		t.Fatalf("Close() = %v, ctx %v: want it to return at once", err, cctx.Err())
	}
}
