package sdk

import (
	"errors"
	"strings"
	"time"

	"github.com/plantgate/plantgate/sdk/abi"
)

// Token is an access token's record from the host's token store. Only the
// token's SHA-256 digest is stored; the token itself never is.
//
// Name and Scopes returned by [LookupToken] alias an SDK-owned buffer: they
// are valid until the next LookupToken or until the handler returns,
// whichever comes first. Copy them with strings.Clone to keep them.
type Token struct {
	Digest  [abi.DigestSize]byte // SHA-256 of the token; compare it in constant time
	Name    string               // who holds it, for logs: AllowAs(t.Name)
	Scopes  string               // space-separated, for example "plants:read plants:write"
	Created time.Time            // zero when the store does not know
	Expires time.Time            // zero: never
	Revoked bool
}

// HasScope reports whether scope is one of t's space-separated scopes. It
// does not allocate.
func (t Token) HasScope(scope string) bool { return hasScope(t.Scopes, scope) }

// hasScope reports whether scope is one of the space-separated scopes s.
func hasScope(s, scope string) bool {
	if scope == "" {
		return false
	}
	for s != "" {
		var f string
		f, s, _ = strings.Cut(s, " ")
		if f == scope {
			return true
		}
	}
	return false
}

// Expired reports whether t has an expiry and now is at or past it.
func (t Token) Expired(now time.Time) bool {
	return !t.Expires.IsZero() && !now.Before(t.Expires)
}

// Errors from [LookupToken]. Any other error means the host broke the
// contract; a plugin should fail closed with a [Fault].
var (
	// ErrTokenNotFound: no token has this digest. Deny with a 401.
	ErrTokenNotFound = errors.New("sdk: token not found")
	// ErrUnavailable: the store could not be asked, for a token lookup or
	// a KV call. Deny with a 503 such as [Unavailable]; the client may retry.
	ErrUnavailable = errors.New("sdk: store unavailable")
)

var (
	errLookupArgument = errors.New("sdk: token lookup: the host refused the digest")
	errLookupResult   = errors.New("sdk: token lookup: the host answered outside the ABI")
)

// maxTokenRecord bounds the token record buffer; a longer record is an error.
const maxTokenRecord = 1 << 20

var (
	// tokenRecord receives token records; it grows when one does not fit.
	tokenRecord = make([]byte, 512)
	// lookupDigest is the digest argument, static so passing its address to
	// the host never moves it to the heap.
	lookupDigest [abi.DigestSize]byte
)

// LookupToken asks the host's token store for the token whose SHA-256
// digest is digest.
//
//	sum := sha256.Sum256(credential)
//	tok, err := sdk.LookupToken(sum)
//	switch {
//	case errors.Is(err, sdk.ErrTokenNotFound):
//		return sdk.Unauthorized("invalid token")
//	case err != nil:
//		return sdk.Unavailable("token store unavailable")
//	}
//
// # Notes
//
//   - The record's strings alias an SDK buffer; see [Token].
//   - The store finds tokens by digest, so compare tok.Digest with the
//     digest you computed using crypto/subtle before trusting the record.
//   - It does not allocate unless a record is larger than any seen before.
func LookupToken(digest [abi.DigestSize]byte) (Token, error) {
	lookupDigest = digest
	n := tokenLookup(&lookupDigest, tokenRecord)
	if n > int32(len(tokenRecord)) && n <= maxTokenRecord {
		tokenRecord = make([]byte, n)
		n = tokenLookup(&lookupDigest, tokenRecord)
	}
	switch {
	case n == abi.LookupNotFound:
		return Token{}, ErrTokenNotFound
	case n == abi.LookupUnavailable:
		return Token{}, ErrUnavailable
	case n == abi.LookupBadArgument:
		return Token{}, errLookupArgument
	case n < 0 || n > int32(len(tokenRecord)):
		return Token{}, errLookupResult
	}
	r, err := abi.ParseTokenRecord(tokenRecord[:n])
	if err != nil {
		return Token{}, errLookupResult
	}
	t := Token{
		Name:    borrow(r.Name),
		Scopes:  borrow(r.Scopes),
		Created: unixMilli(r.Created),
		Expires: unixMilli(r.Expires),
		Revoked: r.Revoked,
	}
	copy(t.Digest[:], r.Digest)
	return t, nil
}

// unixMilli converts the record's Unix milliseconds, where 0 means unset.
func unixMilli(ms int64) time.Time {
	if ms == 0 {
		return time.Time{}
	}
	return time.UnixMilli(ms).UTC()
}
