package main

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/plantgate/plantgate/host"
	"github.com/plantgate/plantgate/host/fleet"
	"github.com/plantgate/plantgate/host/redis"
	"github.com/plantgate/plantgate/host/redis/redistest"
	"github.com/plantgate/plantgate/host/wasm"
)

// knownTraffic is TestMetricsAfterKnownTraffic's requests: the answers a
// chain of bearer-auth and plant-rules gives, shadow or no shadow.
var knownTraffic = []struct {
	token, body string
	status      int
}{
	{testToken, `{"id":1,"name":"Monstera"}`, 200},
	{testToken, `{"id":2,"name":"Fern","tag":"green"}`, 200},
	{testToken, `{"id":3,"name":""}`, 400},                 // plant-rules denies
	{"", `{"id":4,"name":"x"}`, 401},                       // no credential: no plugin runs
	{"wrong-token-0123456789", `{"id":5,"name":"x"}`, 401}, // bearer-auth denies
}

// withFixture adds testdata/abi/<fixture>.wasm to dir as name, with a
// sidecar when not "".
func withFixture(t testing.TB, dir, fixture, name, sidecar string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, name), fixtureFile(t, fixture+".wasm"), 0o644); err != nil {
		t.Fatal(err)
	}
	if sidecar != "" {
		writeFile(t, filepath.Join(dir, strings.TrimSuffix(name, ".wasm")+".json"), sidecar)
	}
}

