package wasm

import (
	"context"
	"crypto/sha256"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/plantgate/plantgate/host"
	"github.com/plantgate/plantgate/host/tokencache"
	"github.com/plantgate/plantgate/host/wasm/wasmtest"
)

func TestDecisionCacheSidecar(t *testing.T) {
	t.Parallel()
	sc, err := ParseSidecar([]byte(`{"decision_cache": {"on": ["credential", "operation", "client"], "ttl_ms": 500}}`))
	if err != nil {
		t.Fatal(err)
	}
	if want := (DecisionCache{TTL: 500 * time.Millisecond, Operation: true, Client: true}); sc.DecisionCache != want {
		t.Fatalf("decision_cache = %+v, want %+v", sc.DecisionCache, want)
	}
	for in, want := range map[string]string{
		`{"decision_cache": {"on": ["operation"], "ttl_ms": 500}}`:                         `line 1, column 27: "decision_cache.on" must hold "credential": decisions are kept only for a credential whose token the plugin looked up`,
		`{"decision_cache": {"on": ["credential", "body"], "ttl_ms": 500}}`:                `line 1, column 27: "decision_cache.on": unknown request field "body", want credential, operation, path or client`,
		`{"decision_cache": {"on": ["credential"]}}`:                                       `line 1, column 1: "decision_cache.ttl_ms" must be an integer from 1 to 60000, got nothing`,
		`{"decision_cache": {"on": ["credential"], "ttl_ms": 60001}}`:                      `line 1, column 53: "decision_cache.ttl_ms" must be an integer from 1 to 60000, got 60001`,
		`{"decision_cache": {"on": "credential", "ttl_ms": 5}}`:                            `line 1, column 27: "decision_cache.on" must be an array of request fields (credential, operation, path, client), got "credential"`,
		`{"headers": ["X-Tenant"], "decision_cache": {"on": ["credential"], "ttl_ms": 5}}`: `line 1, column 52: "decision_cache" cannot be used with "headers": a decision that reads request headers would be answered for other headers`,
		`{"decision_cache": {"ttl": 5}}`:                                                   `line 1, column 21: unknown key "decision_cache.ttl", want one of on, ttl_ms`,
	} {
		if _, err := ParseSidecar([]byte(in)); err == nil || err.Error() != want {
			t.Errorf("%s:\n got %v\nwant %s", in, err, want)
		}
	}
}

