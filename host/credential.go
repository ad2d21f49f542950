package host

import (
	"context"
	"time"
)

// CredentialResolver is the part of the one credential resolver that knows
// credentials the store does not keep: an identity provider's access
// tokens (host/oidc). The HTTP layer asks it about every bearer credential
// before the authorize chain runs; a token it resolves answers the chain's
// token lookups of that credential's digest, exactly as a token found in
// the store would (see Exchange.SetCredential), so plugins see the
// caller and scopes the same way whichever resolved them.
type CredentialResolver interface {
	// Resolve returns the token the credential stands for, and until when
	// that answer may be reused (zero: not kept), with ok true. A
	// credential of another kind (an opaque token, for the store) is
	// ok false with a nil error; one of its kind that it refuses is an
	// *Error (401, or 503 while it cannot check).
	Resolve(ctx context.Context, credential string) (t Token, until time.Time, ok bool, err error)
}

// resolved is the request's credential as a CredentialResolver resolved it.
type resolved struct {
	tok   Token
	until time.Time
	set   bool
}

// SetCredential records the token the request's own credential resolved
// to, and until when the answer may be reused. A token lookup of its digest
// is answered from it (host/oidc.Tokens); the first one set stays.
func (x *Exchange) SetCredential(t Token, until time.Time) {
	x.mu.Lock()
	if !x.cred.set {
		x.cred = resolved{tok: t, until: until, set: true}
	}
	x.mu.Unlock()
}

// Credential returns what SetCredential recorded, ok false before.
func (x *Exchange) Credential() (t Token, until time.Time, ok bool) {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.cred.tok, x.cred.until, x.cred.set
}
