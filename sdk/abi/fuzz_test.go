package abi

import (
	"bytes"
	"crypto/sha256"
	"testing"
)

// FuzzParse feeds arbitrary bytes to every parser: none may panic, and what
// one accepts re-encodes to the bytes it consumed.
func FuzzParse(f *testing.F) {
	f.Add([]byte{})
	f.Add(AppendDecision(nil, VerdictDeny, 40050, "no"))
	f.Add(AppendDecision(nil, 9, 1, ""))
	f.Add(AppendAuthorize(nil, "POST", "/plants", "tok"))
	f.Add(AppendValidate(nil, -1, "fern", "", true, "ci"))
	f.Add(AppendTokenRecord(nil, 1, 2, true, make([]byte, DigestSize), "ci", "plants:write"))
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 1, 2, 3})
	f.Fuzz(func(t *testing.T, b []byte) {
		if d, err := ParseDecision(b); err == nil {
			again := AppendDecision(nil, d.Verdict, d.Code, string(d.Text))
			if !bytes.Equal(again[DecisionHeader:], b[DecisionHeader:]) || !bytes.Equal(again[4:8], b[4:8]) || again[0] != b[0] {
				t.Fatalf("decision %+v re-encodes to %x, from %x", d, again, b)
			}
		}
		if a, err := ParseAuthorize(b); err == nil {
			again := AppendAuthorizeDigest(nil, string(a.Method), string(a.Path), string(a.Credential), a.Digest)
			if a.Digest == nil && a.Route == nil { // no digest, or an empty one: both re-encode without
				again = again[:len(again)-4]
			}
			if a.Digest != nil && len(a.Digest) != DigestSize {
				t.Fatalf("authorize digest of %d bytes accepted", len(a.Digest))
			}
			if a.Route == nil {
				if !bytes.HasPrefix(b, again) {
					t.Fatalf("authorize %+v re-encodes to %x, from %x", a, again, b)
				}
			} else {
				// Flag bits other than bit 0 are ignored, and so is the id
				// without that bit.
				again = AppendOperation(again, string(a.Route), a.PathID, a.HasPathID)
				n := len(again)
				if len(b) < n || !bytes.Equal(again[:n-12], b[:n-12]) || (b[n-12]&1 == 1) != a.HasPathID ||
					a.HasPathID && !bytes.Equal(again[n-8:], b[n-8:n]) || !a.HasPathID && a.PathID != 0 {
					t.Fatalf("authorize %+v re-encodes to %x, from %x", a, again, b)
				}
			}
		}
		if v, err := ParseValidate(b); err == nil {
			again := AppendValidate(nil, v.ID, string(v.Name), string(v.Tag), v.HasTag, string(v.Principal))
			if !bytes.Equal(again[:8], b[:8]) || !bytes.HasPrefix(b[12:], again[12:]) || (b[8]&1 == 1) != v.HasTag {
				t.Fatalf("validate %+v re-encodes to %x, from %x", v, again, b)
			}
		}
		if r, err := ParseTokenRecord(b); err == nil {
			again := AppendTokenRecord(nil, r.Created, r.Expires, r.Revoked, r.Digest, string(r.Name), string(r.Scopes))
			if !bytes.Equal(again[:16], b[:16]) || !bytes.HasPrefix(b[20:], again[20:]) {
				t.Fatalf("token record %+v re-encodes to %x, from %x", r, again, b)
			}
		}
	})
}

// FuzzRoundTrip encodes arbitrary values and parses them back unchanged.
func FuzzRoundTrip(f *testing.F) {
	f.Add(int64(1), "fern", "green", true, "ci", uint8(VerdictDeny), int32(40050))
	f.Add(int64(-1<<63), "", "", false, "", uint8(VerdictAllow), int32(0))
	f.Add(int64(7), "é\x00\xff", "\u2603", true, "p", uint8(3), int32(40001))
	f.Fuzz(func(t *testing.T, id int64, name, tag string, hasTag bool, principal string, verdict uint8, code int32) {
		a, err := ParseAuthorize(AppendAuthorize(nil, name, tag, principal))
		if err != nil || string(a.Method) != name || string(a.Path) != tag || string(a.Credential) != principal {
			t.Fatalf("authorize: %+v %v", a, err)
		}
		if sum := sha256.Sum256([]byte(principal)); principal != "" && !bytes.Equal(a.Digest, sum[:]) || principal == "" && a.Digest != nil {
			t.Fatalf("authorize digest %x for credential %q", a.Digest, principal)
		}
		v, err := ParseValidate(AppendValidate(nil, id, name, tag, hasTag, principal))
		if err != nil || v.ID != id || string(v.Name) != name || string(v.Tag) != tag || v.HasTag != hasTag || string(v.Principal) != principal {
			t.Fatalf("validate: %+v %v", v, err)
		}
		digest := bytes.Repeat([]byte{byte(id)}, DigestSize)
		r, err := ParseTokenRecord(AppendTokenRecord(nil, id, -id, hasTag, digest, name, principal))
		if err != nil || r.Created != id || r.Expires != -id || r.Revoked != hasTag || !bytes.Equal(r.Digest, digest) || string(r.Name) != name || string(r.Scopes) != principal {
			t.Fatalf("token record: %+v %v", r, err)
		}
		rec := AppendDecision(nil, verdict, code, name)
		d, err := ParseDecision(rec)
		wantErr := verdict > VerdictFault || verdict == VerdictDeny && !ValidDenyCode(code)
		if (err != nil) != wantErr {
			t.Fatalf("decision %d %d: %v", verdict, code, err)
		}
		if err == nil && (d.Verdict != verdict || d.Code != code || len(d.Text) > MaxText || !bytes.HasPrefix([]byte(name), d.Text)) {
			t.Fatalf("decision: %+v", d)
		}
	})
}
