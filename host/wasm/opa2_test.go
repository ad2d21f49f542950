package wasm

import (
	"context"
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/plantgate/plantgate/host"
)

// TestOPAInput: the input a policy sees, exactly, in both phases: never
// the credential nor its digest.
func TestOPAInput(t *testing.T) {
	t.Parallel()
	p := load(t, needRego(t, "echo"), nil, Limits{}, Options{headers: []string{"X-Decision", "X-Tenant", "X-Absent"}})
	h := mapHeader{"X-Decision": "input", "X-Tenant": "blue \"b\"", "X-Other": "not listed"}
	r := host.AuthorizeRequest{Method: "DELETE", Path: "/plants/7", Route: "DELETE /plants/{id}", PathID: 7, HasPathID: true, Credential: "secret-token"}
	_, err := p.Authorize(opaExchange(h, "ci", "plants:read", "plants:delete"), r)
	wantJSONDeny(t, err, 40399, `{"caller":{"name":"ci","scopes":["plants:read","plants:delete"]},"client":"192.0.2.7","headers":{"X-Decision":"input","X-Tenant":"blue \"b\""},"id":7,"method":"DELETE","path":"/plants/7","request_id":"r1","route":"DELETE /plants/{id}"}`)
	if strings.Contains(err.(*host.Error).Message, "secret") {
		t.Fatal("the credential reached the policy")
	}
	// No principal yet, no id, no exchange.
	_, err = p.Authorize(opaExchange(mapHeader{"X-Decision": "input"}, ""), getPlants)
	wantJSONDeny(t, err, 40399, `{"client":"192.0.2.7","headers":{"X-Decision":"input"},"method":"GET","path":"/plants","request_id":"r1","route":"GET /plants"}`)

	err = p.Validate(opaExchange(nil, "ci", "plants:write"), host.Plant{ID: 7, Name: "input", Tag: "", HasTag: true}, "ci")
	wantJSONDeny(t, err, 40399, `{"allowed_as":"ci","caller":{"name":"ci","scopes":["plants:write"]},"plant":{"id":7,"name":"input","tag":""}}`)
	err = p.Validate(context.Background(), host.Plant{ID: -3, Name: "input"}, "")
	wantJSONDeny(t, err, 40399, `{"allowed_as":"","plant":{"id":-3,"name":"input"}}`)
}

// wantJSONDeny checks that err denies with code and a message that is
// the JSON want (OPA's json.marshal keeps no key order).
func wantJSONDeny(t *testing.T, err error, code int32, want string) {
	t.Helper()
	e, ok := err.(*host.Error)
	if !ok || e.Code != code {
		t.Fatalf("err = %#v, want a deny with %d", err, code)
	}
	var got, w any
	if err := json.Unmarshal([]byte(e.Message), &got); err != nil {
		t.Fatalf("message %q: %v", e.Message, err)
	}
	if err := json.Unmarshal([]byte(want), &w); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, w) {
		t.Fatalf("input\n%s\nwant\n%s", e.Message, want)
	}
}

// TestOPAAbort: opa_abort is a fault: 500 50001, the reason in the log,
// the instance recycled; the next call gets a fresh one.
func TestOPAAbort(t *testing.T) {
	t.Parallel()
	opts, rec := testOptions()
	p := load(t, needRego(t, "abort"), nil, Limits{}, opts)
	_, err := p.Authorize(context.Background(), getPlants)
	wantError(t, err, &host.Error{Code: host.ErrPluginFault, Message: msgFault})
	if got := rec.find(t, "policy plugin failed; request denied").Attrs["reason"]; got != "opa_eval aborted: ../../testdata/rego/abort/policy.rego:8:1: var assignment conflict" {
		t.Errorf("reason %q", got)
	}
	if s := p.Stats(); s.Discarded != 1 {
		t.Errorf("discarded %d, want 1", s.Discarded)
	}
	// POST: only one rule is defined, so it evaluates to 2, a bad decision.
	_, err = p.Authorize(context.Background(), postPlants)
	wantError(t, err, &host.Error{Code: host.ErrPluginBadDecision, Message: msgBadDecision})
}

// TestOPARefusedBuiltin: a policy that calls http.send does not load, and
// the error names the builtin.
func TestOPARefusedBuiltin(t *testing.T) {
	t.Parallel()
	name := needRego(t, "refused")
	_, err := LoadPlugin(context.Background(), fixture(name), nil, Options{CacheDir: cacheDir})
	want := "plugin rego-refused.wasm: is an OPA policy that calls builtins Plantgate refuses: http.send (it reaches out over the network)"
	if err == nil || err.Error() != want {
		t.Fatalf("err = %v\nwant %s", err, want)
	}
}

// TestOPAOnePhase: a policy with one entrypoint serves that phase only;
// a deny without a code takes the phase's first code.
func TestOPAOnePhase(t *testing.T) {
	t.Parallel()
	p := load(t, needRego(t, "authonly"), nil, Limits{}, Options{})
	if got := strings.Join(p.Info().Phases, ","); got != "authorize" {
		t.Fatalf("phases = %s", got)
	}
	wantError(t, p.Validate(context.Background(), host.Plant{ID: 1, Name: "x"}, ""), nil)
	_, err := p.Authorize(context.Background(), host.AuthorizeRequest{Method: "DELETE", Path: "/plants/1", Route: "DELETE /plants/{id}", PathID: 1, HasPathID: true})
	wantError(t, err, &host.Error{Code: 40150})
	if s := p.Stats(); s.Calls != 1 {
		t.Errorf("calls %d, want 1 (validate is not served)", s.Calls)
	}
}

// TestOPAHeapReset: every evaluation starts from the same heap, so an
// instance's memory does not grow over thousands of calls.
func TestOPAHeapReset(t *testing.T) {
	t.Parallel()
	p := load(t, needRego(t, "rules"), []byte(`{"banned_tags": ["weed"]}`), Limits{}, Options{})
	ctx := opaExchange(nil, "")
	if _, err := p.Authorize(ctx, postPlants); host.Code(err) != 40351 {
		t.Fatal(err)
	}
	first := p.Memory()
	for range 3000 {
		if _, err := p.Authorize(ctx, postPlants); host.Code(err) != 40351 {
			t.Fatal(err)
		}
		if err := p.Validate(ctx, host.Plant{ID: 1, Name: "x", Tag: "weed", HasTag: true}, ""); host.Code(err) != 40050 {
			t.Fatal(err)
		}
	}
	if got := p.Memory(); got != first {
		t.Fatalf("memory %d after 6000 calls, %d after one", got, first)
	}
	if s := p.Stats(); s.Created != 1 {
		t.Fatalf("created %d instances, want 1", s.Created)
	}
}

// TestOPAConfigMustBeObject: the config is the policy's data, an object.
func TestOPAConfigMustBeObject(t *testing.T) {
	t.Parallel()
	name := needRego(t, "rules")
	_, err := LoadPlugin(context.Background(), fixture(name), []byte(`[1]`), Options{CacheDir: cacheDir})
	want := `plugin rego-rules.wasm: config (the policy's data) must be a JSON object, got [1]`
	if err == nil || err.Error() != want {
		t.Fatalf("err = %v\nwant %s", err, want)
	}
}
