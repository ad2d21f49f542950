package oidc

import (
	"context"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"

	"github.com/plantgate/plantgate/host"
	"github.com/plantgate/plantgate/host/oidc/oidctest"
)

// store answers one opaque token and counts its lookups.
type store struct {
	tok     host.Token
	lookups int
}

func (s *store) Token(ctx context.Context, d [32]byte) (host.Token, error) {
	t, _, err := s.TokenStamped(ctx, d)
	return t, err
}

func (s *store) TokenStamped(_ context.Context, d [32]byte) (host.Token, time.Time, error) {
	s.lookups++
	if d == s.tok.Digest {
		return s.tok, time.Unix(1, 0), nil
	}
	return host.Token{}, time.Time{}, host.Errorf(host.ErrTokenNotFound, "token not found")
}

// TestTokensAnswersBothKinds: a lookup of the request's access token's
// digest is answered from what the resolver recorded on the request,
// without the store; a shadow's detached copy answers the same; any
// other digest goes to the store.
func TestTokensAnswersBothKinds(t *testing.T) {
	idp := oidctest.Start(t, oidctest.NewKey(t, "k", jose.ES256))
	r, _ := newResolver(t, idp, VerifierConfig{})
	opaque := host.Token{Digest: [32]byte{7}, Name: "ci", Scopes: []string{"plants:write"}}
	st := &store{tok: opaque}
	src := Tokens{Resolver: NewResolver(r.v, 1), Store: st}
	ctx, x := host.NewExchange(context.Background())
	jwtTok, until, ok, err := src.Resolver.Resolve(ctx, idp.Token(t, "alice", "plants:read"))
	if err != nil || !ok {
		t.Fatal(err)
	}
	x.SetCredential(jwtTok, until)
	got, stamp, err := src.TokenStamped(ctx, jwtTok.Digest)
	if err != nil || got.Name != "oidc:alice" || got.Digest != jwtTok.Digest || stamp != until || st.lookups != 0 {
		t.Fatalf("access token: %+v %v %v, %d store lookups", got, stamp, err, st.lookups)
	}
	shadow := host.WithExchange(context.Background(), x.Detach(nil))
	if got, _, err := src.TokenStamped(shadow, jwtTok.Digest); err != nil || got.Name != "oidc:alice" {
		t.Fatalf("from a detached exchange: %+v %v", got, err)
	}
	if got, _, err := src.TokenStamped(ctx, opaque.Digest); err != nil || got.Name != "ci" || st.lookups != 1 {
		t.Fatalf("opaque token: %+v %v", got, err)
	}
	// Kept by digest: answered without the request's record too.
	if got, _, err := src.TokenStamped(context.Background(), jwtTok.Digest); err != nil || got.Name != "oidc:alice" {
		t.Fatalf("kept token without an exchange: %+v %v", got, err)
	}
	// The cache holds one token: a second one is kept in place of the
	// oldest (alice's), which is verified again when next seen.
	second, until2, _, err := src.Resolver.Resolve(ctx, idp.Token(t, "bob", "plants:read"))
	if err != nil || second.Name != "oidc:bob" || until2.IsZero() {
		t.Fatalf("over the bound: %+v until %v, %v", second, until2, err)
	}
	if _, _, err := src.TokenStamped(context.Background(), second.Digest); err != nil {
		t.Fatalf("the newest token is not kept: %v", err)
	}
	if _, _, err := src.TokenStamped(context.Background(), jwtTok.Digest); err == nil {
		t.Fatal("the oldest token is still kept past the bound")
	}
}

// TestFullCacheEvictsOldest: a cache full of live verified tokens keeps
// each new one in place of the oldest, so a busy client arriving after
// the cache filled is verified once, not on every request (and no new
// token sweeps the whole cache under its lock).
func TestFullCacheEvictsOldest(t *testing.T) {
	idp := oidctest.Start(t, oidctest.NewKey(t, "k", jose.ES256))
	base, _ := newResolver(t, idp, VerifierConfig{})
	r := NewResolver(base.v, 3)
	for _, sub := range []string{"a", "b", "c", "d"} {
		if _, _, _, err := r.Resolve(context.Background(), idp.Token(t, sub, "plants:read")); err != nil {
			t.Fatal(err)
		}
	}
	busy := idp.Token(t, "busy", "plants:read")
	for range 10 {
		if _, _, _, err := r.Resolve(context.Background(), busy); err != nil {
			t.Fatal(err)
		}
	}
	if verified, hits := r.Stats(); verified != 5 || hits != 9 {
		t.Fatalf("verified %d, hits %d; want 5 verifications (one per token) and 9 hits", verified, hits)
	}
}
