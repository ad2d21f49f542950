package abi

import (
	"crypto/sha256"
	"errors"
)

// Authorize is the authorize-phase request. Layout: strings, each a u32
// length then bytes, then the operation's fixed part —
//
//	method
//	path
//	credential  the bearer token as sent, or empty when the host runs without credentials
//	digest      SHA-256 of the credential: DigestSize bytes, empty when there is no credential
//	route       the operation: method and path template, like "GET /plants/{id}"
//	u32 flags   bit 0 set when the path names a plant id
//	i64 id      that id, 0 when there is none
//
// The digest lets a plugin look the token up (ImportTokenLookup takes the
// digest) without hashing it in the guest, where SHA-256 costs more than
// the rest of a typical authorize call. It and then the operation were
// added to version 1 after the first three fields, compatibly: a parser
// ignores bytes after the fields it knows, and a message that ends after
// the credential has no digest (the guest then hashes the credential
// itself), one that ends after the digest has no operation (Route nil).
//
// Version 2 appends the request context ([AppendContext]), which a
// version-1 parser never reads:
//
//	request id  the X-Request-ID the gateway gave the request (and answers with)
//	client      the client's IP address as text, "192.0.2.7" or "2001:db8::1"
//	u32 n       byte length of the header block, then n bytes of (name, value)
//	            strings: the request headers the plugin's sidecar asks for, in
//	            the sidecar's order, names canonical ("X-Tenant"), values as
//	            sent (the first of repeated ones) cut at MaxHeaderValue bytes;
//	            a header the request lacks is left out
//	principal   the name of the token a token_lookup of this request's
//	            credential found valid (not revoked, not expired), by this
//	            plugin or an earlier one of the chain; empty before that
//	scopes      that token's scopes, space-separated
type Authorize struct {
	Method     []byte
	Path       []byte
	Credential []byte
	Digest     []byte // DigestSize bytes, or nil when the message has none
	Route      []byte // nil when the message has no operation
	PathID     int64
	HasPathID  bool

	// HasContext reports whether the message carries the fields below.
	HasContext bool
	RequestID  []byte
	Client     []byte
	Headers    []byte // the header block: walk it with NextHeader
	Principal  []byte
	Scopes     []byte
}

// ErrDigest is a credential digest that is neither empty nor DigestSize
// bytes long.
var ErrDigest = errors.New("abi: credential digest is not 32 bytes")

// AppendAuthorize appends the encoded authorize request to dst, with the
// credential's digest computed here and no operation.
func AppendAuthorize(dst []byte, method, path, credential string) []byte {
	if credential == "" {
		return AppendAuthorizeDigest(dst, method, path, "", nil)
	}
	sum := sha256.Sum256([]byte(credential))
	return AppendAuthorizeDigest(dst, method, path, credential, sum[:])
}

// AppendAuthorizeDigest appends the encoded authorize request to dst with
// digest, which must be the credential's SHA-256 digest (DigestSize bytes)
// or nil: for a caller that has it already. [AppendOperation] may follow.
func AppendAuthorizeDigest(dst []byte, method, path, credential string, digest []byte) []byte {
	dst = appendString(dst, method)
	dst = appendString(dst, path)
	dst = appendString(dst, credential)
	dst = appendU32(dst, uint32(len(digest)))
	return append(dst, digest...)
}

// AppendOperation appends the operation fields to an authorize request
// that dst ends with (from [AppendAuthorizeDigest] or [AppendAuthorize]):
// the route template and, when hasID, the plant id the path names.
func AppendOperation(dst []byte, route string, id int64, hasID bool) []byte {
	dst = appendString(dst, route)
	var flags uint32
	if hasID {
		flags |= flagHasPathID
	} else {
		id = 0
	}
	dst = appendU32(dst, flags)
	return appendU64(dst, uint64(id))
}

const flagHasPathID = 1

