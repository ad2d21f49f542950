package abi

import (
	"bytes"
	"crypto/sha256"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestAppendDecisionCutsAtCharacter(t *testing.T) {
	t.Parallel()
	text := strings.Repeat("a", MaxText-1) + "é" // é is two bytes: crosses MaxText
	rec := AppendDecision(nil, VerdictDeny, 40050, text)
	d, err := ParseDecision(rec)
	if err != nil {
		t.Fatal(err)
	}
	if len(d.Text) != MaxText-1 || !utf8.Valid(d.Text) {
		t.Fatalf("text cut to %d bytes, valid=%v; want %d valid bytes", len(d.Text), utf8.Valid(d.Text), MaxText-1)
	}
}

func TestRoundTrips(t *testing.T) {
	t.Parallel()
	a, err := ParseAuthorize(AppendAuthorize(nil, "POST", "/plants", "tok"))
	if err != nil || string(a.Method) != "POST" || string(a.Path) != "/plants" || string(a.Credential) != "tok" {
		t.Fatalf("authorize: %+v %v", a, err)
	}
	v, err := ParseValidate(AppendValidate(nil, -9223372036854775808, "fern", "", true, "ci"))
	if err != nil || v.ID != -9223372036854775808 || string(v.Name) != "fern" || !v.HasTag || len(v.Tag) != 0 || string(v.Principal) != "ci" {
		t.Fatalf("validate: %+v %v", v, err)
	}
	digest := make([]byte, DigestSize)
	digest[31] = 7
	r, err := ParseTokenRecord(AppendTokenRecord(nil, 1, 2, true, digest, "ci", "plants:write"))
	if err != nil || r.Created != 1 || r.Expires != 2 || !r.Revoked || r.Digest[31] != 7 || string(r.Name) != "ci" || string(r.Scopes) != "plants:write" {
		t.Fatalf("token: %+v %v", r, err)
	}
	for _, b := range [][]byte{nil, {1, 0, 0}, {5, 0, 0, 0, 'a'}} {
		if _, err := ParseAuthorize(b); err != ErrShort {
			t.Errorf("ParseAuthorize(%v) = %v, want ErrShort", b, err)
		}
	}
}

// TestAuthorizeDigest: the host sends the credential's SHA-256 digest; a
// message without one (from an older host) and one with an empty digest
// (no credential) parse with Digest nil; any other length is refused.
func TestAuthorizeDigest(t *testing.T) {
	t.Parallel()
	sum := sha256.Sum256([]byte("tok"))
	a, err := ParseAuthorize(AppendAuthorize(nil, "POST", "/plants", "tok"))
	if err != nil || !bytes.Equal(a.Digest, sum[:]) {
		t.Fatalf("digest %x, %v; want %x", a.Digest, err, sum)
	}
	older := appendString(appendString(appendString(nil, "POST"), "/plants"), "tok")
	if a, err := ParseAuthorize(older); err != nil || a.Digest != nil || string(a.Credential) != "tok" {
		t.Fatalf("message without a digest: %+v %v", a, err)
	}
	if a, err := ParseAuthorize(AppendAuthorize(nil, "POST", "/plants", "")); err != nil || a.Digest != nil {
		t.Fatalf("no credential: %+v %v", a, err)
	}
	if _, err := ParseAuthorize(AppendAuthorizeDigest(nil, "POST", "/plants", "tok", sum[:31])); err != ErrDigest {
		t.Fatalf("31-byte digest: %v, want ErrDigest", err)
	}
	if _, err := ParseAuthorize(append(older, 32, 0, 0, 0, 1)); err != ErrShort {
		t.Fatalf("digest cut short: %v, want ErrShort", err)
	}
}

// TestAuthorizeOperation: the host sends the operation (route template and
// path id) after the digest; a message from a host that does not has Route
// nil, and one cut inside the operation is refused.
func TestAuthorizeOperation(t *testing.T) {
	t.Parallel()
	sum := sha256.Sum256([]byte("tok"))
	base := AppendAuthorizeDigest(nil, "DELETE", "/plants/-5", "tok", sum[:])
	a, err := ParseAuthorize(AppendOperation(bytes.Clone(base), "DELETE /plants/{id}", -5, true))
	if err != nil || string(a.Route) != "DELETE /plants/{id}" || !a.HasPathID || a.PathID != -5 || !bytes.Equal(a.Digest, sum[:]) || string(a.Path) != "/plants/-5" {
		t.Fatalf("with id: %+v %v", a, err)
	}
	a, err = ParseAuthorize(AppendOperation(AppendAuthorizeDigest(nil, "GET", "/plants", "", nil), "GET /plants", 9, false))
	if err != nil || string(a.Route) != "GET /plants" || a.HasPathID || a.PathID != 0 || a.Digest != nil {
		t.Fatalf("without id: %+v %v", a, err)
	}
	if a, err := ParseAuthorize(base); err != nil || a.Route != nil || a.HasPathID {
		t.Fatalf("no operation: %+v %v", a, err)
	}
	full := AppendOperation(bytes.Clone(base), "DELETE /plants/{id}", -5, true)
	for cut := len(base) + 1; cut < len(full); cut++ {
		if _, err := ParseAuthorize(full[:cut]); err != ErrShort {
			t.Fatalf("cut at %d of %d: %v, want ErrShort", cut, len(full), err)
		}
	}
}

func TestParseDecisionRefuses(t *testing.T) {
	t.Parallel()
	cases := map[string]struct {
		rec  []byte
		want error
	}{
		"short":              {[]byte{1, 0, 0}, ErrShort},
		"unknown verdict":    {AppendDecision(nil, 9, 0, ""), ErrVerdict},
		"host code":          {AppendDecision(nil, VerdictDeny, 40001, "x"), ErrCode},
		"status not allowed": {AppendDecision(nil, VerdictDeny, 20050, "x"), ErrCode},
		"text too long":      {append(AppendDecision(nil, VerdictDeny, 40050, strings.Repeat("a", MaxText)), 'b'), ErrText},
	}
	for name, c := range cases {
		if _, err := ParseDecision(c.rec); err != c.want {
			t.Errorf("%s: %v, want %v", name, err, c.want)
		}
	}
}

// TestPhaseDenies: the table of which statuses each phase may deny with.
func TestPhaseDenies(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		code                int32
		authorize, validate bool
	}{
		{40050, false, true}, {40099, false, true},
		{40150, true, false}, {40199, true, false},
		{40350, true, true},
		{42950, true, true}, {42999, true, true},
		{50350, true, true},
		{40049, false, false}, {40149, false, false}, {42949, false, false}, // the host's range
		{40450, false, false}, {50050, false, false}, {20050, false, false}, // statuses no plugin may use
	} {
		if got := PhaseDenies(PhaseAuthorize, c.code); got != c.authorize {
			t.Errorf("PhaseDenies(authorize, %d) = %v, want %v", c.code, got, c.authorize)
		}
		if got := PhaseDenies(PhaseValidate, c.code); got != c.validate {
			t.Errorf("PhaseDenies(validate, %d) = %v, want %v", c.code, got, c.validate)
		}
		if PhaseDenies(PhaseMask, c.code) || PhaseDenies(0, c.code) {
			t.Errorf("PhaseDenies(not one phase, %d) = true", c.code)
		}
	}
}
