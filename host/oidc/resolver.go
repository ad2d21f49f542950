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

	// With introspection (Introspect): who answers about credentials that
	// are not a JWS, after the gateway's own store.
	in    *Introspector
	known Known

	verified, hits atomic.Uint64
}

// Known is the gateway's own token lookup (the store, through its token
// cache): an error whose host.Code is host.ErrTokenNotFound when it has no
// token of that digest.
type Known interface {
	Token(ctx context.Context, digest [32]byte) (host.Token, error)
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

// IsJWS reports whether credential has the shape of a JWS in compact form
// (RFC 7515 §7.1): three parts, two dots. With introspection on, only such
// a credential is verified locally; every other, dotted or not (a JWE, as
// zitadel and Auth0 issue opaque tokens, or Hydra's "token.signature"), is
// the provider's to introspect.
func IsJWS(credential string) bool { return strings.Count(credential, ".") == 2 }

// Introspect has Resolve ask in (RFC 7662) about every credential that is
// not a JWS, unless known, the gateway's own token lookup, finds it: the
// gateway's own tokens work as before and cost the provider nothing. Call
// it before the Resolver is used.
func (r *Resolver) Introspect(in *Introspector, known Known) { r.in, r.known = in, known }

// Resolve implements host.CredentialResolver: a credential with no dot is
// not its kind; one with a dot is a verified access token or an
// *host.Error. With introspection, see Introspect.
func (r *Resolver) Resolve(ctx context.Context, credential string) (host.Token, time.Time, bool, error) {
	switch {
	case r.in != nil && !IsJWS(credential):
		return r.introspect(ctx, credential)
	case !IsJWT(credential):
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

// introspect resolves a credential that is not a JWS: from a kept answer,
// else not at all when the gateway's own store has it (or cannot say: the
// chain's own lookup then meets the same store), else by asking the
// provider. A token the provider does not know is not this resolver's
// kind, so the chain answers it as any unknown credential.
func (r *Resolver) introspect(ctx context.Context, credential string) (host.Token, time.Time, bool, error) {
	var buf [2048]byte
	digest := sha256.Sum256(append(buf[:0], credential...))
	if t, until, ok := r.lookup(digest, r.now()); ok {
		r.hits.Add(1)
		return t, until, true, nil
	}
	if _, err := r.known.Token(ctx, digest); host.Code(err) != host.ErrTokenNotFound {
		return host.Token{}, time.Time{}, false, nil
	}
	t, until, ok, err := r.in.Introspect(ctx, credential, digest)
	if err != nil || !ok {
		return host.Token{}, time.Time{}, false, err
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
