package abi

import (
	"bytes"
	"crypto/sha256"
	"testing"
)

// parseAuthorizeV1Digest is ParseAuthorize exactly as plugins built before
// the operation fields have it compiled in (commit 086b59d): frozen here so
// that a change to the message layout that would break them fails a test.
func parseAuthorizeV1Digest(b []byte) (Authorize, error) {
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
	if r.Digest, _, ok = cutString(b); !ok {
		return r, ErrShort
	}
	switch len(r.Digest) {
	case 0:
		r.Digest = nil
	case DigestSize:
	default:
		return r, ErrDigest
	}
	return r, nil
}

// TestOlderPluginsReadNewRequests: what today's host sends (with the
// operation) parses in a plugin built before the operation fields, with
// every field it knows intact.
func TestOlderPluginsReadNewRequests(t *testing.T) {
	t.Parallel()
	sum := sha256.Sum256([]byte("tok"))
	for _, msg := range [][]byte{
		AppendOperation(AppendAuthorizeDigest(nil, "DELETE", "/plants/7", "tok", sum[:]), "DELETE /plants/{id}", 7, true),
		AppendOperation(AppendAuthorizeDigest(nil, "GET", "/plants", "", nil), "GET /plants", 0, false),
	} {
		a, err := parseAuthorizeV1Digest(msg)
		now, _ := ParseAuthorize(msg)
		if err != nil || !bytes.Equal(a.Method, now.Method) || !bytes.Equal(a.Path, now.Path) ||
			!bytes.Equal(a.Credential, now.Credential) || !bytes.Equal(a.Digest, now.Digest) {
			t.Fatalf("older parser: %+v %v; want the fields of %+v", a, err, now)
		}
	}
}
