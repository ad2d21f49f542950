package wasm

import (
	"context"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/plantgate/plantgate/host"
)

func TestCompareShadow(t *testing.T) {
	t.Parallel()
	deny := &host.Error{Code: 40355, Message: "no"}
	for _, tc := range []struct {
		name         string
		live, shadow error
		later        bool
		want         string
	}{
		{"both allow", nil, nil, false, ShadowAgree},
		{"both deny", deny, deny, false, ShadowAgree},
		{"shadow denies", nil, deny, false, ShadowWouldDeny},
		{"shadow allows in the live deny's slot", deny, nil, false, ShadowWouldAllow},
		{"shadow allows before a later deny", deny, nil, true, ShadowAgree},
		{"shadow faults", nil, errFault, false, ShadowFault},
		{"shadow faults before a later deny", deny, errBadDecision, true, ShadowFault},
	} {
		if got := compareShadow(tc.live, tc.shadow, tc.later); got != tc.want {
			t.Errorf("%s: %s, want %s", tc.name, got, tc.want)
		}
	}
}

func TestFileRole(t *testing.T) {
	t.Parallel()
	for file, want := range map[string][2]string{
		"20-policy.wasm":        {"20-policy", RoleLive},
		"20-policy.shadow.wasm": {"20-policy", RoleShadow},
		"20-policy.canary.wasm": {"20-policy", RoleCanary},
	} {
		if slot, role := FileRole(file); slot != want[0] || role != want[1] {
			t.Errorf("FileRole(%s) = %s, %s", file, slot, role)
		}
		if err := CheckFileName(file); err != nil {
			t.Error(err)
		}
	}
	if err := CheckFileName("20-policy.other.wasm"); err == nil {
		t.Error("20-policy.other.wasm accepted")
	}
}

// shadowLog records shadow decisions for a test.
type shadowLog struct {
	got     chan ShadowDecision
	dropped chan string
}

func (s *shadowLog) Shadow(d ShadowDecision)     { s.got <- d }
func (s *shadowLog) ShadowDropped(plugin string) { s.dropped <- plugin }

