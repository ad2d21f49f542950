package wasm

import (
	"context"
	"net/netip"
	"testing"

	"github.com/plantgate/plantgate/host"
)

// mapHeader is a host.RequestHeader over a map of canonical names.
type mapHeader map[string]string

func (h mapHeader) Peek(key string) []byte {
	if v, ok := h[key]; ok {
		return []byte(v)
	}
	return nil
}

// TestABI2Context: the context fixture echoes every version-2 field of
// both messages, so each is checked as the host sends it: request id,
// client, the sidecar's headers, the caller (a token lookup's principal)
// and, in validate, the allow text of the authorize chain beside it.
func TestABI2Context(t *testing.T) {
	t.Parallel()
	opts, _ := testOptions()
	p := load(t, "context", nil, Limits{}, opts.WithRequestHeaders([]string{"X-Tenant"}))
	x := &host.Exchange{RequestID: "r1", Client: netip.MustParseAddr("::ffff:192.0.2.7"),
		Header: mapHeader{"X-Tenant": "blue", "X-Other": "never sent"}}
	x.SetPrincipal(host.Token{Name: "ci", Scopes: []string{"plants:read", "plants:write"}})
	ctx := host.WithExchange(context.Background(), x)
	r := host.AuthorizeRequest{Method: "GET", Path: "/plants/7", Credential: "tok", Route: "GET /plants/{id}", PathID: 7, HasPathID: true}
	_, err := p.Authorize(ctx, r)
	wantError(t, err, &host.Error{Code: 40350, Message: "192.0.2.7|blue|ci|plants:read plants:write|r1"})

	// No exchange (a caller outside HTTP): every context field empty, and
	// no header block.
	_, err = p.Authorize(context.Background(), r)
	wantError(t, err, &host.Error{Code: 40350, Message: "|-|||"})

	err = p.Validate(ctx, host.Plant{ID: 7, Name: "Monstera", Tag: "tropical", HasTag: true}, "allowed-as")
	wantError(t, err, &host.Error{Code: 40350, Message: "allowed-as|ci|plants:read plants:write"})
}

// TestABI2KV: each KV import's answers as the kvstore fixture sees them,
// on a Redis store (miniredis): set, get, the counter, delete, not found,
// the call budget, a bad argument, a value longer than the buffer; and
// with no store, unavailable.
func TestABI2KV(t *testing.T) {
	t.Parallel()
	opts, _ := testOptions()
	opts.KV = miniStore(t)
	p := load(t, "kvstore", nil, Limits{}, opts)
	ctx := context.Background()
	plant := func(id int64) host.Plant { return host.Plant{ID: id, Name: "fern", Tag: "shade", HasTag: true} }
	for _, step := range []struct {
		id   int64
		want string
	}{
		{2, "get=-1:"},     // not found yet
		{1, "set=0"},       // stored
		{2, "get=5:shade"}, // its length, and the value
		{7, "short=5"},     // 1 byte of room: the length, nothing written
		{4, "incr=5"},      // a counter of its own, apart from the value
		{4, "incr=10"},     // same window
		{5, "budget=-4"},   // the ninth KV call of one phase call
		{6, "empty=-3"},    // a key of 0 bytes
		{3, "delete=1"},    // it had a value
		{3, "delete=0"},    // not any more
		{2, "get=-1:"},     // gone
	} {
		err := p.Validate(ctx, plant(step.id), "")
		wantError(t, err, &host.Error{Code: 40350, Message: step.want})
	}

	opts.KV = nil
	p = load(t, "kvstore", nil, Limits{}, opts)
	wantError(t, p.Validate(ctx, plant(1), ""), &host.Error{Code: 40350, Message: "set=-2"})
}
