package sdk_test

import (
	"strconv"
	"testing"

	"github.com/plantgate/plantgate/sdk"
)

func TestDecision(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		d         sdk.Decision
		allowed   bool
		denied    bool
		faulted   bool
		code      int32
		message   string
		principal string
		str       string
	}{
		{name: "allow", d: sdk.Allow(), allowed: true, str: "allow"},
		{name: "allow as", d: sdk.AllowAs("ci"), allowed: true, principal: "ci", str: "allow as ci"},
		{name: "allow as empty", d: sdk.AllowAs(""), allowed: true, str: "allow"},
		{name: "deny", d: sdk.Deny(40151, "invalid token"), denied: true, code: 40151, message: "invalid token", str: "deny 40151: invalid token"},
		{name: "deny 429", d: sdk.Deny(42999, "slow down"), denied: true, code: 42999, message: "slow down", str: "deny 42999: slow down"},
		{name: "bad request", d: sdk.BadRequest("m"), denied: true, code: 40050, message: "m", str: "deny 40050: m"},
		{name: "unauthorized", d: sdk.Unauthorized("m"), denied: true, code: 40150, message: "m", str: "deny 40150: m"},
		{name: "forbidden", d: sdk.Forbidden("m"), denied: true, code: 40350, message: "m", str: "deny 40350: m"},
		{name: "unavailable", d: sdk.Unavailable("m"), denied: true, code: 50350, message: "m", str: "deny 50350: m"},
		{name: "fault", d: sdk.Fault("broken"), faulted: true, message: "broken", str: "fault: broken"},
		{name: "zero", d: sdk.Decision{}, faulted: true, message: "sdk: handler returned the zero Decision", str: "fault: sdk: handler returned the zero Decision"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			d := tt.d
			if d.Allowed() != tt.allowed || d.Denied() != tt.denied || d.Faulted() != tt.faulted {
				t.Errorf("Allowed, Denied, Faulted = %v, %v, %v; want %v, %v, %v",
					d.Allowed(), d.Denied(), d.Faulted(), tt.allowed, tt.denied, tt.faulted)
			}
			if d.Code() != tt.code || d.Message() != tt.message || d.AllowedAs() != tt.principal {
				t.Errorf("Code, Message, Principal = %d, %q, %q; want %d, %q, %q",
					d.Code(), d.Message(), d.AllowedAs(), tt.code, tt.message, tt.principal)
			}
			if d.String() != tt.str {
				t.Errorf("String() = %q, want %q", d.String(), tt.str)
			}
		})
	}
}

// An invalid deny code must never read as an allow, nor reach the host as a
// deny it would refuse: it becomes a fault naming the code.
func TestDenyInvalidCode(t *testing.T) {
	t.Parallel()
	for _, code := range []int32{0, -40150, 400, 40000, 40049, 40101, 40250, 40450, 50001, 50050, 40100 + 150, 4015000} {
		d := sdk.Deny(code, "nope")
		if !d.Faulted() || d.Code() != 0 {
			t.Errorf("Deny(%d) = %v, want a fault", code, d)
			continue
		}
		want := "sdk: deny code " + strconv.Itoa(int(code)) + " is outside the plugin ranges 40050–40099, 40150–40199, 40350–40399, 42950–42999, 50350–50399"
		if d.Message() != want {
			t.Errorf("Deny(%d).Message() = %q, want %q", code, d.Message(), want)
		}
	}
}

func TestTokenHasScope(t *testing.T) {
	tests := []struct {
		scopes, scope string
		want          bool
	}{
		{"plants:write", "plants:write", true},
		{"plants:read plants:write", "plants:write", true},
		{"plants:read plants:write", "plants:read", true},
		{"plants:read  plants:write ", "plants:write", true},
		{"plants:read", "plants:write", false},
		{"plants:writer", "plants:write", false},
		{"plants:write", "plants", false},
		{"", "plants:write", false},
		{"plants:write", "", false},
		{" ", "", false},
	}
	for _, tt := range tests {
		tok := sdk.Token{Scopes: tt.scopes}
		if got := tok.HasScope(tt.scope); got != tt.want {
			t.Errorf("Token{Scopes: %q}.HasScope(%q) = %v, want %v", tt.scopes, tt.scope, got, tt.want)
		}
	}
	tok := sdk.Token{Scopes: "plants:read plants:write"}
	if n := testing.AllocsPerRun(100, func() { tok.HasScope("plants:write") }); n != 0 {
		t.Errorf("HasScope allocates %v times, want 0", n)
	}
}
