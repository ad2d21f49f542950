package host_test

import (
	"context"
	"testing"

	"github.com/plantgate/plantgate/host"
)

// TestNewExchange: the Exchange travels in its context, the parent's
// values stay reachable, and the first principal set stays.
func TestNewExchange(t *testing.T) {
	type key struct{}
	ctx, x := host.NewExchange(context.WithValue(context.Background(), key{}, "v"))
	if host.ExchangeFrom(ctx) != x || ctx.Value(key{}) != "v" || host.ExchangeFrom(context.Background()) != nil {
		t.Fatal("NewExchange does not carry its Exchange and the parent's values")
	}
	x.SetPrincipal(host.Token{Name: "ci", Scopes: []string{"plants:read"}})
	x.SetPrincipal(host.Token{Name: "other"})
	if p := x.Principal(); p.Name != "ci" || len(p.Scopes) != 1 {
		t.Fatalf("Principal = %+v, want the first one set", p)
	}
	x.AddResponseHeader("Retry-After", "1")
	x.AddResponseHeader("Retry-After", "2")
	if h := x.ResponseHeaders(); len(h) != 1 || h[0] != (host.ResponseHeader{"Retry-After", "2"}) {
		t.Fatalf("ResponseHeaders = %v, want the last value of the name", h)
	}
}
