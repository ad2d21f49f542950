package wasm

import (
	"context"
	"crypto/sha256"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/plantgate/plantgate/host"
	"github.com/plantgate/plantgate/host/wasm/wasmtest"
)

// countingTokens counts lookups and can change its answer between calls.
type countingTokens struct {
	mu      sync.Mutex
	tokens  map[[32]byte]host.Token
	lookups atomic.Int64
}

func (c *countingTokens) Token(ctx context.Context, digest [32]byte) (host.Token, error) {
	c.lookups.Add(1)
	c.mu.Lock()
	defer c.mu.Unlock()
	if t, ok := c.tokens[digest]; ok {
		return t, nil
	}
	return host.Token{}, host.Errorf(host.ErrTokenNotFound, "no such token")
}

// TestTokenPrefetch runs the bundled bearer-auth, which looks up the
// SHA-256 of the credential: after its first call the host looks the token
// up before the call, once per request, and a revocation is seen on the
// very next request.
func TestTokenPrefetch(t *testing.T) {
	t.Parallel()
	wasmPath := filepath.Join(t.TempDir(), "10-bearer-auth.wasm")
	if err := wasmtest.Build(wasmPath, wasmtest.Bundled["10-bearer-auth.wasm"]); err != nil {
		t.Fatal(err)
	}
	const cred = "prefetch-token-0123456789"
	tokens := &countingTokens{tokens: map[[32]byte]host.Token{
		sha256.Sum256([]byte(cred)): {Digest: sha256.Sum256([]byte(cred)), Name: "alice", Scopes: []string{host.ScopePlantsWrite}, Created: time.Now()},
	}}
	p, err := LoadPlugin(context.Background(), wasmPath, nil, Options{CacheDir: cacheDir, Tokens: tokens, Limits: Limits{Instances: 1}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close(context.Background()) })
	ctx := context.Background()
	req := host.AuthorizeRequest{Method: "POST", Path: "/plants", Credential: cred}
	for i := range 5 {
		principal, err := p.Authorize(ctx, req)
		if err != nil || principal != "alice" {
			t.Fatalf("call %d: %q %v, want alice", i, principal, err)
		}
	}
	if n := tokens.lookups.Load(); n != 5 {
		t.Fatalf("%d lookups for 5 requests, want one each", n)
	}
	if n := p.stats.prefetched.Load(); n != 4 {
		t.Fatalf("%d lookups prefetched, want 4 (all but the first)", n)
	}

	tokens.mu.Lock()
	tok := tokens.tokens[sha256.Sum256([]byte(cred))]
	tok.Revoked = true
	tokens.tokens[sha256.Sum256([]byte(cred))] = tok
	tokens.mu.Unlock()
	_, err = p.Authorize(ctx, req)
	wantError(t, err, &host.Error{Code: 40152, Message: "token revoked"})

	// Another credential is prefetched too, and a wrong one is not found.
	_, err = p.Authorize(ctx, host.AuthorizeRequest{Method: "POST", Path: "/plants", Credential: "unknown-token-0123456789"})
	wantError(t, err, &host.Error{Code: 40151, Message: "invalid token"})
}
