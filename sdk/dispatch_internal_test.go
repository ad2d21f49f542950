package sdk

import (
	"errors"
	"testing"

	"github.com/plantgate/plantgate/sdk/abi"
	"github.com/plantgate/plantgate/sdk/internal/module"
)

// The per-call path must not allocate: the guest's GC is the gateway's tail
// latency. Native escape analysis matches the wasm build for this code.
func TestCallsDoNotAllocate(t *testing.T) {
	digest := [abi.DigestSize]byte{1, 2, 3}
	record := abi.AppendTokenRecord(nil, 1, 0, false, digest[:], "ci", "plants:read plants:write")
	module.TokenLookup = func(_, out []byte) int32 { return int32(copy(out, record)) }
	t.Cleanup(func() { module.TokenLookup = nil })

	authorizeHandler = func(r Request) Decision {
		tok, err := LookupToken(digest)
		if err != nil || !tok.HasScope("plants:write") || r.Credential == "" {
			return Deny(40150, "invalid token")
		}
		return AllowAs(tok.Name)
	}
	validateHandler = func(p Plant) Decision {
		if p.Name == "bad" {
			return Deny(40050, "name is bad") // a constant message costs nothing either
		}
		return Allow()
	}
	t.Cleanup(func() { authorizeHandler, validateHandler = nil, nil })

	tests := []struct {
		name   string
		export func([]byte) []byte
		msg    []byte
		want   string // decision record text, "" for ResultAllow
	}{
		{"authorize allow as", authorize, abi.AppendAuthorize(nil, "POST", "/plants", "s3cret"), "ci"},
		{"authorize deny", authorize, abi.AppendAuthorize(nil, "POST", "/plants", ""), "invalid token"},
		{"validate allow", validate, abi.AppendValidate(nil, 1, "fern", "green", true, "ci"), ""},
		{"validate deny", validate, abi.AppendValidate(nil, 1, "bad", "", false, ""), "name is bad"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			msg := buffer(uint32(len(tt.msg)))[:copy(request, tt.msg)]
			rec := tt.export(msg)
			if got := string(rec[min(len(rec), abi.DecisionHeader):]); got != tt.want {
				t.Fatalf("record text %q, want %q", got, tt.want)
			}
			if n := testing.AllocsPerRun(1000, func() { tt.export(msg) }); n != 0 {
				t.Errorf("%s allocates %v times per call, want 0", tt.name, n)
			}
		})
	}
}

func TestBuffer(t *testing.T) {
	request = make([]byte, minRequest)
	t.Cleanup(func() { request = make([]byte, minRequest) })
	first := &buffer(0)[0]
	if len(request) != minRequest || &buffer(minRequest)[0] != first {
		t.Fatalf("buffer within the first %d bytes moved or resized", minRequest)
	}
	if n := len(buffer(minRequest + 1)); n != 2*minRequest {
		t.Errorf("buffer(%d) has %d bytes, want %d", minRequest+1, n, 2*minRequest)
	}
	if b := buffer(maxRequest); len(b) != maxRequest {
		t.Errorf("buffer(max) has %d bytes", len(b))
	}
	if b := buffer(maxRequest + 1); b != nil {
		t.Errorf("buffer(max+1) = %d bytes, want nil", len(b))
	}
}

// A host that answers a lookup outside the ABI gets an error, never a token.
func TestLookupTokenHostErrors(t *testing.T) {
	good := abi.AppendTokenRecord(nil, 1, 0, false, make([]byte, abi.DigestSize), "ci", "plants:write")
	tests := []struct {
		name   string
		lookup func(digest, out []byte) int32
		want   error
	}{
		{"not found", func(_, _ []byte) int32 { return abi.LookupNotFound }, ErrTokenNotFound},
		{"unavailable", func(_, _ []byte) int32 { return abi.LookupUnavailable }, ErrUnavailable},
		{"bad argument", func(_, _ []byte) int32 { return abi.LookupBadArgument }, errLookupArgument},
		{"unknown negative", func(_, _ []byte) int32 { return -7 }, errLookupResult},
		{"still too long after growing", func(_, out []byte) int32 { return int32(len(out)) + 1 }, errLookupResult},
		{"over the record limit", func(_, _ []byte) int32 { return maxTokenRecord + 1 }, errLookupResult},
		{"malformed", func(_, out []byte) int32 { return int32(copy(out, good[:40])) }, errLookupResult},
		{"good", func(digest, out []byte) int32 {
			if len(digest) != abi.DigestSize {
				return abi.LookupBadArgument
			}
			return int32(copy(out, good))
		}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			module.TokenLookup = tt.lookup
			defer func() { module.TokenLookup = nil }()
			tok, err := LookupToken([abi.DigestSize]byte{})
			if !errors.Is(err, tt.want) {
				t.Fatalf("LookupToken error = %v, want %v", err, tt.want)
			}
			if err != nil && tok != (Token{}) {
				t.Errorf("LookupToken returned %+v with error %v", tok, err)
			}
		})
	}
}

func TestRequestMalformed(t *testing.T) {
	validateHandler = func(Plant) Decision { return Allow() }
	authorizeHandler = func(Request) Decision { return Allow() }
	t.Cleanup(func() { authorizeHandler, validateHandler = nil, nil })
	for _, tt := range []struct {
		export func([]byte) []byte
		msg    []byte
		want   string
	}{
		{validate, abi.AppendValidate(nil, 1, "fern", "", false, "")[:14], "sdk: validate request: " + abi.ErrShort.Error()},
		{validate, nil, "sdk: validate request: " + abi.ErrShort.Error()},
		{authorize, []byte{9, 0, 0, 0, 'P'}, "sdk: authorize request: " + abi.ErrShort.Error()},
	} {
		d, err := abi.ParseDecision(tt.export(tt.msg))
		if err != nil || d.Verdict != abi.VerdictFault || string(d.Text) != tt.want {
			t.Errorf("decision %d %q, %v; want fault %q", d.Verdict, d.Text, err, tt.want)
		}
	}
}
