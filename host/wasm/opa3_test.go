package wasm

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/plantgate/plantgate/host"
)

// TestOPALimits: the plugin's time and memory limits hold for a policy,
// with the loop guard as for any module: past either, the call fails
// closed and its instance is replaced.
func TestOPALimits(t *testing.T) {
	t.Parallel()
	req := func(id int64) host.AuthorizeRequest {
		return host.AuthorizeRequest{Method: "GET", Path: "/plants/x", Route: "GET /plants/{id}", PathID: id, HasPathID: true}
	}
	for _, c := range []struct {
		name   string
		limits Limits
		id     int64
		reason string
	}{
		{"timeout", Limits{Timeout: 50 * time.Millisecond, MemoryMiB: 1024}, 50_000_000, "opa_eval ran past its deadline"},
		{"memory", Limits{Timeout: 5 * time.Second, MemoryMiB: 8}, 5_000_000, "opa_eval aborted: opa_malloc: failed"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			opts, rec := testOptions()
			p := load(t, needRego(t, "spin"), nil, c.limits, opts)
			if !p.guarded {
				t.Error("not run with the loop guard")
			}
			if _, err := p.Authorize(context.Background(), req(10)); err != nil {
				t.Fatal(err)
			}
			_, err := p.Authorize(context.Background(), req(c.id))
			wantError(t, err, &host.Error{Code: host.ErrPluginFault, Message: msgFault})
			if got := rec.find(t, "policy plugin failed; request denied").Attrs["reason"]; got != c.reason {
				t.Errorf("reason %q, want %q", got, c.reason)
			}
			if s := p.Stats(); s.Discarded != 1 {
				t.Errorf("discarded %d, want 1", s.Discarded)
			}
			if _, err := p.Authorize(context.Background(), req(10)); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestOPAOldABI: a policy of OPA's Wasm ABI 1.0 or 1.1 (eval, no opa_eval)
// is refused with a message that says how to fix it.
func TestOPAOldABI(t *testing.T) {
	t.Parallel()
	// Types: 0 () -> i32, 1 (i32) -> i32; functions eval, entrypoints and
	// builtins, each returning 0.
	var types, funcs, exports, code []byte
	types = append(leb(types, 2), 0x60, 0, 1, 0x7f, 0x60, 1, 0x7f, 1, 0x7f)
	funcs = append(leb(funcs, 3), 1, 0, 0)
	exports = leb(exports, 3)
	code = leb(code, 3)
	for i, name := range []string{"eval", "entrypoints", "builtins"} {
		exports = append(appendName(exports, name), 0x00, byte(i))
		code = append(code, 4, 0, 0x41, 0, 0x0b) // no locals; i32.const 0; end
	}
	bin := []byte("\x00asm\x01\x00\x00\x00")
	for _, s := range []struct {
		id   byte
		body []byte
	}{{1, types}, {3, funcs}, {7, exports}, {10, code}} {
		bin = append(leb(append(bin, s.id), uint32(len(s.body))), s.body...)
	}
	path := filepath.Join(t.TempDir(), "50-old.wasm")
	if err := os.WriteFile(path, bin, 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := LoadPlugin(context.Background(), path, nil, Options{})
	want := `plugin 50-old.wasm: is an OPA policy of Wasm ABI 1.0 or 1.1 (it exports "eval", not "opa_eval"): Plantgate runs ABI 1.2 and later (OPA v0.30+); rebuild it with a current opa build -t wasm`
	if err == nil || err.Error() != want {
		t.Fatalf("err = %v\nwant %s", err, want)
	}
}

// TestOPAInChain: Rego policies take their places in a chain beside a
// Plantgate-ABI module, with their sidecars' data, live and in shadow:
// the shadow's decisions are compared and reported, never enforced.
func TestOPAInChain(t *testing.T) {
	t.Parallel()
	rules := needRego(t, "rules")
	rec := &shadowLog{got: make(chan ShadowDecision, 8), dropped: make(chan string, 8)}
	c, err := chainDir(t, map[string]string{"10-auth.wasm": "principal", "20-rules.wasm": rules, "20-rules.shadow.wasm": rules},
		map[string]string{
			"20-rules.json":        `{"config": {"banned_tags": ["weed"]}}`,
			"20-rules.shadow.json": `{"config": {"banned_tags": ["weed", "ivy"]}, "sample_percent": 100}`,
		}, Options{Shadows: rec})
	if err != nil {
		t.Fatal(err)
	}
	if !c.Authorizes() || len(c.Plugins()) != 3 {
		t.Fatalf("chain: %+v", c.Plugins())
	}
	ctx := context.Background()
	principal, err := c.Authorize(ctx, host.AuthorizeRequest{Method: "GET", Path: "/plants", Route: "GET /plants", Credential: cred32})
	if err != nil || principal != "fixture-user" {
		t.Fatalf("Authorize = %q, %v", principal, err)
	}
	if d := <-rec.got; d.Phase != "authorize" || d.Outcome != ShadowAgree {
		t.Fatalf("authorize shadow decision %+v", d)
	}
	if err := c.Validate(ctx, host.Plant{ID: 7, Name: "Ivy", Tag: "ivy", HasTag: true}, principal); err != nil {
		t.Fatalf("Validate = %v; the shadow must not change it", err)
	}
	d := <-rec.got
	if d.File != "20-rules.shadow.wasm" || d.Phase != "validate" || d.Outcome != ShadowWouldDeny || d.Shadow.Code != 40050 {
		t.Fatalf("validate shadow decision %+v", d)
	}
	err = c.Validate(ctx, host.Plant{ID: 7, Name: "Weed", Tag: "weed", HasTag: true}, principal)
	wantError(t, err, &host.Error{Code: 40050, Message: `tag "weed" is banned`})
}

// TestOPAReloadData: a new sidecar is a new policy data on reload, as for
// any plugin's config.
func TestOPAReloadData(t *testing.T) {
	t.Parallel()
	dir := copyFixtures(t, map[string]string{"10-auth.wasm": "principal", "20-rules.wasm": needRego(t, "rules"),
		"20-rules.json": `{"config": {"banned_tags": ["weed"]}}`})
	r, _ := newReloader(t, dir, ReloadOptions{})
	ctx := context.Background()
	ivy := host.Plant{ID: 1, Name: "Ivy", Tag: "ivy", HasTag: true}
	wantError(t, r.Validate(ctx, ivy, ""), nil)
	if err := os.WriteFile(filepath.Join(dir, "20-rules.json"), []byte(`{"config": {"banned_tags": ["ivy"]}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if changed, err := r.Reload(ctx); !changed || err != nil {
		t.Fatalf("Reload = %v, %v", changed, err)
	}
	wantError(t, r.Validate(ctx, ivy, ""), &host.Error{Code: 40050, Message: `tag "ivy" is banned`})
}
