package redis

import (
	"context"
	"encoding/hex"
	"slices"
	"testing"
	"time"

	"github.com/plantgate/plantgate/host"
	"github.com/plantgate/plantgate/host/redis/redistest"
)

func TestBootstrapToken(t *testing.T) {
	t.Parallel()
	t.Run("miniredis", func(t *testing.T) {
		t.Parallel()
		testBootstrapToken(t, miniredisFixture(t))
	})
	t.Run("redis-server", func(t *testing.T) {
		t.Parallel()
		testBootstrapToken(t, serverFixture(redistest.Start(t))(t))
	})
}

// testBootstrapToken: a restart never brings a revoked bootstrap token back,
// and a new one leaves exactly one active token named "bootstrap".
func testBootstrapToken(t *testing.T, f fixture) {
	ctx := context.Background()
	s := f.store
	created := time.UnixMilli(1_700_000_000_000).UTC()
	boot := func(d [32]byte) host.Token {
		return host.Token{Digest: d, Name: "bootstrap", Scopes: host.AllScopes(), Created: created}
	}
	want := func(what string, got BootstrapResult, err error, wantRes BootstrapResult) {
		t.Helper()
		if err != nil || got != wantRes {
			t.Fatalf("%s: %+v, %v; want %+v", what, got, err, wantRes)
		}
	}
	active := func() []byte {
		t.Helper()
		all, err := s.Tokens(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var lasts []byte
		for _, tok := range all {
			if tok.Name == "bootstrap" && !tok.Revoked {
				lasts = append(lasts, tok.Digest[31])
			}
		}
		return lasts
	}
	a, b, c := digest(0xa0, 1), digest(0xb0, 2), digest(0xc0, 3)
	// An unrelated token with another name is never touched.
	if err := s.PutToken(ctx, host.Token{Digest: digest(0xee, 9), Name: "ci", Scopes: []string{host.ScopePlantsWrite}}); err != nil {
		t.Fatal(err)
	}

	got, err := s.BootstrapToken(ctx, boot(a))
	want("first start", got, err, BootstrapResult{Created: true})
	got, err = s.BootstrapToken(ctx, boot(a))
	want("same token again", got, err, BootstrapResult{})
	if tok, err := s.Token(ctx, a); err != nil || !tok.Created.Equal(created) || tok.Revoked || !slices.Equal(tok.Scopes, host.AllScopes()) {
		t.Fatalf("bootstrap record: %+v, %v", tok, err)
	}

	got, err = s.BootstrapToken(ctx, boot(b))
	want("a new token", got, err, BootstrapResult{Created: true, Superseded: 1})
	got, err = s.BootstrapToken(ctx, boot(c))
	want("another new token", got, err, BootstrapResult{Created: true, Superseded: 1})
	if lasts := active(); !slices.Equal(lasts, []byte{3}) {
		t.Fatalf("active bootstrap tokens end in %v, want only c (3)", lasts)
	}

	// Revoked stays revoked: neither c again nor b (superseded) comes back.
	if n, err := s.RevokeToken(ctx, "bootstrap"); err != nil || n != 3 {
		t.Fatalf("revoke: %d %v", n, err)
	}
	got, err = s.BootstrapToken(ctx, boot(c))
	want("c after revocation", got, err, BootstrapResult{Revoked: true})
	got, err = s.BootstrapToken(ctx, boot(b))
	want("b after being superseded", got, err, BootstrapResult{Revoked: true})
	for _, d := range [][32]byte{a, b, c} {
		if tok, err := s.Token(ctx, d); err != nil || !tok.Revoked {
			t.Fatalf("token %x: revoked=%v, %v", d[31], tok.Revoked, err)
		}
	}
	if lasts := active(); len(lasts) != 0 {
		t.Fatalf("active bootstrap tokens after revocation: %v", lasts)
	}
	if tok, err := s.Token(ctx, digest(0xee, 9)); err != nil || tok.Revoked {
		t.Fatalf("ci token: %+v %v", tok, err)
	}

	// A selector held by another digest is refused, not overwritten.
	clash := a
	clash[31] = 0x42
	_, err = s.BootstrapToken(ctx, boot(clash))
	wantCode(t, err, host.ErrConflict, "")
}

// TestBootstrapScriptRefusesStaleIndex: the script is given the token
// records the caller listed; when the index holds others by the time it
// runs, it changes nothing and says so (-2), and BootstrapToken reads again.
func TestBootstrapScriptRefusesStaleIndex(t *testing.T) {
	t.Parallel()
	f := miniredisFixture(t)
	s, ctx := f.store, context.Background()
	old := host.Token{Digest: digest(1, 1), Name: "bootstrap", Scopes: host.AllScopes(), Created: time.UnixMilli(1)}
	if err := s.PutToken(ctx, old); err != nil {
		t.Fatal(err)
	}
	fresh := digest(2, 2)
	sel := selector(fresh)
	// Listed as if the index were empty: it holds old's selector.
	res, err := bootstrapTokenScript.Run(ctx, s.client, []string{s.tokenKey(sel), s.tokenIndexKey},
		sel, hex.EncodeToString(fresh[:]), "bootstrap", "plants:read", "2").Int64Slice()
	if err != nil || !slices.Equal(res, []int64{-2, 0}) {
		t.Fatalf("script on a stale listing = %v, %v; want [-2 0]", res, err)
	}
	if n, err := f.raw.Exists(ctx, s.tokenKey(sel)).Result(); err != nil || n != 0 {
		t.Fatalf("the stale run stored the token: %d, %v", n, err)
	}
	if got, err := s.Token(ctx, old.Digest); err != nil || got.Revoked {
		t.Fatalf("the stale run touched the old token: %+v, %v", got, err)
	}
	// BootstrapToken itself reads the index and supersedes the old one.
	r, err := s.BootstrapToken(ctx, host.Token{Digest: fresh, Name: "bootstrap", Scopes: host.AllScopes(), Created: time.UnixMilli(2)})
	if err != nil || r != (BootstrapResult{Created: true, Superseded: 1}) {
		t.Fatalf("BootstrapToken = %+v, %v", r, err)
	}
}