// ParseAuthorize parses an authorize request; the fields alias b.
func ParseAuthorize(b []byte) (Authorize, error) {
	var r Authorize
	var ok bool
	if r.Method, b, ok = cutString(b); !ok {
		return r, ErrShort
	}
	if r.Path, b, ok = cutString(b); !ok {
		return r, ErrShort
	}
	if r.Credential, b, ok = cutString(b); !ok {
		return r, ErrShort
	}
	if len(b) == 0 {
		return r, nil // from a host that sends no digest
	}
	if r.Digest, b, ok = cutString(b); !ok {
		return r, ErrShort
	}
	switch len(r.Digest) {
	case 0:
		r.Digest = nil
	case DigestSize:
	default:
		return r, ErrDigest
	}
	if len(b) == 0 {
		return r, nil // from a host that sends no operation
	}
	if r.Route, b, ok = cutString(b); !ok || len(b) < 12 {
		return Authorize{}, ErrShort
	}
	if r.HasPathID = u32(b)&flagHasPathID != 0; r.HasPathID {
		r.PathID = int64(u64(b[4:]))
	}
	if b = b[12:]; len(b) == 0 {
		return r, nil // from a host that sends no context
	}
	if r.RequestID, b, ok = cutString(b); !ok {
		return Authorize{}, ErrShort
	}
	if r.Client, b, ok = cutString(b); !ok {
		return Authorize{}, ErrShort
	}
	if r.Headers, b, ok = cutString(b); !ok {
		return Authorize{}, ErrShort
	}
	if r.Principal, r.Scopes, ok = cutPrincipal(b); !ok {
		return Authorize{}, ErrShort
	}
	r.HasContext = true
	return r, nil
}

// AppendContext appends the version-2 request context to an authorize
// request that dst ends with (after [AppendOperation]): the request id and
// the client address, then an empty header block. Add headers with
// [AppendRequestHeader] and end with [AppendPrincipal].
//
// It returns the offset of the header block's length, for
// AppendRequestHeader.
func AppendContext(dst []byte, requestID string, client []byte) ([]byte, int) {
	dst = appendString(dst, requestID)
	dst = appendU32(dst, uint32(len(client)))
	dst = append(dst, client...)
	return appendU32(dst, 0), len(dst)
}

// AppendRequestHeader appends one (name, value) pair to the header block
// whose length is at offset block of dst ([AppendContext]).
func AppendRequestHeader(dst []byte, block int, name string, value []byte) []byte {
	dst = appendString(dst, name)
	dst = appendU32(dst, uint32(len(value)))
	dst = append(dst, value...)
	putU32(dst[block:], uint32(len(dst)-block-4))
	return dst
}

// AppendPrincipal appends the principal (a token's name and its scopes,
// joined by single spaces); name "" for none.
func AppendPrincipal(dst []byte, name string, scopes []string) []byte {
	dst = appendString(dst, name)
	n := max(len(scopes)-1, 0)
	for _, sc := range scopes {
		n += len(sc)
	}
	dst = appendU32(dst, uint32(n))
	for i, sc := range scopes {
		if i > 0 {
			dst = append(dst, ' ')
		}
		dst = append(dst, sc...)
	}
	return dst
}

func cutPrincipal(b []byte) (name, scopes []byte, ok bool) {
	if name, b, ok = cutString(b); !ok {
		return nil, nil, false
	}
	scopes, _, ok = cutString(b)
	return name, scopes, ok
}

// Validate is the validate-phase request: the canonical plant. Layout:
//
//	offset 0  i64  id
//	offset 8  u32  flags: bit 0 set when the plant has a tag
//	offset 12 ...  strings name, tag, principal (u32 length then bytes)
//
// Principal is the text the authorize chain allowed with (for example the
// token's name), empty when none.
//
// Version 2 appends the principal a token lookup established, as
// [AppendPrincipal] writes it (token name, then space-separated scopes);
// a version-1 parser never reads it.
type Validate struct {
	ID        int64
	HasTag    bool
	Name      []byte
	Tag       []byte
	Principal []byte

	HasCaller    bool // the message carries the two fields below
	CallerName   []byte
	CallerScopes []byte
}

const flagHasTag = 1

// AppendValidate appends the encoded validate request to dst.
func AppendValidate(dst []byte, id int64, name string, tag string, hasTag bool, principal string) []byte {
	dst = appendU64(dst, uint64(id))
	var flags uint32
	if hasTag {
		flags |= flagHasTag
	}
	dst = appendU32(dst, flags)
	dst = appendString(dst, name)
	dst = appendString(dst, tag)
	return appendString(dst, principal)
}

