package wasm

import (
	"context"
	"testing"
	"time"

	"github.com/plantgate/plantgate/host"
)

// TestCloseDeadlineCallFinishes closes a plugin whose call is blocked in a
// token lookup that then finds the token: Close gives up at its deadline,
// and the call, let go, writes the token record into its instance's memory
// and returns. Closing the runtime under it unmapped that memory
// (linearmem.go): the write crashed the process. Instead the instance and
// the runtime are closed by the call's return.
func TestCloseDeadlineCallFinishes(t *testing.T) {
	t.Parallel()
	tokens := &fakeTokens{tokens: map[[32]byte]host.Token{digestOf(cred32): {Name: "alice"}}}
	p, done := blockedCall(t, tokens)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	if err := p.Close(ctx); err == nil {
		t.Fatal("Close returned nil while a call was running")
	}
	close(tokens.gate)
	// Admitted before Close, it ends as it would have.
	if err := <-done; err != nil {
		t.Fatalf("the call running through Close: %v", err)
	}
	if s := p.Stats(); s.Live != 0 {
		t.Fatalf("Stats() = %+v once the call returned, want no live instance", s)
	}
	_, err := p.Authorize(context.Background(), host.AuthorizeRequest{Credential: cred32})
	wantError(t, err, errClosed)
}
