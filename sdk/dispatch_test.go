package sdk_test

import (
	"errors"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/plantgate/plantgate/sdk"
	"github.com/plantgate/plantgate/sdk/abi"
	"github.com/plantgate/plantgate/sdk/sdktest"
)

// These tests register handlers, which are global like in a plugin, so
// they do not run in parallel with each other.

func handleAuthorize(t *testing.T, f func(sdk.Request) sdk.Decision) {
	sdk.HandleAuthorize(f)
	t.Cleanup(func() { sdk.HandleAuthorize(nil) })
}

func handleValidate(t *testing.T, f func(sdk.Plant) sdk.Decision) {
	sdk.HandleValidate(f)
	t.Cleanup(func() { sdk.HandleValidate(nil) })
}

func handleConfigure(t *testing.T, f func([]byte) error) {
	sdk.HandleConfigure(f)
	t.Cleanup(func() { sdk.HandleConfigure(nil) })
}

func allowPlant(sdk.Plant) sdk.Decision     { return sdk.Allow() }
func allowRequest(sdk.Request) sdk.Decision { return sdk.Allow() }
func wantDecision(t *testing.T, got sdk.Decision, want string) {
	t.Helper()
	if got.String() != want {
		t.Errorf("decision = %q, want %q", got, want)
	}
}

func TestPhases(t *testing.T) {
	tests := []struct {
		name      string
		authorize bool
		validate  bool
		want      uint32
	}{
		{"none", false, false, 0},
		{"authorize", true, false, abi.PhaseAuthorize},
		{"validate", false, true, abi.PhaseValidate},
		{"both", true, true, abi.PhaseAuthorize | abi.PhaseValidate},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.authorize {
				handleAuthorize(t, allowRequest)
			}
			if tt.validate {
				handleValidate(t, allowPlant)
			}
			handleConfigure(t, func([]byte) error { return nil }) // configure is not a phase
			if got := sdktest.Phases(); got != tt.want {
				t.Errorf("Phases() = %#b, want %#b", got, tt.want)
			}
		})
	}
}

// noHandlers is what a plugin with no handler at all says: handlers
// registered in main(), which go test (like the host) never runs.
const noHandlers = "sdk: no handler is registered: register handlers in init(), not in main() (neither a c-shared module nor go test runs main)"

func TestNoHandlerFaults(t *testing.T) {
	wantDecision(t, sdktest.Authorize(sdk.Request{Method: "POST", Path: "/plants"}), "fault: "+noHandlers)
	wantDecision(t, sdktest.Validate(sdk.Plant{ID: 1, Name: "a"}), "fault: "+noHandlers)
	handleValidate(t, allowPlant)
	wantDecision(t, sdktest.Authorize(sdk.Request{Method: "POST", Path: "/plants"}),
		"fault: sdk: authorize called but the plugin registered no authorize handler")
}

func TestPanicFaults(t *testing.T) {
	_, _, panicLine, _ := runtime.Caller(0)
	panicLine += 2 // the handleAuthorize line below
	handleAuthorize(t, func(sdk.Request) sdk.Decision { panic("boom") })
	handleValidate(t, func(p sdk.Plant) sdk.Decision {
		var m map[string]int
		m[p.Name] = 1 // a runtime error, not a panic call
		return sdk.Allow()
	})
	handleConfigure(t, func([]byte) error { panic(errors.New("bad state")) })

	// Each names the handler that panicked and its file:line: the line of
	// the panic, or of the nil map write.
	at := func(fn string, line int) string {
		_, file, _, _ := runtime.Caller(0)
		return fmt.Sprintf(", in github.com/plantgate/plantgate/sdk_test.TestPanicFaults.%s at %s:%d", fn, file, line)
	}
	wantDecision(t, sdktest.Authorize(sdk.Request{}), "fault: sdk: authorize handler panicked: boom"+at("func1", panicLine))
	wantDecision(t, sdktest.Validate(sdk.Plant{Name: "x"}),
		"fault: sdk: validate handler panicked: assignment to entry in nil map"+at("func2", panicLine+3))
	if err := sdktest.TryConfigure(`{}`); err == nil || err.Error() != "sdk: configure handler panicked: bad state"+at("func3", panicLine+6) {
		t.Errorf("TryConfigure = %v, want the panic as a fault", err)
	}
	// The instance keeps working after a panic (the host discards it anyway).
	handleValidate(t, allowPlant)
	wantDecision(t, sdktest.Validate(sdk.Plant{}), "allow")
}

