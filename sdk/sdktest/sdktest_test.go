package sdktest_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/plantgate/plantgate/sdk"
	"github.com/plantgate/plantgate/sdk/sdktest"
)

func authorizeWithTokens(r sdk.Request) sdk.Decision {
	tok, err := sdk.LookupToken(sdktest.Digest(r.Credential))
	switch {
	case errors.Is(err, sdk.ErrUnavailable):
		return sdk.Unavailable("token store unavailable")
	case err != nil:
		return sdk.Unauthorized("invalid token")
	case tok.Revoked:
		return sdk.Deny(sdk.CodeUnauthorized+1, "token revoked")
	case !tok.HasScope("plants:write"):
		return sdk.Forbidden("token lacks scope plants:write")
	}
	return sdk.AllowAs(tok.Name)
}

func TestSetTokens(t *testing.T) {
	sdk.HandleAuthorize(authorizeWithTokens)
	t.Cleanup(func() { sdk.HandleAuthorize(nil) })

	t.Run("store", func(t *testing.T) {
		sdktest.SetTokens(t,
			sdk.Token{Digest: sdktest.Digest("s3cret"), Name: "ci", Scopes: "plants:read plants:write"},
			sdk.Token{Digest: sdktest.Digest("r3ad"), Name: "dashboard", Scopes: "plants:read"},
			sdk.Token{Digest: sdktest.Digest("old"), Name: "old", Scopes: "plants:write", Revoked: true},
		)
		for _, tt := range []struct{ credential, want string }{
			{"s3cret", "allow as ci"},
			{"r3ad", "deny 40350: token lacks scope plants:write"},
			{"old", "deny 40151: token revoked"},
			{"guess", "deny 40150: invalid token"},
		} {
			if got := sdktest.Authorize(sdk.Request{Credential: tt.credential}).String(); got != tt.want {
				t.Errorf("credential %q: %s, want %s", tt.credential, got, tt.want)
			}
		}
	})
	// The store ends with the test that set it.
	if got := sdktest.Authorize(sdk.Request{Credential: "s3cret"}).String(); got != "deny 40150: invalid token" {
		t.Errorf("after the subtest: %s, want the default empty store", got)
	}

	sdktest.SetTokenLookup(t, func([32]byte) (sdk.Token, error) { return sdk.Token{}, sdk.ErrUnavailable })
	if got := sdktest.Authorize(sdk.Request{Credential: "s3cret"}).String(); got != "deny 50350: token store unavailable" {
		t.Errorf("store down: %s", got)
	}
}

func TestDecisionsOwnTheirText(t *testing.T) {
	sdk.HandleValidate(func(p sdk.Plant) sdk.Decision { return sdk.Deny(40050, p.Name) })
	t.Cleanup(func() { sdk.HandleValidate(nil) })
	first := sdktest.Validate(sdk.Plant{Name: "first"})
	sdktest.Validate(sdk.Plant{Name: "second"})
	if first.Message() != "first" {
		t.Errorf("first decision's message became %q", first.Message())
	}
}

func TestConcurrentCalls(t *testing.T) {
	sdk.HandleValidate(func(p sdk.Plant) sdk.Decision {
		if strings.HasPrefix(p.Name, "bad") {
			return sdk.Deny(40050, "bad name "+p.Name)
		}
		return sdk.AllowAs(p.Principal)
	})
	t.Cleanup(func() { sdk.HandleValidate(nil) })
	for _, name := range []string{"a", "b", "bad1", "bad2"} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			for range 200 {
				d := sdktest.Validate(sdk.Plant{Name: name, Principal: name})
				if strings.HasPrefix(name, "bad") && d.Message() != "bad name "+name || !strings.HasPrefix(name, "bad") && d.AllowedAs() != name {
					t.Fatalf("%s: got %v", name, d)
				}
			}
		})
	}
}

func TestSetLog(t *testing.T) {
	sdk.HandleValidate(func(p sdk.Plant) sdk.Decision {
		sdk.Log(sdk.LevelInfo, p.Name) // p.Name aliases the SDK's buffer
		return sdk.Allow()
	})
	t.Cleanup(func() { sdk.HandleValidate(nil) })
	var got []string
	sdktest.SetLog(t, func(_ sdk.Level, msg string) { got = append(got, msg) })
	sdktest.Validate(sdk.Plant{Name: "one"})
	sdktest.Validate(sdk.Plant{Name: "two"})
	if strings.Join(got, ",") != "one,two" {
		t.Errorf("logged %q", got)
	}
}

func TestTokenTimesRoundTrip(t *testing.T) {
	created := time.Date(2025, 1, 2, 3, 4, 5, 6_000_000, time.UTC)
	sdktest.SetTokens(t, sdk.Token{Digest: sdktest.Digest("x"), Name: "x", Created: created})
	var got sdk.Token
	sdk.HandleAuthorize(func(r sdk.Request) sdk.Decision {
		got, _ = sdk.LookupToken(sdktest.Digest(r.Credential))
		return sdk.Allow()
	})
	t.Cleanup(func() { sdk.HandleAuthorize(nil) })
	sdktest.Authorize(sdk.Request{Credential: "x"})
	if !got.Created.Equal(created) || !got.Expires.IsZero() {
		t.Errorf("Created, Expires = %v, %v; want %v, zero", got.Created, got.Expires, created)
	}
}