// ParseValidate parses a validate request; the fields alias b.
func ParseValidate(b []byte) (Validate, error) {
	var r Validate
	if len(b) < 12 {
		return r, ErrShort
	}
	r.ID = int64(u64(b))
	r.HasTag = u32(b[8:])&flagHasTag != 0
	b = b[12:]
	var ok bool
	if r.Name, b, ok = cutString(b); !ok {
		return r, ErrShort
	}
	if r.Tag, b, ok = cutString(b); !ok {
		return r, ErrShort
	}
	if r.Principal, b, ok = cutString(b); !ok {
		return r, ErrShort
	}
	if len(b) == 0 {
		return r, nil // from a host that sends no caller
	}
	if r.CallerName, r.CallerScopes, ok = cutPrincipal(b); !ok {
		return Validate{}, ErrShort
	}
	r.HasCaller = true
	return r, nil
}

// TokenRecord is what [ImportTokenLookup] writes. Layout:
//
//	offset 0  i64       created, Unix milliseconds
//	offset 8  i64       expires, Unix milliseconds; 0 when it never expires
//	offset 16 u32       flags: bit 0 set when the token is revoked
//	offset 20 [32]byte  SHA-256 digest of the token, for a constant-time compare
//	offset 52 ...       strings name, scopes (space-separated)
type TokenRecord struct {
	Created int64
	Expires int64
	Revoked bool
	Digest  []byte
	Name    []byte
	Scopes  []byte
}

const (
	tokenFixed     = 52
	flagRevoked    = 1
	DigestSize     = 32
	tokenDigestOff = 20
)

// AppendTokenRecord appends the encoded token record to dst. digest must be
// [DigestSize] bytes. The scopes are written joined by single spaces, so
// one space-separated string and a list of scopes encode alike.
func AppendTokenRecord(dst []byte, created, expires int64, revoked bool, digest []byte, name string, scopes ...string) []byte {
	dst = appendU64(dst, uint64(created))
	dst = appendU64(dst, uint64(expires))
	var flags uint32
	if revoked {
		flags |= flagRevoked
	}
	dst = appendU32(dst, flags)
	var d [DigestSize]byte
	copy(d[:], digest)
	dst = append(dst, d[:]...)
	return AppendPrincipal(dst, name, scopes)
}

// ParseTokenRecord parses a token record; the fields alias b.
func ParseTokenRecord(b []byte) (TokenRecord, error) {
	var r TokenRecord
	if len(b) < tokenFixed {
		return r, ErrShort
	}
	r.Created = int64(u64(b))
	r.Expires = int64(u64(b[8:]))
	r.Revoked = u32(b[16:])&flagRevoked != 0
	r.Digest = b[tokenDigestOff : tokenDigestOff+DigestSize]
	b = b[tokenFixed:]
	var ok bool
	if r.Name, b, ok = cutString(b); !ok {
		return r, ErrShort
	}
	if r.Scopes, _, ok = cutString(b); !ok {
		return r, ErrShort
	}
	return r, nil
}

func putU32(b []byte, v uint32) {
	_ = b[3]
	b[0], b[1], b[2], b[3] = byte(v), byte(v>>8), byte(v>>16), byte(v>>24)
}

func appendU32(dst []byte, v uint32) []byte {
	return append(dst, byte(v), byte(v>>8), byte(v>>16), byte(v>>24))
}

func appendU64(dst []byte, v uint64) []byte {
	return appendU32(appendU32(dst, uint32(v)), uint32(v>>32))
}

func appendString(dst []byte, s string) []byte {
	return append(appendU32(dst, uint32(len(s))), s...)
}

func u32(b []byte) uint32 {
	_ = b[3]
	return uint32(b[0]) | uint32(b[1])<<8 | uint32(b[2])<<16 | uint32(b[3])<<24
}

func u64(b []byte) uint64 { return uint64(u32(b)) | uint64(u32(b[4:]))<<32 }

// cutString splits a length-prefixed string off the front of b.
func cutString(b []byte) (s, rest []byte, ok bool) {
	if len(b) < 4 {
		return nil, b, false
	}
	n := u32(b)
	if uint64(n) > uint64(len(b)-4) {
		return nil, b, false
	}
	return b[4 : 4+n], b[4+n:], true
}