func TestBadDecisionsFault(t *testing.T) {
	tests := []struct {
		name string
		d    sdk.Decision
		want string
	}{
		{"invalid deny code", sdk.Deny(40001, "impersonates the host"),
			"fault: sdk: deny code 40001 is outside the plugin ranges 40050–40099, 40150–40199, 40350–40399, 42950–42999, 50350–50399"},
		{"status 500", sdk.Deny(50050, "x"),
			"fault: sdk: deny code 50050 is outside the plugin ranges 40050–40099, 40150–40199, 40350–40399, 42950–42999, 50350–50399"},
		{"401 from validate", sdk.Unauthorized("token not valid here"), "fault: sdk: validate may not deny with 40150; it may use 40050–40099, 40350–40399, 42950–42999, 50350–50399"},
		{"zero decision", sdk.Decision{}, "fault: sdk: handler returned the zero Decision"},
		{"explicit fault", sdk.Fault("lost my config"), "fault: lost my config"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			handleValidate(t, func(sdk.Plant) sdk.Decision { return tt.d })
			wantDecision(t, sdktest.Validate(sdk.Plant{ID: 1}), tt.want)
		})
	}
}

// TestAuthorizeDenyInPhase: authorize may deny 401, 403, 429 and 503, not
// 400 (abi.PhaseDenies).
func TestAuthorizeDenyInPhase(t *testing.T) {
	for _, tt := range []struct {
		d    sdk.Decision
		want string
	}{
		{sdk.BadRequest("no"), "fault: sdk: authorize may not deny with 40050; it may use 40150–40199, 40350–40399, 42950–42999, 50350–50399"},
		{sdk.Unauthorized("no"), "deny 40150: no"},
		{sdk.Deny(42950, "slow down"), "deny 42950: slow down"},
	} {
		sdk.HandleAuthorize(func(sdk.Request) sdk.Decision { return tt.d })
		t.Cleanup(func() { sdk.HandleAuthorize(nil) })
		wantDecision(t, sdktest.Authorize(sdk.Request{Path: "/plants"}), tt.want)
	}
}

func TestRequestRoundTrip(t *testing.T) {
	var gotRequest sdk.Request
	var gotDigest [32]byte
	var gotPlant sdk.Plant
	handleAuthorize(t, func(r sdk.Request) sdk.Decision {
		gotRequest = sdk.Request{Method: strings.Clone(r.Method), Path: strings.Clone(r.Path), Credential: strings.Clone(r.Credential)}
		gotDigest = r.CredentialDigest()
		return sdk.AllowAs("tok-" + r.Method)
	})
	handleValidate(t, func(p sdk.Plant) sdk.Decision {
		gotPlant = p
		gotPlant.Name, gotPlant.Tag, gotPlant.Principal = strings.Clone(p.Name), strings.Clone(p.Tag), strings.Clone(p.Principal)
		return sdk.Deny(40099, "echo "+p.Name)
	})

	req := sdk.Request{Method: "POST", Path: "/plants", Credential: "s3cret"}
	wantDecision(t, sdktest.Authorize(req), "allow as tok-POST")
	if gotRequest.Method != req.Method || gotRequest.Path != req.Path || gotRequest.Credential != req.Credential {
		t.Errorf("handler saw %+v, want %+v", gotRequest, req)
	}
	if gotDigest != sdktest.Digest("s3cret") || req.CredentialDigest() != sdktest.Digest("s3cret") {
		t.Errorf("CredentialDigest from the host %x, computed %x; want %x", gotDigest, req.CredentialDigest(), sdktest.Digest("s3cret"))
	}

	for _, p := range []sdk.Plant{
		{ID: -9223372036854775808, Name: "Fícus ✿", Tag: "", HasTag: true, AllowedAs: "ci", Principal: "ci"},
		{ID: 42, Name: "", Tag: "", HasTag: false},
		{ID: 7, Name: strings.Repeat("n", 100_000), Tag: "t", HasTag: true}, // grows the request buffer
	} {
		d := sdktest.Validate(p)
		if gotPlant != p {
			t.Errorf("handler saw %+.40v, want %+.40v", gotPlant, p)
		}
		if d.Code() != 40099 || d.Message() != cutText("echo "+p.Name) {
			t.Errorf("decision = %.60v", d)
		}
	}
}

