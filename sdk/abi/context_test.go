package abi

import (
	"bytes"
	"testing"
)

// TestAuthorizeContextRoundTrip: the version-2 context parses back field by
// field, headers in order, and a message without it has none.
func TestAuthorizeContextRoundTrip(t *testing.T) {
	t.Parallel()
	msg := AppendOperation(AppendAuthorize(nil, "GET", "/plants/7", "tok"), "GET /plants/{id}", 7, true)
	msg, block := AppendContext(msg, "req-1", []byte("192.0.2.7"))
	msg = AppendRequestHeader(msg, block, "X-Tenant", []byte("blue"))
	msg = AppendRequestHeader(msg, block, "X-Trace", []byte(""))
	msg = AppendPrincipal(msg, "ci", []string{"plants:read", "plants:write"})
	a, err := ParseAuthorize(msg)
	if err != nil || !a.HasContext || string(a.RequestID) != "req-1" || string(a.Client) != "192.0.2.7" ||
		string(a.Principal) != "ci" || string(a.Scopes) != "plants:read plants:write" || a.PathID != 7 {
		t.Fatalf("ParseAuthorize = %+v, %v", a, err)
	}
	var got []string
	for b := a.Headers; len(b) > 0; {
		n, v, rest, ok := NextHeader(b)
		if !ok {
			t.Fatalf("header block %q does not parse", a.Headers)
		}
		got, b = append(got, string(n)+"="+string(v)), rest
	}
	if len(got) != 2 || got[0] != "X-Tenant=blue" || got[1] != "X-Trace=" {
		t.Fatalf("headers = %q", got)
	}
	old, err := ParseAuthorize(AppendOperation(AppendAuthorize(nil, "GET", "/", ""), "GET /plants", 0, false))
	if err != nil || old.HasContext || old.Principal != nil {
		t.Fatalf("without context: %+v, %v", old, err)
	}
	if _, err := ParseAuthorize(msg[:len(msg)-1]); err != ErrShort {
		t.Fatalf("cut context: %v, want ErrShort", err)
	}
}

// TestValidateCallerRoundTrip: the version-2 caller after the principal,
// and a version-1 message without it.
func TestValidateCallerRoundTrip(t *testing.T) {
	t.Parallel()
	v1 := AppendValidate(nil, 1, "fern", "", false, "ci")
	v, err := ParseValidate(AppendPrincipal(bytes.Clone(v1), "ci", []string{"plants:write"}))
	if err != nil || !v.HasCaller || string(v.CallerName) != "ci" || string(v.CallerScopes) != "plants:write" || string(v.Principal) != "ci" {
		t.Fatalf("ParseValidate = %+v, %v", v, err)
	}
	if v, err := ParseValidate(v1); err != nil || v.HasCaller {
		t.Fatalf("version 1: %+v, %v", v, err)
	}
}

// TestHeaderDecision: a decision with headers parses back with its text;
// one without the flag is a version-1 record, byte for byte.
func TestHeaderDecision(t *testing.T) {
	t.Parallel()
	rec := AppendHeaderDecision(nil, VerdictDeny, 42950, "slow down", "Retry-After", "1", "RateLimit", `"default";r=0;t=1`)
	d, err := ParseDecision(rec)
	if err != nil || d.Code != 42950 || string(d.Text) != "slow down" || rec[1] != DecisionHeaders {
		t.Fatalf("ParseDecision = %+v, %v", d, err)
	}
	n, v, rest, ok := NextHeader(d.Headers)
	n2, v2, rest2, ok2 := NextHeader(rest)
	if !ok || !ok2 || string(n) != "Retry-After" || string(v) != "1" || string(n2) != "RateLimit" || string(v2) != `"default";r=0;t=1` || len(rest2) != 0 {
		t.Fatalf("headers %q", d.Headers)
	}
	if got, want := AppendHeaderDecision(nil, VerdictAllow, 0, "ci"), AppendDecision(nil, VerdictAllow, 0, "ci"); !bytes.Equal(got, want) {
		t.Fatalf("no headers: %q, want %q", got, want)
	}
	bad := bytes.Clone(rec)
	bad[8] = 0xff // the block claims more bytes than the record has
	if _, err := ParseDecision(bad); err != ErrShort {
		t.Fatalf("bad block: %v, want ErrShort", err)
	}
}

func TestResponseHeader(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{"retry-after": "Retry-After", "RATELIMIT": "RateLimit", "ratelimit-policy": "RateLimit-Policy", "Set-Cookie": ""} {
		if got, ok := ResponseHeader(in); got != want || ok != (want != "") {
			t.Errorf("ResponseHeader(%q) = %q, %v", in, got, ok)
		}
	}
}

func TestTakeRoundTrip(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		denied           bool
		remaining, reset int64
	}{{false, 99, 750}, {true, 0, 1}, {false, 1 << 40, 1 << 40}} {
		d, r, s := UnpackTake(PackTake(c.denied, c.remaining, c.reset))
		if d != c.denied || r != min(c.remaining, 1<<30-1) || s != min(c.reset, 1<<32-1) || PackTake(c.denied, c.remaining, c.reset) < 0 {
			t.Errorf("%+v → %v %d %d", c, d, r, s)
		}
	}
}