// TestDecisionCache runs the bundled bearer-auth behind serve's token
// cache with a decision cache: a repeated request is answered without a
// call, a revocation is seen as soon as the token cache sees it (never
// later), a store failure and an unknown token are never kept, another
// operation is its own entry, and a new chain starts empty.
func TestDecisionCache(t *testing.T) {
	t.Parallel()
	wasmPath := filepath.Join(t.TempDir(), "10-bearer-auth.wasm")
	if err := wasmtest.Build(wasmPath, wasmtest.Bundled["10-bearer-auth.wasm"]); err != nil {
		t.Fatal(err)
	}
	const cred = "decision-cache-token-0123456789"
	digest := sha256.Sum256([]byte(cred))
	store := &countingTokens{tokens: map[[32]byte]host.Token{
		digest: {Digest: digest, Name: "alice", Scopes: []string{host.ScopePlantsWrite}, Created: time.Now()},
	}}
	const tokenTTL = 300 * time.Millisecond
	cache := tokencache.New(store, tokenTTL, 0)
	p, err := LoadPlugin(context.Background(), wasmPath, nil, Options{CacheDir: cacheDir, Tokens: cache, Limits: Limits{Instances: 1},
		decisions: DecisionCache{TTL: time.Minute, Operation: true}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close(context.Background()) })
	chain := NewChain(p)
	ctx := context.Background()
	create := host.AuthorizeRequest{Method: "POST", Path: "/plants", Route: "POST /plants", Credential: cred}
	calls := func() uint64 { return p.Stats().Calls }
	authorize := func(r host.AuthorizeRequest, wantPrincipal string, wantErr *host.Error) {
		t.Helper()
		principal, err := chain.Authorize(ctx, r)
		if wantErr != nil {
			wantError(t, err, wantErr)
			return
		}
		if err != nil || principal != wantPrincipal {
			t.Fatalf("%s %s: %q %v, want %q", r.Method, r.Path, principal, err, wantPrincipal)
		}
	}

	// The first call teaches the host to prefetch; the second is kept.
	authorize(create, "alice", nil)
	authorize(create, "alice", nil)
	c0 := calls()
	for range 5 {
		authorize(create, "alice", nil)
	}
	if got := calls() - c0; got != 0 || p.Stats().Kept != 5 {
		t.Fatalf("5 repeated requests: %d calls, %d kept; want 0 and 5", got, p.Stats().Kept)
	}

	// Another operation is its own entry: bearer-auth's scopes are per route.
	read := host.AuthorizeRequest{Method: "GET", Path: "/plants/7", Route: "GET /plants/{id}", PathID: 7, HasPathID: true, Credential: cred}
	c0 = calls()
	authorize(read, "", &host.Error{Code: 40350, Message: "token lacks scope plants:read"})
	authorize(read, "", &host.Error{Code: 40350, Message: "token lacks scope plants:read"})
	if got := calls() - c0; got != 1 {
		t.Fatalf("a new operation twice: %d calls, want 1 (its deny kept)", got)
	}

	// A revoke: the kept allow ends with the token cache's answer.
	store.mu.Lock()
	tok := store.tokens[digest]
	tok.Revoked = true
	store.tokens[digest] = tok
	store.mu.Unlock()
	revokedAt := time.Now()
	for {
		_, err := chain.Authorize(ctx, create)
		if err != nil {
			wantError(t, err, &host.Error{Code: 40152, Message: "token revoked"})
			break
		}
		if time.Since(revokedAt) > tokenTTL+100*time.Millisecond {
			t.Fatalf("the revoked token still allowed %s after the revoke, past the token cache's TTL of %s", time.Since(revokedAt), tokenTTL)
		}
		time.Sleep(10 * time.Millisecond)
	}

	// A store failure is never kept: the next request asks again.
	time.Sleep(tokenTTL)
	store.mu.Lock()
	delete(store.tokens, digest)
	store.mu.Unlock()
	c0 = calls()
	authorize(create, "", &host.Error{Code: 40151, Message: "invalid token"})
	authorize(create, "", &host.Error{Code: 40151, Message: "invalid token"})
	if got := calls() - c0; got != 2 {
		t.Fatalf("an unknown token twice: %d calls, want 2 (not found is never kept)", got)
	}

	// A new chain of the same plugin starts with nothing kept.
	store.mu.Lock()
	store.tokens[digest] = host.Token{Digest: digest, Name: "alice", Scopes: []string{host.ScopePlantsWrite}, Created: time.Now()}
	store.mu.Unlock()
	authorize(create, "alice", nil)
	authorize(create, "alice", nil)
	next := NewChain(p)
	c0 = calls()
	if principal, err := next.Authorize(ctx, create); err != nil || principal != "alice" {
		t.Fatalf("new chain: %q %v", principal, err)
	}
	if got := calls() - c0; got != 1 {
		t.Fatalf("a new chain's first request: %d calls, want 1", got)
	}
}

// TestDecisionCacheNeedsStamps: with a token source that gives no stamps
// (no token cache: serve's --token-cache-ttl 0), nothing is kept.
func TestDecisionCacheNeedsStamps(t *testing.T) {
	t.Parallel()
	wasmPath := filepath.Join(t.TempDir(), "10-bearer-auth.wasm")
	if err := wasmtest.Build(wasmPath, wasmtest.Bundled["10-bearer-auth.wasm"]); err != nil {
		t.Fatal(err)
	}
	const cred = "decision-cache-token-0123456789"
	digest := sha256.Sum256([]byte(cred))
	store := &countingTokens{tokens: map[[32]byte]host.Token{
		digest: {Digest: digest, Name: "alice", Scopes: []string{host.ScopePlantsWrite}, Created: time.Now()},
	}}
	p, err := LoadPlugin(context.Background(), wasmPath, nil, Options{CacheDir: cacheDir, Tokens: store, Limits: Limits{Instances: 1},
		decisions: DecisionCache{TTL: time.Minute, Operation: true}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close(context.Background()) })
	chain := NewChain(p)
	for range 4 {
		if _, err := chain.Authorize(context.Background(), host.AuthorizeRequest{Method: "POST", Path: "/plants", Route: "POST /plants", Credential: cred}); err != nil {
			t.Fatal(err)
		}
	}
	if p.Stats().Kept != 0 || p.Stats().Calls < 4 {
		t.Fatalf("without stamps: %+v, want every request a call", p.Stats())
	}
}