// chainDir loads a chain from a directory of fixtures: file name →
// fixture, and sidecars by name.
func chainDir(t *testing.T, files map[string]string, sidecars map[string]string, opts Options) (*Chain, error) {
	t.Helper()
	dir := t.TempDir()
	for name, fx := range files {
		b, err := os.ReadFile(fixture(fx))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for name, content := range sidecars {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	c, err := Load(context.Background(), Dir(dir), opts)
	if err == nil {
		t.Cleanup(func() { c.Close(context.Background()) })
	}
	return c, err
}

// TestShadowInChain: a deny-everything shadow changes neither phase's
// answer and reports each decision with the input's fields, never the
// credential; a canary at 100% is enforced, and a live chain without
// them never reaches the recorder.
func TestShadowInChain(t *testing.T) {
	t.Parallel()
	rec := &shadowLog{got: make(chan ShadowDecision, 8), dropped: make(chan string, 8)}
	c, err := chainDir(t, map[string]string{"10-auth.wasm": "principal", "20-rules.wasm": "allow", "20-rules.shadow.wasm": "deny"}, nil,
		Options{Shadows: rec})
	if err != nil {
		t.Fatal(err)
	}
	if !c.Authorizes() || len(c.Plugins()) != 3 {
		t.Fatalf("chain: %+v", c.Plugins())
	}
	ctx := context.Background()
	r := host.AuthorizeRequest{Method: "GET", Path: "/plants/7", Route: "GET /plants/{id}", PathID: 7, HasPathID: true, Credential: cred32}
	principal, err := c.Authorize(ctx, r)
	if err != nil || principal != "fixture-user" {
		t.Fatalf("Authorize = %q, %v; the shadow must not change it", principal, err)
	}
	d := <-rec.got
	want := ShadowDecision{Plugin: "rules", File: "20-rules.shadow.wasm", Phase: "authorize", Outcome: ShadowWouldDeny,
		Live: Verdict{Allow: true}, Shadow: Verdict{Code: 40355}, Principal: "fixture-user", Method: "GET", Route: "GET /plants/{id}",
		Path: "/plants/7", PathID: 7, HasPathID: true}
	d.Took = 0
	if d != want {
		t.Fatalf("decision\n got %+v\nwant %+v", d, want)
	}
	if err := c.Validate(ctx, host.Plant{ID: 7, Name: "Ivy"}, principal); err != nil {
		t.Fatalf("Validate = %v; the shadow must not change it", err)
	}
	if d := <-rec.got; d.Phase != "validate" || d.Outcome != ShadowWouldDeny || d.Plant == nil || d.Plant.Name != "Ivy" {
		t.Fatalf("validate decision %+v", d)
	}

	canary, err := chainDir(t, map[string]string{"10-auth.wasm": "principal", "20-rules.wasm": "allow", "20-rules.canary.wasm": "deny"},
		map[string]string{"20-rules.canary.json": `{"canary_percent": 100}`}, Options{Shadows: rec})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := canary.Authorize(ctx, r); host.Code(err) != 40355 {
		t.Fatalf("a 100%% canary is not enforced: %v", err)
	}
	select {
	case d := <-rec.got:
		t.Fatalf("a canary reported a shadow decision: %+v", d)
	case <-time.After(50 * time.Millisecond):
	}
}

func TestRolloutSidecarKeys(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		file, sidecar, want string
	}{
		{"20-rules.wasm", `{"sample_percent": 10}`, `plugin 20-rules.json: "sample_percent" is for a shadow (NN-name.shadow.wasm), not a live plugin`},
		{"20-rules.shadow.wasm", `{"canary_percent": 10}`, `plugin 20-rules.shadow.json: "canary_percent" is for a canary (NN-name.canary.wasm), not a shadow plugin`},
		{"20-rules.canary.wasm", "", `plugin 20-rules.canary.wasm: a canary needs "canary_percent" in its sidecar 20-rules.canary.json: the share of principals it is enforced for, 1 to 100`},
		{"20-rules.canary.wasm", `{"canary_percent": 0}`, `plugin 20-rules.canary.json: line 1, column 20: "canary_percent" must be an integer from 1 to 100, got 0`},
		// A call nothing can stop would hold a CPU, and stall the process at
		// the next garbage collection, for a plugin still on trial.
		{"20-rules.shadow.wasm", `{"limits": {"interrupt": false}}`, `plugin 20-rules.shadow.json: "limits.interrupt": false is refused for a shadow: a call nothing can stop would hold a CPU and stall the gateway at its next garbage collection`},
		{"20-rules.canary.wasm", `{"canary_percent": 5, "limits": {"interrupt": false}}`, `plugin 20-rules.canary.json: "limits.interrupt": false is refused for a canary: a call nothing can stop would hold a CPU and stall the gateway at its next garbage collection`},
		{"20-rules.shadow.wasm", `{"limits": {"timeout_ms": 1001}}`, `plugin 20-rules.shadow.json: "limits.timeout_ms" of a shadow must be from 1 to 1000, got 1001: a garbage collection waits for a spinning call until its deadline, stalling live requests`},
		{"20-rules.shadow.wasm", `{"limits": {"instances": 3}}`, `plugin 20-rules.shadow.json: "limits.instances" of a shadow must be from 1 to 2, got 3: a shadow's calls must leave the CPUs to the live chain`},
	} {
		sidecars := map[string]string{}
		if tc.sidecar != "" {
			sidecars[strings.TrimSuffix(tc.file, ".wasm")+".json"] = tc.sidecar
		}
		_, err := chainDir(t, map[string]string{tc.file: "allow"}, sidecars, Options{})
		if err == nil || err.Error() != tc.want {
			t.Errorf("%s %s: %v\nwant %s", tc.file, tc.sidecar, err, tc.want)
		}
	}
}

// TestShadowInstances: a shadow's pool is small and its deadline short
// whatever the gateway's defaults, so a shadow that spins holds at most
// that many CPUs for at most that long; a live plugin and a canary keep
// the defaults. A sidecar's "instances" never takes every CPU.
func TestShadowInstances(t *testing.T) {
	t.Parallel()
	opts := Options{Limits: Limits{Instances: 8, Timeout: 5 * time.Second}}
	c, err := chainDir(t, map[string]string{"20-rules.wasm": "allow", "20-rules.shadow.wasm": "allow", "20-rules.canary.wasm": "allow"},
		map[string]string{"20-rules.canary.json": `{"canary_percent": 10}`}, opts)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]int{"20-rules.wasm": 8, "20-rules.canary.wasm": 8, "20-rules.shadow.wasm": DefaultShadowInstances()}
	for _, p := range c.Plugins() {
		if got := p.Limits.Instances; got != want[p.File] {
			t.Errorf("%s: %d instances, want %d", p.File, got, want[p.File])
		}
		if wantT := map[bool]time.Duration{true: MaxShadowTimeout, false: 5 * time.Second}[p.Role == RoleShadow]; p.Limits.Timeout != wantT {
			t.Errorf("%s: timeout %v, want %v", p.File, p.Limits.Timeout, wantT)
		}
	}
	if n := DefaultShadowInstances(); n < 1 || n > MaxShadowInstances {
		t.Fatalf("DefaultShadowInstances() = %d, want 1 to %d", n, MaxShadowInstances)
	}
	c, err = chainDir(t, map[string]string{"20-rules.wasm": "allow", "20-rules.shadow.wasm": "allow"},
		map[string]string{"20-rules.shadow.json": `{"limits": {"instances": 2}}`}, opts)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range c.Plugins() {
		if want := min(2, max(runtime.GOMAXPROCS(0)-1, 1)); p.File == "20-rules.shadow.wasm" && p.Limits.Instances != want {
			t.Errorf("a shadow's sidecar asking for 2 instances got %d, want %d on %d CPUs", p.Limits.Instances, want, runtime.GOMAXPROCS(0))
		}
	}
}

