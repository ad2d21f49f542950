package wasm

import (
	"context"
	"testing"

	"github.com/plantgate/plantgate/host"
)

func TestChain(t *testing.T) {
	t.Parallel()
	tokens := &fakeTokens{tokens: map[[32]byte]host.Token{digestOf(cred32): {Name: "alice"}}}
	plant := host.Plant{ID: 7, Name: "Ivy"}
	tests := []struct {
		name          string
		fixtures      []string
		wantAuthorize *host.Error
		wantPrincipal string
		wantValidate  *host.Error
		authorizes    bool
	}{
		{name: "empty", authorizes: false},
		{name: "all allow", fixtures: []string{"allow", "allow"}, authorizes: true},
		{name: "first deny wins", fixtures: []string{"allow", "deny", "echo"}, authorizes: true,
			wantAuthorize: &host.Error{Code: 40355, Message: "denied by fixture"},
			wantValidate:  &host.Error{Code: 40355, Message: "denied by fixture"}},
		{name: "a fault ends the chain", fixtures: []string{"garbage", "deny"}, authorizes: true,
			wantAuthorize: &host.Error{Code: 40355, Message: "denied by fixture"}, // garbage allows "/plants"
			wantValidate:  errBadDecision},
		{name: "first principal wins", fixtures: []string{"allow", "principal", "tokenlookup"}, authorizes: true,
			wantPrincipal: "fixture-user"},
		{name: "later principal when the first names none", fixtures: []string{"allow", "tokenlookup", "principal"}, authorizes: true,
			wantPrincipal: "alice"},
		{name: "validate sees the principal", fixtures: []string{"tokenlookup", "echo"}, authorizes: true,
			wantPrincipal: "alice", // kept with the deny, for the log
			wantAuthorize: &host.Error{Code: 40350, Message: "POST /plants " + cred32},
			wantValidate:  &host.Error{Code: 40050, Message: "7 0 Ivy  alice"}},
		{name: "authorize-only plugin skips validate", fixtures: []string{"tokenlookup"}, authorizes: true,
			wantPrincipal: "alice"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var plugins []*Plugin
			for _, f := range tt.fixtures {
				plugins = append(plugins, load(t, f, nil, Limits{}, Options{Tokens: tokens}))
			}
			c := NewChain(plugins...)
			if c.Authorizes() != tt.authorizes {
				t.Fatalf("Authorizes() = %v, want %v", c.Authorizes(), tt.authorizes)
			}
			ctx := context.Background()
			principal, err := c.Authorize(ctx, host.AuthorizeRequest{Method: "POST", Path: "/plants", Credential: cred32})
			wantError(t, err, tt.wantAuthorize)
			if principal != tt.wantPrincipal {
				t.Fatalf("principal = %q, want %q", principal, tt.wantPrincipal)
			}
			if err == nil {
				wantError(t, c.Validate(ctx, plant, principal), tt.wantValidate)
			} else {
				// The principal a real request would carry on is the chain's.
				wantError(t, c.Validate(ctx, plant, "alice"), tt.wantValidate)
			}
		})
	}
}

func TestEmpty(t *testing.T) {
	t.Parallel()
	c := Empty()
	principal, err := c.Authorize(context.Background(), host.AuthorizeRequest{})
	if c.Authorizes() || principal != "" || err != nil || c.Validate(context.Background(), host.Plant{}, "") != nil {
		t.Fatal("Empty() must allow everything and not authorize")
	}
	if err := c.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
}