// TestKeptAllowAllocatesNothing: a request answered from a kept decision
// costs no allocation in the chain.
func TestKeptAllowAllocatesNothing(t *testing.T) {
	wasmPath := filepath.Join(t.TempDir(), "10-bearer-auth.wasm")
	if err := wasmtest.Build(wasmPath, wasmtest.Bundled["10-bearer-auth.wasm"]); err != nil {
		t.Fatal(err)
	}
	const cred = "decision-cache-token-0123456789"
	digest := sha256.Sum256([]byte(cred))
	store := &countingTokens{tokens: map[[32]byte]host.Token{
		digest: {Digest: digest, Name: "alice", Scopes: []string{host.ScopePlantsWrite}, Created: time.Now()},
	}}
	p, err := LoadPlugin(context.Background(), wasmPath, nil, Options{CacheDir: cacheDir, Tokens: tokencache.New(store, time.Hour, 0),
		Limits: Limits{Instances: 1}, decisions: DecisionCache{TTL: time.Minute, Operation: true}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close(context.Background()) })
	chain := NewChain(p)
	create := host.AuthorizeRequest{Method: "POST", Path: "/plants", Route: "POST /plants", Credential: cred}
	for range 3 {
		if _, err := chain.Authorize(context.Background(), create); err != nil {
			t.Fatal(err)
		}
	}
	kept := p.Stats().Kept
	allocs := testing.AllocsPerRun(100, func() { _, _ = chain.Authorize(context.Background(), create) })
	if p.Stats().Kept-kept < 100 {
		t.Fatalf("%d of the runs kept, want all", p.Stats().Kept-kept)
	}
	if allocs != 0 {
		t.Fatalf("a kept allow: %.0f allocations, want 0", allocs)
	}
}

// BenchmarkKeptDecision is a busy token's authorize through a chain whose
// bearer-auth keeps its decisions, beside the same chain without.
func BenchmarkKeptDecision(b *testing.B) {
	wasmPath := filepath.Join(b.TempDir(), "10-bearer-auth.wasm")
	if err := wasmtest.Build(wasmPath, wasmtest.Bundled["10-bearer-auth.wasm"]); err != nil {
		b.Fatal(err)
	}
	const cred = "decision-cache-token-0123456789"
	digest := sha256.Sum256([]byte(cred))
	store := &countingTokens{tokens: map[[32]byte]host.Token{
		digest: {Digest: digest, Name: "alice", Scopes: []string{host.ScopePlantsWrite}, Created: time.Now()},
	}}
	create := host.AuthorizeRequest{Method: "POST", Path: "/plants", Route: "POST /plants", Credential: cred}
	for _, tt := range []struct {
		name string
		dc   DecisionCache
	}{{"kept", DecisionCache{TTL: time.Minute, Operation: true}}, {"called", DecisionCache{}}} {
		p, err := LoadPlugin(context.Background(), wasmPath, nil, Options{CacheDir: cacheDir, Tokens: tokencache.New(store, time.Hour, 0),
			Limits: Limits{Instances: 1, Timeout: 10 * time.Second}, decisions: tt.dc})
		if err != nil {
			b.Fatal(err)
		}
		chain := NewChain(p)
		b.Run(tt.name, func(b *testing.B) {
			b.ReportAllocs()
			// CPU time of this process per call: on a machine shared with
			// other work, a steadier figure than ns/op.
			cpu0 := processCPU()
			for b.Loop() {
				if _, err := chain.Authorize(context.Background(), create); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(processCPU()-cpu0)/float64(b.N), "cpu-ns/op")
		})
		_ = p.Close(context.Background())
	}
}

// processCPU is this process's user and system CPU time, in nanoseconds.
func processCPU() int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}

// TestDecisionCacheFullEvictsOldest: a cache full of live decisions (a
// client sending a fresh credential, or path, on every request) keeps the
// new one and drops the oldest, in constant time, rather than sweeping all
// of them under the lock on every request and keeping nothing new.
func TestDecisionCacheFullEvictsOldest(t *testing.T) {
	t.Parallel()
	d := newDecisions(DecisionCache{TTL: time.Minute})
	now, stamp := time.Unix(1_800_000_000, 0), time.Unix(1_799_999_999, 0)
	key := func(i int) decisionKey {
		var k decisionKey
		k.digest[0], k.digest[1], k.digest[2] = byte(i), byte(i>>8), byte(i>>16)
		k.method, k.route = "GET", "GET /plants/{id}"
		return k
	}
	for i := range maxDecisions + 100 {
		d.put(key(i), keptDecision{stamp: stamp, expires: now.Add(time.Minute)})
	}
	if n := d.len(); n != maxDecisions {
		t.Fatalf("%d decisions kept, want %d", n, maxDecisions)
	}
	for i := range maxDecisions + 100 {
		if _, ok := d.get(key(i), stamp, now); ok != (i >= 100) {
			t.Fatalf("decision %d kept %v, want %v (the 100 oldest evicted)", i, ok, i >= 100)
		}
	}
}