// cutText is what the SDK does to text over abi.MaxText.
func cutText(s string) string {
	if len(s) > abi.MaxText {
		return s[:abi.MaxText]
	}
	return s
}

func TestLongTextCutAtCharacter(t *testing.T) {
	msg := strings.Repeat("é", abi.MaxText) // 2 bytes each
	handleValidate(t, func(sdk.Plant) sdk.Decision { return sdk.Deny(40050, "x"+msg) })
	d := sdktest.Validate(sdk.Plant{})
	if want := "x" + msg[:abi.MaxText-2]; d.Message() != want {
		t.Errorf("message is %d bytes ending %q, want %d bytes", len(d.Message()), d.Message()[len(d.Message())-3:], len(want))
	}
}

func TestInvalidUTF8Replaced(t *testing.T) {
	handleValidate(t, func(sdk.Plant) sdk.Decision { return sdk.Deny(40050, "bad \xff byte") })
	wantDecision(t, sdktest.Validate(sdk.Plant{}), "deny 40050: bad \uFFFD byte")
	handleAuthorize(t, func(sdk.Request) sdk.Decision { panic("raw \xc3") })
	if d := sdktest.Authorize(sdk.Request{}); !strings.HasPrefix(d.String(), "fault: sdk: authorize handler panicked: raw \uFFFD, in ") {
		t.Errorf("got %v, want the panic text with U+FFFD for the bad byte", d)
	}
}

func TestConfigure(t *testing.T) {
	var got []byte
	handleConfigure(t, func(config []byte) error {
		got = config
		if strings.Contains(string(config), "bad") {
			return errors.New("rules config: key \"bad\" is unknown")
		}
		return nil
	})
	sdktest.Configure(t, `{"name_max": 5}`)
	if string(got) != `{"name_max": 5}` {
		t.Errorf("handler got %q", got)
	}
	// The handler owns its copy: later requests do not overwrite it.
	handleValidate(t, allowPlant)
	sdktest.Validate(sdk.Plant{Name: "zzzzzzzzzzzzzzzzzzzzzzzzzzzzzz"})
	if string(got) != `{"name_max": 5}` {
		t.Errorf("config changed under the handler: %q", got)
	}
	if err := sdktest.TryConfigure(`{"bad": 1}`); err == nil || err.Error() != `rules config: key "bad" is unknown` {
		t.Errorf("TryConfigure = %v, want the handler's error", err)
	}
}

func TestConfigureWithoutHandler(t *testing.T) {
	for _, config := range []string{"", "null", " {} ", "\n"} {
		if err := sdktest.TryConfigure(config); err != nil {
			t.Errorf("TryConfigure(%q) = %v, want nil", config, err)
		}
	}
	// No handler at all: the handlers were registered in main().
	if err := sdktest.TryConfigure(`{"scopes": {}}`); err == nil || err.Error() != noHandlers {
		t.Errorf("TryConfigure = %v, want %s", err, noHandlers)
	}
	handleValidate(t, allowPlant)
	const want = `the plugin takes no config, got "{\"scopes\": {}}": remove "config" from its sidecar, or handle it with sdk.HandleConfigure`
	if err := sdktest.TryConfigure(`{"scopes": {}}`); err == nil || err.Error() != want {
		t.Errorf("TryConfigure = %v, want %s", err, want)
	}
}

