package wasm

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/plantgate/plantgate/host"
)

// cred32 is a 32-byte credential: the tokenlookup fixture's digest.
const cred32 = "0123456789abcdef0123456789abcdef"

// blockedCall starts an authorize call on a one-instance tokenlookup plugin
// whose token lookup waits for tokens.gate, and returns once the call holds
// the instance. The call's result arrives on the returned channel.
func blockedCall(t *testing.T, tokens *fakeTokens) (*Plugin, <-chan error) {
	t.Helper()
	tokens.entered = make(chan struct{}, 1)
	tokens.gate = make(chan struct{})
	p := load(t, "tokenlookup", nil, Limits{Timeout: time.Minute}, Options{Tokens: tokens})
	done := make(chan error, 1)
	go func() {
		_, err := p.Authorize(context.Background(), host.AuthorizeRequest{Credential: cred32})
		done <- err
	}()
	<-tokens.entered
	return p, done
}

func TestPoolExhausted(t *testing.T) {
	t.Parallel()
	tokens := &fakeTokens{tokens: map[[32]byte]host.Token{digestOf(cred32): {Name: "alice"}}}
	p, done := blockedCall(t, tokens)

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	_, err := p.Authorize(ctx, host.AuthorizeRequest{Credential: cred32})
	wantError(t, err, errBusy)

	close(tokens.gate)
	if err := <-done; err != nil {
		t.Fatalf("blocked call: %v", err)
	}
	principal, err := p.Authorize(context.Background(), host.AuthorizeRequest{Credential: cred32})
	if principal != "alice" || err != nil {
		t.Fatalf("after the pool freed: %q, %v; want alice", principal, err)
	}
	if s := p.Stats(); s != (Stats{Live: 1, Created: 1, Calls: 2}) {
		t.Fatalf("Stats() = %+v; the busy call must not count or make an instance", s)
	}
}

func TestCloseWaitsForCalls(t *testing.T) {
	t.Parallel()
	tokens := &fakeTokens{tokens: map[[32]byte]host.Token{digestOf(cred32): {Name: "alice"}}}
	p, done := blockedCall(t, tokens)

	closed := make(chan error, 1)
	go func() { closed <- p.Close(context.Background()) }()
	select {
	case err := <-closed:
		t.Fatalf("Close returned %v while a call was running", err)
	case <-time.After(20 * time.Millisecond):
	}
	close(tokens.gate)
	if err := <-done; err != nil {
		t.Fatalf("call in flight: %v", err)
	}
	if err := <-closed; err != nil {
		t.Fatal(err)
	}
	if s := p.Stats(); s.Live != 0 {
		t.Fatalf("Stats() = %+v after Close, want no live instance", s)
	}
	_, err := p.Authorize(context.Background(), host.AuthorizeRequest{Credential: cred32})
	wantError(t, err, errClosed)
}

func TestCloseDeadline(t *testing.T) {
	t.Parallel()
	tokens := &fakeTokens{}
	p, done := blockedCall(t, tokens)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	err := p.Close(ctx)
	if want := "plugin tokenlookup.wasm: close: calls still running: context deadline exceeded; each closes as it returns"; err == nil || err.Error() != want {
		t.Fatalf("Close = %v, want %q", err, want)
	}
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Close = %v, want it to wrap context.DeadlineExceeded", err)
	}
	// The call goes on, and answers as it would have: the token is not
	// found. Its instance and the runtime close as it returns
	// (TestCloseDeadlineCallFinishes).
	close(tokens.gate)
	wantError(t, <-done, &host.Error{Code: 40150, Message: "token not found"})
}

func TestConcurrentCalls(t *testing.T) {
	t.Parallel()
	// A generous deadline: this is about the pool, and a call past the
	// default 100 ms faults (seen under -race at a load average of 12).
	p := load(t, "echo", nil, Limits{Instances: 3, Timeout: 10 * time.Second}, Options{})
	const goroutines, calls = 12, 100
	var wg sync.WaitGroup
	errs := make(chan error, goroutines)
	for g := range goroutines {
		wg.Go(func() {
			for i := range calls {
				path := fmt.Sprintf("/plants/%d/%d", g, i)
				_, err := p.Authorize(context.Background(), host.AuthorizeRequest{Method: "POST", Path: path, Credential: "c"})
				want := &host.Error{Code: 40350, Message: "POST " + path + " c"}
				if e, ok := err.(*host.Error); !ok || *e != *want {
					errs <- fmt.Errorf("call %d/%d: %v, want %v", g, i, err, want)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if s := p.Stats(); s != (Stats{Live: 3, Created: 3, Calls: goroutines * calls}) {
		t.Fatalf("Stats() = %+v", s)
	}
}

func TestConcurrentFaults(t *testing.T) {
	t.Parallel()
	p := load(t, "trap", nil, Limits{Instances: 2}, Options{})
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 50 {
				path := "/plants"
				if (g+i)%5 == 0 {
					path = "/x"
				}
				_, err := p.Authorize(context.Background(), host.AuthorizeRequest{Path: path})
				if (path == "/x") != (err != nil) {
					t.Errorf("%s: %v", path, err)
				}
			}
		})
	}
	wg.Wait()
	s := p.Stats()
	if s.Discarded != 80 || s.Created != s.Discarded+uint64(s.Live) || s.Live > 2 || s.Calls != 400 {
		t.Fatalf("Stats() = %+v, want 400 calls, 80 discarded, at most 2 live", s)
	}
}

func TestCanceledContext(t *testing.T) {
	t.Parallel()
	p := load(t, "allow", nil, Limits{}, Options{})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := p.Authorize(ctx, host.AuthorizeRequest{})
	wantError(t, err, errBusy)
	if s := p.Stats(); s != (Stats{Live: 1, Created: 1}) {
		t.Fatalf("Stats() = %+v; a done context must not reach the instance", s)
	}
}
