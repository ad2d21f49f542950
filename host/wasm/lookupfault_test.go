package wasm

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/plantgate/plantgate/host"
)

// heldTokens fails every lookup as a store that is down, and holds its
// second lookup (signalling held) until release is closed.
type heldTokens struct {
	n       atomic.Int32
	held    chan struct{}
	release chan struct{}
}

func (h *heldTokens) Token(ctx context.Context, _ [32]byte) (host.Token, error) {
	if h.n.Add(1) == 2 {
		close(h.held)
		<-h.release
	}
	return host.Token{}, host.Errorf(host.ErrStoreUnavailable, "store down")
}

// TestLookupFailureStaysInItsCall: a token lookup that found the store down
// turns a fault into 503 for its own call only. While call A, whose lookups
// failed, is still in flight, call B faults for another reason (a trap,
// no lookup at all): B gets 500 50001, and A, which faults after its own
// failed lookups, gets 503 50301.
func TestLookupFailureStaysInItsCall(t *testing.T) {
	t.Parallel()
	tokens := &heldTokens{held: make(chan struct{}), release: make(chan struct{})}
	// A minute: the calls' timing cannot matter, only which call saw the store fail.
	p := load(t, "lookuptrap", nil, Limits{Instances: 2, Timeout: time.Minute}, Options{Tokens: tokens})
	var once sync.Once
	release := func() { once.Do(func() { close(tokens.release) }) }
	t.Cleanup(release) // before the plugin's Close, which waits for A
	ctx := context.Background()
	errA := make(chan error, 1)
	go func() {
		_, err := p.Authorize(ctx, host.AuthorizeRequest{Path: "/l", Credential: cred32})
		errA <- err
	}()
	<-tokens.held // A's first lookup failed; its second is in the store
	_, err := p.Authorize(ctx, host.AuthorizeRequest{Path: "/x"})
	wantError(t, err, errFault)
	release()
	wantError(t, <-errA, &host.Error{Code: host.ErrStoreUnavailable, Message: msgStoreDown})
	// And after A ended, a later fault is still the plugin's own.
	_, err = p.Authorize(ctx, host.AuthorizeRequest{Path: "/x"})
	wantError(t, err, errFault)
}