// waitMetrics polls admin's /metrics until it holds every line of want
// (shadow calls are counted after the answer, off the request path).
func waitMetrics(t *testing.T, admin string, want ...string) string {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		_, body, _ := get(t, admin+"/metrics")
		missing := ""
		for _, w := range want {
			if !strings.Contains(body, w+"\n") {
				missing = w
				break
			}
		}
		if missing == "" {
			return body
		}
		if time.Now().After(deadline) {
			var shadow []string
			for _, l := range strings.Split(body, "\n") {
				if strings.HasPrefix(l, "plantgate_shadow") {
					shadow = append(shadow, l)
				}
			}
			t.Fatalf("/metrics lacks %s; shadow lines:\n%s", missing, strings.Join(shadow, "\n"))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestShadowDenyEverything: a deny-everything shadow beside the live chain
// changes no answer, and its disagreements are counted exactly and logged
// to the store's diff log, which `plugin diff` reads, without the
// credential.
func TestShadowDenyEverything(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	dir := pluginsDir(t, "10-bearer-auth.wasm", "20-plant-rules.wasm")
	withFixture(t, dir, "deny", "20-plant-rules.shadow.wasm", "")
	m := &Main{
		Listen: "127.0.0.1:0", AdminListen: "127.0.0.1:0", PluginsDir: dir, BootstrapToken: testToken, RedisURL: srv.URL(),
		CacheDir: sharedCache, Logger: slog.New(slog.DiscardHandler),
	}
	if err := m.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	base, admin := "http://"+m.Addr().String(), "http://"+m.AdminAddr().String()
	for _, r := range knownTraffic {
		if status, body := post(t, base, r.token, r.body); status != r.status {
			t.Fatalf("%s: %d %s, want %d as without the shadow", r.body, status, body, r.status)
		}
	}
	// deny.wasm serves both phases. Authorize: the three requests bearer-auth
	// allowed would be denied (the one it denied, in an earlier slot, never
	// reaches the shadow's). Validate: the two valid plants would be
	// denied; the empty name is denied by both.
	body := waitMetrics(t, admin,
		`plantgate_shadow_decisions_total{outcome="would_deny",plugin="plant-rules"} 5`,
		`plantgate_shadow_decisions_total{outcome="agree",plugin="plant-rules"} 1`,
		`plantgate_shadow_decisions_total{outcome="would_allow",plugin="plant-rules"} 0`,
		`plantgate_shadow_decisions_total{outcome="fault",plugin="plant-rules"} 0`,
		`plantgate_plugin_calls_total{outcome="deny",phase="validate",plugin="plant-rules.shadow"} 3`,
	)
	if strings.Contains(body, "plantgate_shadow_dropped_total{") {
		t.Fatalf("shadow calls dropped:\n%s", body)
	}

	out := fleetCLI(t, 0, "plugin", "diff", "--redis-url", srv.URL(), "--json")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 5 {
		t.Fatalf("plugin diff: %d lines, want the 5 would_deny:\n%s", len(lines), out)
	}
	phases := map[string]int{}
	for _, l := range lines {
		var d redis.ShadowDiff
		if err := json.Unmarshal([]byte(l), &d); err != nil {
			t.Fatal(err)
		}
		phases[d.Phase]++
		if d.Outcome != "would_deny" || d.Live.Decision != "allow" || d.Shadow != (redis.Decision{Decision: "deny", Code: 40355}) ||
			d.RequestID == "" || d.Plugin != "plant-rules" || d.File != "20-plant-rules.shadow.wasm" || d.Principal != "bootstrap" {
			t.Errorf("diff %s", l)
		}
		if d.Phase == "validate" && (d.Plant == nil || (d.Plant.Name != "Monstera" && d.Plant.Name != "Fern")) {
			t.Errorf("validate diff without its plant: %s", l)
		}
		if d.Phase == "authorize" && (d.Method != "POST" || d.Path != "/plants" || d.Route != "POST /plants") {
			t.Errorf("authorize diff without its request: %s", l)
		}
	}
	if phases["authorize"] != 3 || phases["validate"] != 2 {
		t.Errorf("diffs by phase %v, want 3 authorize and 2 validate", phases)
	}
	c := goredis.NewClient(&goredis.Options{Addr: srv.Addr()})
	defer c.Close()
	entries, err := c.XRange(context.Background(), "plantgate:{shadow}:diffs", "-", "+").Result()
	if err != nil || len(entries) != 5 {
		t.Fatalf("the diff stream: %d entries, %v", len(entries), err)
	}
	raw := fmt.Sprint(entries)
	sum := sha256.Sum256([]byte(testToken))
	for _, secret := range []string{testToken, fmt.Sprintf("%x", sum)} {
		if strings.Contains(out, secret) || strings.Contains(raw, secret) {
			t.Fatalf("the diff log holds the credential or its digest: %s", raw)
		}
	}
	text := fleetCLI(t, 0, "plugin", "diff", "--redis-url", srv.URL(), "--limit", "2")
	if !strings.Contains(text, "PLUGIN") || strings.Count(text, "would_deny") != 2 || !strings.Contains(text, "deny 40355") {
		t.Fatalf("plugin diff:\n%s", text)
	}
}

// TestShadowFaultsChangeNoAnswer: a shadow that traps and one that runs
// past its deadline answer nothing; every request gets the live chain's
// answer and the faults are counted. A shadow's pool is small (one
// instance on 2 CPUs): the requests are paced by the spinning shadow's
// calls, so that none waits past its deadline behind the spins before it
// and is dropped. Its deadline is 200 ms, not 20: a shadow call waits for
// its instance (and makes it again after a fault) within twice its
// deadline, and on a loaded machine 40 ms was once too little (a call
// dropped, a fault uncounted).
func TestShadowFaultsChangeNoAnswer(t *testing.T) {
	t.Parallel()
	dir := pluginsDir(t, "10-bearer-auth.wasm", "20-plant-rules.wasm")
	withFixture(t, dir, "trap", "20-plant-rules.shadow.wasm", "")
	withFixture(t, dir, "loop", "30-spin.shadow.wasm", `{"limits": {"timeout_ms": 200}}`)
	m := &Main{
		Listen: "127.0.0.1:0", AdminListen: "127.0.0.1:0", PluginsDir: dir, BootstrapToken: testToken,
		CacheDir: sharedCache, Logger: slog.New(slog.DiscardHandler),
	}
	if err := m.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	base, admin := "http://"+m.Addr().String(), "http://"+m.AdminAddr().String()
	spinCalls, calls := []int{2, 2, 1, 0, 0}, 0 // of each of knownTraffic
	for i, r := range knownTraffic {
		if status, body := post(t, base, r.token, r.body); status != r.status {
			t.Fatalf("%s: %d %s, want %d as without the shadows", r.body, status, body, r.status)
		}
		calls += spinCalls[i]
		waitShadowCalls(t, admin, "spin", calls)
	}
	// Authorize on /plants: both allow, as the live chain did (3 requests
	// reach their slots). Validate: both fault, on the 3 plants that reach
	// their slots: plant-rules denies the empty name before spin's.
	waitMetrics(t, admin,
		`plantgate_shadow_decisions_total{outcome="agree",plugin="plant-rules"} 3`,
		`plantgate_shadow_decisions_total{outcome="fault",plugin="plant-rules"} 3`,
		`plantgate_shadow_decisions_total{outcome="agree",plugin="spin"} 3`,
		`plantgate_shadow_decisions_total{outcome="fault",plugin="spin"} 2`,
	)
	if status, body := post(t, base, testToken, `{"id":9,"name":"Ivy"}`); status != 200 {
		t.Fatalf("after the faults: %d %s", status, body)
	}
}

// waitShadowCalls waits until admin's /metrics counts n shadow calls of
// plugin, decided or dropped.
func waitShadowCalls(t *testing.T, admin, plugin string, n int) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		_, body, _ := get(t, admin+"/metrics")
		got := 0
		for _, l := range strings.Split(body, "\n") {
			if (strings.HasPrefix(l, "plantgate_shadow_decisions_total{") || strings.HasPrefix(l, "plantgate_shadow_dropped_total{")) &&
				strings.Contains(l, `plugin="`+plugin+`"`) {
				v, _ := strconv.Atoi(l[strings.LastIndexByte(l, ' ')+1:])
				got += v
			}
		}
		if got >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d shadow calls of %s after 30s, want %d", got, plugin, n)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestCanaryPerPrincipal: a deny-everything canary of plant-rules at 10%
// is enforced for exactly the principals whose hash falls in its share,
// the same ones on every request, about a tenth of 200.
func TestCanaryPerPrincipal(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	url := srv.URL()
	fleetCLI(t, 0, "plugin", "push", filepath.Join(bundledDir, "10-bearer-auth.wasm"), "--redis-url", url, "--cache-dir", sharedCache)
	fleetCLI(t, 0, "plugin", "push", filepath.Join(bundledDir, "20-plant-rules.wasm"), "--redis-url", url, "--cache-dir", sharedCache)
	out := fleetCLI(t, 0, "plugin", "push", fixtureAs(t, "deny", "20-plant-rules.wasm"), "--canary", "10", "--redis-url", url, "--cache-dir", sharedCache)
	if !strings.Contains(out, "pushed 20-plant-rules.canary.wasm") || !strings.Contains(out, "fleet chain version 3") {
		t.Fatalf("push --canary: %s", out)
	}
	m := &Main{
		Listen: "127.0.0.1:0", RedisURL: url, PluginsFromStore: true, BootstrapToken: testToken,
		CacheDir: sharedCache, Logger: slog.New(slog.DiscardHandler),
	}
	if err := m.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if st, plugins := m.reloader.Snapshot(); st.Version != 3 || len(plugins) != 3 || plugins[1].Info.Role != wasm.RoleCanary || plugins[1].Info.Percent != 10 {
		t.Fatalf("chain version %d: %+v", st.Version, plugins)
	}
	base := "http://" + m.Addr().String()
	ctx := context.Background()
	const n = 200
	want := 0
	for i := range n {
		name, token := fmt.Sprintf("user-%03d", i), fmt.Sprintf("canary-token-%03d-0123456789", i)
		if err := m.store.PutToken(ctx, host.Token{Digest: sha256.Sum256([]byte(token)), Name: name, Scopes: host.AllScopes(), Created: time.Now()}); err != nil {
			t.Fatal(err)
		}
		canary := wasm.InCanary(name, 10)
		if canary {
			want++
		}
		for round := range 2 { // the same principal gets the same version every time
			status, body := post(t, base, token, fmt.Sprintf(`{"id":%d,"name":"Fern"}`, 1000*round+i+1))
			switch {
			case canary && (status != 403 || body != `{"error":40355,"message":"denied by fixture"}`):
				t.Fatalf("%s (in the canary's share), round %d: %d %s", name, round, status, body)
			case !canary && status != 200:
				t.Fatalf("%s (live version), round %d: %d %s", name, round, status, body)
			}
		}
	}
	// Binomial(200, 0.1): mean 20, sd 4.24; the hash is fixed, so this is
	// a check that it spreads, not a flaky draw.
	if sd := math.Sqrt(n * 0.1 * 0.9); math.Abs(float64(want)-n*0.1) > 3*sd {
		t.Fatalf("%d of %d principals in a 10%% canary, want within 3 sd of 20", want, n)
	}
	t.Logf("canary at 10%%: enforced for %d of %d principals", want, n)
}

// TestPromoteAndRollbackAcrossGateways: two gateway processes follow one
// real redis-server's signed chain. A deny-everything shadow changes no
// answer on either; promote makes it the live plant-rules on both (signed
// again under its live name); rollback returns both to the chain before;
// a second rollback swaps back.
func TestPromoteAndRollbackAcrossGateways(t *testing.T) {
	t.Parallel()
	url := redistest.Start(t).URL()
	keys := filepath.Join(t.TempDir(), "ops")
	fleetCLI(t, 0, "plugin", "keygen", "--out", keys)
	sign := []string{"--redis-url", url, "--sign-key", keys + ".key"}
	cli := func(args ...string) string { return fleetCLI(t, 0, append(args, sign...)...) }
	cli("plugin", "push", filepath.Join(bundledDir, "10-bearer-auth.wasm"), "--cache-dir", sharedCache)
	cli("plugin", "push", filepath.Join(bundledDir, "20-plant-rules.wasm"), "--cache-dir", sharedCache)
	if out := cli("plugin", "push", fixtureAs(t, "deny", "20-plant-rules.wasm"), "--shadow", "--cache-dir", sharedCache); !strings.Contains(out, "pushed 20-plant-rules.shadow.wasm") ||
		!strings.Contains(out, "signed): fleet chain version 3") {
		t.Fatalf("push --shadow: %s", out)
	}
	args := []string{"--redis-url", url, "--plugins-from-store", "--plugin-trust-key", keys + ".pub", "--bootstrap-token", rolloutToken}
	gws := []*gateway{startGateway(t, nil, args...), startGateway(t, nil, args...)}
	for _, g := range gws {
		if status, body := decision(t, g); status != 200 {
			t.Fatalf("with the shadow: %d %s", status, body)
		}
	}

	start := time.Now()
	out := fleetCLI(t, 0, append([]string{"plugin", "promote", "plant-rules"}, sign...)...)
	if !strings.Contains(out, "promoted 20-plant-rules.shadow.wasm to 20-plant-rules.wasm") || !strings.Contains(out, "signed): fleet chain version 4") {
		t.Fatalf("promote: %s", out)
	}
	waitDecision(t, gws, 403, "promoted")
	t.Logf("promote → both gateways deny: %v", time.Since(start).Round(time.Millisecond))
	waitStatus(t, url, "converged on the promoted chain", func(s fleet.Status, code int) bool {
		return code == 0 && len(s.Gateways) == 2 && s.Version == 4
	})
	ctx := context.Background()
	st, err := redis.Open(ctx, url, redis.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	m, err := st.PluginManifest(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if files := entryFiles(m.Plugins); files != "10-bearer-auth.wasm 20-plant-rules.wasm" {
		t.Fatalf("chain after promote: %s", files)
	}

	start = time.Now()
	out = fleetCLI(t, 0, append([]string{"plugin", "rollback"}, sign...)...)
	if want := "rolled back from version 4 to the chain of version 3 (10-bearer-auth.wasm, 20-plant-rules.shadow.wasm, 20-plant-rules.wasm): fleet chain version 5"; !strings.Contains(out, want) {
		t.Fatalf("rollback: %s, want %s", out, want)
	}
	waitDecision(t, gws, 200, "rolled back")
	t.Logf("rollback → both gateways allow: %v", time.Since(start).Round(time.Millisecond))
	waitStatus(t, url, "converged on the rollback", func(s fleet.Status, code int) bool {
		return code == 0 && len(s.Gateways) == 2 && s.Version == 5 && s.Digest != ""
	})

	out = fleetCLI(t, 0, append([]string{"plugin", "rollback"}, sign...)...)
	if !strings.Contains(out, "rolled back from version 5 to the chain of version 4") {
		t.Fatalf("second rollback: %s", out)
	}
	waitDecision(t, gws, 403, "rolled back twice")

	// Unsigned, the promote is refused before anything is published.
	cli("plugin", "push", fixtureAs(t, "allow", "20-plant-rules.wasm"), "--shadow", "--cache-dir", sharedCache)
	_, errOut, code := plantgateCLI(t, "plugin", "promote", "plant-rules", "--redis-url", url)
	if code != 1 || !strings.Contains(errOut, "the fleet chain is signed (version 7): gateways that trust keys refuse an unsigned chain; give --sign-key") {
		t.Fatalf("unsigned promote: exit %d %s", code, errOut)
	}
}

func entryFiles(ps []redis.PluginEntry) string {
	var files []string
	for _, p := range ps {
		files = append(files, p.File)
	}
	return strings.Join(files, " ")
}

// TestRolloutCLIErrors: each misuse of the rollout commands exits 1 with
// its own message and publishes nothing.
func TestRolloutCLIErrors(t *testing.T) {
	t.Parallel()
	url := redistest.Start(t).URL()
	allow := fixtureAs(t, "allow", "20-rules.wasm")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"plugin", "rollback"}, "nothing to roll back to: the fleet chain at version 0 replaced no earlier version"},
		{[]string{"plugin", "push", allow, "--shadow", "--canary", "10"}, "--shadow and --canary: give one"},
		{[]string{"plugin", "push", allow, "--sample", "10"}, "--sample is a shadow's sampling rate: give --shadow too"},
		{[]string{"plugin", "push", allow, "--canary", "0"}, "--canary must be a percent from 1 to 100, got 0"},
		{[]string{"plugin", "push", allow, "--shadow", "--sample", "101"}, "--sample must be a percent from 1 to 100, got 101"},
		{[]string{"plugin", "promote", "rules"}, "no plugin rules in the fleet chain"},
		{[]string{"plugin", "diff", "--limit", "0"}, "--limit must be from 1 to 1000, got 0"},
	} {
		_, errOut, code := plantgateCLI(t, append(tc.args, "--redis-url", url)...)
		if code != 1 || !strings.Contains(errOut, tc.want) {
			t.Errorf("%v: exit %d %q, want 1 and %q", tc.args, code, errOut, tc.want)
		}
	}
	fleetCLI(t, 0, "plugin", "push", allow, "--redis-url", url, "--cache-dir", sharedCache)
	_, errOut, code := plantgateCLI(t, "plugin", "promote", "20-rules", "--redis-url", url)
	if code != 1 || !strings.Contains(errOut, "20-rules has no shadow or canary to promote (push one with plugin push --shadow or --canary)") {
		t.Errorf("promote without a shadow: exit %d %q", code, errOut)
	}
	fleetCLI(t, 0, "plugin", "push", allow, "--shadow", "--sample", "25", "--redis-url", url, "--cache-dir", sharedCache)
	fleetCLI(t, 0, "plugin", "push", allow, "--canary", "5", "--redis-url", url, "--cache-dir", sharedCache)
	_, errOut, code = plantgateCLI(t, "plugin", "promote", "rules", "--redis-url", url)
	if code != 1 || !strings.Contains(errOut, "20-rules has both 20-rules.canary.wasm and 20-rules.shadow.wasm: remove one (plugin remove) before promoting the other") {
		t.Errorf("promote with both: exit %d %q", code, errOut)
	}
	ctx := context.Background()
	st, err := redis.Open(ctx, url, redis.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	m, err := st.PluginManifest(ctx)
	if err != nil || m.Version != 3 || entryFiles(m.Plugins) != "20-rules.canary.wasm 20-rules.shadow.wasm 20-rules.wasm" ||
		string(m.Plugins[0].Sidecar) != `{"canary_percent":5}` || string(m.Plugins[1].Sidecar) != `{"sample_percent":25}` {
		t.Fatalf("chain %d: %s %q %q (%v)", m.Version, entryFiles(m.Plugins), m.Plugins[0].Sidecar, m.Plugins[1].Sidecar, err)
	}
	if out := fleetCLI(t, 0, "plugin", "diff", "--redis-url", url); out != "no shadow disagreements logged\n" {
		t.Fatalf("diff of an empty log: %q", out)
	}
}