func TestLookupToken(t *testing.T) {
	created := time.UnixMilli(1_700_000_000_000).UTC()
	expires := created.Add(time.Hour)
	long := strings.Repeat("scope:x ", 200) + "plants:write" // bigger than the SDK's first record buffer
	sdktest.SetTokens(t,
		sdk.Token{Digest: sdktest.Digest("a"), Name: "alpha", Scopes: "plants:read plants:write", Created: created, Expires: expires},
		sdk.Token{Digest: sdktest.Digest("r"), Name: "revoked", Revoked: true},
		sdk.Token{Digest: sdktest.Digest("l"), Name: "long", Scopes: long},
	)
	var got sdk.Token
	var gotErr error
	handleAuthorize(t, func(r sdk.Request) sdk.Decision {
		got, gotErr = sdk.LookupToken(sdktest.Digest(r.Credential))
		got.Name, got.Scopes = strings.Clone(got.Name), strings.Clone(got.Scopes)
		return sdk.Allow()
	})
	tests := []struct {
		credential string
		want       sdk.Token
		err        error
	}{
		{"a", sdk.Token{Digest: sdktest.Digest("a"), Name: "alpha", Scopes: "plants:read plants:write", Created: created, Expires: expires}, nil},
		{"r", sdk.Token{Digest: sdktest.Digest("r"), Name: "revoked", Revoked: true}, nil},
		{"l", sdk.Token{Digest: sdktest.Digest("l"), Name: "long", Scopes: long}, nil},
		{"a", sdk.Token{Digest: sdktest.Digest("a"), Name: "alpha", Scopes: "plants:read plants:write", Created: created, Expires: expires}, nil},
		{"nope", sdk.Token{}, sdk.ErrTokenNotFound},
	}
	for _, tt := range tests {
		sdktest.Authorize(sdk.Request{Credential: tt.credential})
		if got != tt.want || gotErr != tt.err {
			t.Errorf("LookupToken(%q) = %+.80v, %v; want %+.80v, %v", tt.credential, got, gotErr, tt.want, tt.err)
		}
	}
	if !got.Expires.IsZero() || got.Expired(time.Now()) {
		t.Error("a token without expiry is expired")
	}

	sdktest.SetTokenLookup(t, func([32]byte) (sdk.Token, error) { return sdk.Token{}, errors.New("redis: timeout") })
	sdktest.Authorize(sdk.Request{Credential: "a"})
	if gotErr != sdk.ErrUnavailable {
		t.Errorf("LookupToken with the store down: %v, want ErrUnavailable", gotErr)
	}
}

func TestTokenExpired(t *testing.T) {
	exp := time.UnixMilli(1_700_000_000_000)
	tok := sdk.Token{Expires: exp}
	for _, tt := range []struct {
		now  time.Time
		want bool
	}{
		{exp.Add(-time.Millisecond), false},
		{exp, true},
		{exp.Add(time.Millisecond), true},
	} {
		if got := tok.Expired(tt.now); got != tt.want {
			t.Errorf("Expired(%v) = %v, want %v", tt.now, got, tt.want)
		}
	}
	if (sdk.Token{}).Expired(time.Now()) {
		t.Error("zero Expires means never, got expired")
	}
}

func TestLog(t *testing.T) {
	var lines []string
	sdktest.SetLog(t, func(level sdk.Level, msg string) { lines = append(lines, fmt.Sprint(int32(level), " ", msg)) })
	handleValidate(t, func(p sdk.Plant) sdk.Decision {
		sdk.Log(sdk.LevelWarn, "saw "+p.Name)
		sdk.Logf(sdk.LevelDebug, "id %d", p.ID)
		return sdk.Allow()
	})
	sdktest.Validate(sdk.Plant{ID: 3, Name: "fern"})
	if want := []string{"4 saw fern", "-4 id 3"}; strings.Join(lines, "|") != strings.Join(want, "|") {
		t.Errorf("log lines %q, want %q", lines, want)
	}
}

// TestAllowedAs: the authorize chain's allow text reaches validate as
// Plant.AllowedAs, and under the deprecated name Principal too.
func TestAllowedAs(t *testing.T) {
	handleValidate(t, func(p sdk.Plant) sdk.Decision {
		return sdk.Deny(40351, p.AllowedAs+"|"+p.Principal+"|"+p.Caller.Name)
	})
	wantDecision(t, sdktest.Validate(sdk.Plant{ID: 1, Name: "a", AllowedAs: "ci", Caller: sdk.Principal{Name: "tok"}}), "deny 40351: ci|ci|tok")
	wantDecision(t, sdktest.Validate(sdk.Plant{ID: 1, Name: "a", Principal: "old"}), "deny 40351: old|old|")
}
