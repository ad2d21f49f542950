package wasm

import (
	"context"
	"time"

	"github.com/plantgate/plantgate/host"
)

// A plugin's token_lookup runs inside its authorize call, so a lookup that
// waits on the store holds the plugin's instance for a network round trip:
// with a small pool, instances rather than CPU bound throughput. When a
// plugin looks up the SHA-256 digest of the request's credential (as
// bearer-auth does), the host makes that lookup before it takes an
// instance and answers token_lookup from the result.
//
// The answer is what a lookup at the start of the call would have given:
// the same read of Options.Tokens (the store, or serve's short-TTL token
// cache in front of it), made a little earlier in the same request. A
// lookup of any other digest goes to Options.Tokens as always. Whether to
// prefetch is learned per plugin: on once a call looks up the credential's
// digest, off after a call that looked up only others; a plugin that never
// looks up tokens never costs a prefetch.

// tokenCall is one authorize call's view of its credential. It lives in
// the instance's callContext for the call, where token_lookup finds it
// (callContext.Value), so preparing it allocates nothing.
type tokenCall struct {
	set     bool     // the call has a credential and the plugin a token source
	digest  [32]byte // SHA-256 of the credential
	fetched bool     // tok and err hold the prefetched lookup of digest
	tok     host.Token
	err     error
	matched bool // token_lookup was called with digest
	// stamp is the prefetched answer's (StampedTokenSource), zero when it
	// has none: nothing is kept from such a call.
	stamp time.Time
	// uncacheable: the call did something outside the guest besides the
	// prefetched lookup (a KV call, another lookup), so its decision is
	// not kept (decisioncache.go).
	uncacheable bool
	// storeFailed: a token_lookup of this call found the store unavailable.
	// Per call, so that one request's store error never turns another
	// request's plugin fault into a 503.
	storeFailed bool
}

type tokenCallKey struct{}

// prepareTokens returns the tokenCall for a credential whose digest is
// digest, with the lookup made when the plugin is known to want it; a zero
// tokenCall when there is nothing to prepare.
func (p *Plugin) prepareTokens(ctx context.Context, credential string, digest [32]byte) tokenCall {
	if p.tokens == nil || credential == "" {
		return tokenCall{}
	}
	tc := tokenCall{set: true, digest: digest}
	if p.prefetch.Load() {
		// Bounded by the request's deadline, not the plugin's call timeout:
		// it holds no instance, and under load a wait for a store
		// connection alone can outlast a call's 100 ms.
		if p.stamped != nil {
			tc.tok, tc.stamp, tc.err = p.stamped.TokenStamped(ctx, tc.digest)
		} else {
			tc.tok, tc.err = p.tokens.Token(ctx, tc.digest)
		}
		tc.fetched = true
	}
	return tc
}

// token answers a token_lookup of digest: from the call's prefetch when it
// holds that digest, else from the store. It also learns whether to
// prefetch: on once a call looks up its credential's digest, off after a
// call that looked up only others.
func (p *Plugin) token(ctx context.Context, digest [32]byte) (host.Token, error) {
	tc, _ := ctx.Value(tokenCallKey{}).(*tokenCall)
	if tc != nil && !(tc.set && tc.fetched && digest == tc.digest) {
		tc.uncacheable = true
	}
	if tc != nil && tc.set {
		if digest == tc.digest {
			if !tc.matched {
				tc.matched = true
				p.prefetch.Store(true)
			}
			if tc.fetched {
				p.stats.prefetched.Add(1)
				return tc.tok, tc.err
			}
		} else if !tc.matched {
			p.prefetch.Store(false)
		}
	}
	lctx, cancel := lookupContext(ctx)
	defer cancel()
	return p.tokens.Token(lctx, digest)
}
