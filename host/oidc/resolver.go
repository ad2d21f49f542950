package oidc

import (
	"context"
	"crypto/sha256"
	"strings"
	"sync/atomic"
	"time"

	lru "github.com/hashicorp/golang-lru/v2"

	"github.com/plantgate/plantgate/host"
)

// KeepFor bounds how long a verified token is kept: until its exp, but no
// longer than this, so a key the provider withdraws stops vouching for the
// tokens it signed within KeepFor.
const KeepFor = 5 * time.Minute

// DefaultMaxKept bounds the verified tokens kept, so a flood of distinct
// valid tokens cannot grow the gateway's memory. A full cache keeps a new
// token in place of the least recently kept one, in O(1): a busy client
// arriving after it filled costs one verification, not one per request.
const DefaultMaxKept = 100_000

// Resolver is the host.CredentialResolver of access tokens: it verifies a
// JWT-shaped credential once and keeps the answer by the credential's
// SHA-256 digest.
type Resolver struct {
	v   *Verifier
	now func() time.Time

	kept *lru.Cache[[32]byte, kept] // by the credential's digest; safe for concurrent use

	verified, hits atomic.Uint64
}

type kept struct {
	tok   host.Token
	until time.Time
}

var _ host.CredentialResolver = (*Resolver)(nil)

// NewResolver returns a Resolver keeping at most max verified tokens
// (DefaultMaxKept when 0).
func NewResolver(v *Verifier, max int) *Resolver {
	if max <= 0 {
		max = DefaultMaxKept
	}
	c, err := lru.New[[32]byte, kept](max)
	if err != nil {
		panic(err) // only for a size below 1, excluded above
	}
	return &Resolver{v: v, now: time.Now, kept: c}
}

// IsJWT reports whether credential has the shape of a JWS (or JWE) in
// compact form: it holds a dot. The gateway's own tokens never do
// (token create writes base64url), so with an issuer configured such a
// credential is an access token or nothing.
func IsJWT(credential string) bool { return strings.IndexByte(credential, '.') >= 0 }

// Resolve implements host.CredentialResolver: a credential with no dot is
// not its kind; one with a dot is a verified access token or an
// *host.Error.
func (r *Resolver) Resolve(ctx context.Context, credential string) (host.Token, time.Time, bool, error) {
	if !IsJWT(credential) {
		return host.Token{}, time.Time{}, false, nil
	}
	var buf [2048]byte // a usual access token fits: hashing it allocates nothing
	digest := sha256.Sum256(append(buf[:0], credential...))
	now := r.now()
	if t, until, ok := r.lookup(digest, now); ok {
		r.hits.Add(1)
		return t, until, true, nil
	}
	t, err := r.v.Verify(ctx, credential, now)
	if err != nil {
		return host.Token{}, time.Time{}, false, err
	}
	r.verified.Add(1)
	t.Digest = digest
	until := now.Add(KeepFor)
	if t.Expires.Before(until) {
		until = t.Expires
	}
	r.kept.Add(digest, kept{tok: t, until: until})
	return t, until, true, nil
}

// Stats returns how many tokens were verified and how many requests were
// answered from a kept verification.
func (r *Resolver) Stats() (verified, hits uint64) { return r.verified.Load(), r.hits.Load() }

// lookup returns the verified token kept for digest, while it is kept.
func (r *Resolver) lookup(digest [32]byte, now time.Time) (host.Token, time.Time, bool) {
	k, ok := r.kept.Peek(digest)
	if !ok || !now.Before(k.until) {
		return host.Token{}, time.Time{}, false
	}
	return k.tok, k.until, true
}

// StampedSource is the token source Tokens falls back to: the store
// behind serve's token cache.
type StampedSource interface {
	Token(ctx context.Context, digest [32]byte) (host.Token, error)
	TokenStamped(ctx context.Context, digest [32]byte) (host.Token, time.Time, error)
}

// Tokens answers the plugins' token lookups for both kinds of credential:
// the request's own access token from what the Resolver recorded on the
// request (host.Exchange.SetCredential) or kept, anything else from the
// store. A plugin cannot tell the two apart, and needs no new import.
type Tokens struct {
	Resolver *Resolver
	Store    StampedSource
}

// Token implements the plugins' token source.
func (s Tokens) Token(ctx context.Context, digest [32]byte) (host.Token, error) {
	t, _, err := s.TokenStamped(ctx, digest)
	return t, err
}

// TokenStamped is Token with the answer's stamp: for an access token the
// moment its verification stops being kept, so a decision made from it
// (host/wasm's decision cache) ends no later.
func (s Tokens) TokenStamped(ctx context.Context, digest [32]byte) (host.Token, time.Time, error) {
	if x := host.ExchangeFrom(ctx); x != nil {
		if t, until, ok := x.Credential(); ok && t.Digest == digest {
			return t, until, nil
		}
	}
	if s.Resolver != nil {
		if t, until, ok := s.Resolver.lookup(digest, s.Resolver.now()); ok {
			return t, until, nil
		}
	}
	return s.Store.TokenStamped(ctx, digest)
}