func TestInCanary(t *testing.T) {
	t.Parallel()
	in := 0
	for i := range 1000 {
		name := "p" + string(rune('a'+i%26)) + strings.Repeat("x", i/26)
		if InCanary(name, 10) != InCanary(name, 10) {
			t.Fatal("not stable")
		}
		if InCanary(name, 10) {
			in++
		}
		if !InCanary(name, 100) || InCanary(name, 0) {
			t.Fatal("100% must take every principal, 0% none")
		}
	}
	if in < 70 || in > 130 { // Binomial(1000, 0.1): sd 9.5
		t.Fatalf("%d of 1000 in a 10%% canary", in)
	}
	if InCanary("", 100) {
		t.Fatal("no principal, no canary")
	}
}

// TestCanaryNeedsItsLivePlugin: a canary whose slot has no live plugin is
// refused at load. Before, a 100% canary of the
// authorizing plugin alone let every request whose principal was not yet
// known through its slot unjudged (the canary is called only for a
// principal in its share), while another live authorize plugin kept
// Authorizes true.
func TestCanaryNeedsItsLivePlugin(t *testing.T) {
	t.Parallel()
	canary := map[string]string{"10-auth.canary.json": `{"canary_percent": 100}`}
	_, err := chainDir(t, map[string]string{"10-auth.canary.wasm": "deny", "20-rules.wasm": "allow"}, canary, Options{})
	want := "plugin 10-auth.canary.wasm: a canary needs the live plugin 10-auth.wasm in its slot: the principals outside its share, and requests whose principal is not known yet, get the live version"
	if err == nil || err.Error() != want {
		t.Fatalf("canary alone in its slot: %v\nwant %s", err, want)
	}
	if _, err := chainDir(t, map[string]string{"10-auth.wasm": "deny", "10-auth.canary.wasm": "deny"}, canary, Options{}); err != nil {
		t.Fatalf("canary beside its live plugin: %v", err)
	}
}
