package main

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/plantgate/plantgate/host/fleet"
	"github.com/plantgate/plantgate/host/pluginsig"
	"github.com/plantgate/plantgate/host/redis"
	"github.com/plantgate/plantgate/host/redis/redistest"
)

const rolloutToken = "rollout-bootstrap-token-0123456789"

// fixtureAs copies testdata/abi/<fixture>.wasm to a fresh directory as name.
func fixtureAs(t *testing.T, fixture, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "testdata", "abi", fixture+".wasm"))
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// fleetCLI runs plantgate and wants exit code want.
func fleetCLI(t *testing.T, want int, args ...string) string {
	t.Helper()
	out, errOut, code := plantgateCLI(t, args...)
	if code != want {
		t.Fatalf("plantgate %s: exit %d, want %d\n%s%s", strings.Join(args, " "), code, want, out, errOut)
	}
	return out + errOut
}

// fleetStatus runs `plugin status --json`.
func fleetStatus(t *testing.T, url string) (fleet.Status, int) {
	t.Helper()
	out, errOut, code := plantgateCLI(t, "plugin", "status", "--json", "--redis-url", url)
	var s fleet.Status
	if err := json.Unmarshal([]byte(out), &s); err != nil {
		t.Fatalf("plugin status --json: %v\n%s%s", err, out, errOut)
	}
	return s, code
}

// decision posts a plant through g and returns status and body.
func decision(t *testing.T, g *gateway) (int, string) {
	t.Helper()
	return post(t, g.base, rolloutToken, `{"id":7,"name":"Monstera"}`)
}

// waitDecision waits until every gateway answers want to a create.
func waitDecision(t *testing.T, gws []*gateway, want int, what string) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for _, g := range gws {
		for {
			status, _ := decision(t, g)
			if status == want {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: %s still answers %d, want %d\n%s", what, g.base, status, want, g.stderr)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
}

// waitStatus waits until `plugin status` satisfies cond.
func waitStatus(t *testing.T, url, what string, cond func(fleet.Status, int) bool) fleet.Status {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		s, code := fleetStatus(t, url)
		if cond(s, code) {
			return s
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: status never came: %+v (exit %d)", what, s, code)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestFleetRollout drives two gateway processes on one real redis-server
// through the fleet's chain: signed pushes converge on both, a module that
// fails on the gateways, an unsigned one and one written straight into
// Redis are refused fleet-wide with the old chain kept, remove converges
// back.
func TestFleetRollout(t *testing.T) {
	t.Parallel()
	fleetRollout(t, redistest.Start(t).URL())
}

// TestFleetRolloutCluster is TestFleetRollout on a real 3-primary Redis
// Cluster of its own (a shared one would keep the chain between runs):
// the chain's keys ({plugins}) and the heartbeats ({fleet}) live in one
// slot each, and every gateway and CLI call goes through go-redis's
// cluster client.
func TestFleetRolloutCluster(t *testing.T) {
	t.Parallel()
	fleetRollout(t, redistest.StartCluster(t, redistest.ClusterOptions{}).URL())
}

// fleetRollout is TestFleetRollout on the store at url: one node or a
// cluster.
func fleetRollout(t *testing.T, url string) {
	keys := filepath.Join(t.TempDir(), "ops")
	out := fleetCLI(t, 0, "plugin", "keygen", "--out", keys)
	if !strings.Contains(out, keys+".key") || !strings.Contains(out, keys+".pub") {
		t.Fatalf("keygen output: %s", out)
	}
	sign := []string{"--redis-url", url, "--sign-key", keys + ".key", "--cache-dir", sharedCache}
	push := func(want int, file string, extra ...string) string {
		return fleetCLI(t, want, append(append([]string{"plugin", "push", file}, sign...), extra...)...)
	}

	// Fail closed: an empty store holds no signed chain for a gateway that
	// trusts keys.
	g := launchGateway(t, nil, "--redis-url", url, "--plugins-from-store", "--plugin-trust-key", keys+".pub")
	if code := g.exit(t, time.Minute); code != 1 || !strings.Contains(g.stderr.String(),
		"load plugins: chain version 0 refused: not signed by a trusted key: no signature (the store holds no chain: push plugins with plugin push --sign-key)") {
		t.Fatalf("start on an empty store: exit %d\n%s", code, g.stderr)
	}

	push(0, filepath.Join(bundledDir, "10-bearer-auth.wasm"))
	if out := push(0, filepath.Join(bundledDir, "20-plant-rules.wasm")); !strings.Contains(out, "signed): fleet chain version 2") {
		t.Fatalf("push output: %s", out)
	}
	args := []string{"--redis-url", url, "--plugins-from-store", "--plugin-trust-key", keys + ".pub", "--bootstrap-token", rolloutToken}
	gws := []*gateway{startGateway(t, nil, args...), startGateway(t, nil, args...)}
	waitDecision(t, gws, 200, "start")
	waitStatus(t, url, "converged on version 2", func(s fleet.Status, code int) bool {
		return code == 0 && s.Converged && len(s.Gateways) == 2 && s.Version == 2
	})

	// A deny-all plugin: every gateway must serve it.
	start := time.Now()
	push(0, fixtureAs(t, "deny", "30-deny.wasm"))
	pushed := time.Now()
	waitDecision(t, gws, 403, "deny-all pushed")
	t.Logf("push → last gateway denies: %v (of which the push command %v)", time.Since(start).Round(time.Millisecond), pushed.Sub(start).Round(time.Millisecond))
	if status, body := decision(t, gws[1]); status != 403 || body != `{"error":40355,"message":"denied by fixture"}` {
		t.Fatalf("deny-all: %d %s", status, body)
	}

	// A module whose _initialize traps: push refuses it, nothing published.
	out = push(1, fixtureAs(t, "inittrap", "40-trap.wasm"))
	if !strings.Contains(out, "not pushed") {
		t.Fatalf("push of a trapping module: %s", out)
	}
	ctx := context.Background()
	st, err := redis.Open(ctx, url, redis.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if v, err := st.PluginVersion(ctx); err != nil || v != 3 {
		t.Fatalf("version after a refused push: %d %v", v, err)
	}

	// The same module, signed by the operator's key but written around
	// the CLI's checks: every gateway refuses it, keeps version 3 and says
	// why.
	priv, err := pluginsig.ReadPrivateKey(keys + ".key")
	if err != nil {
		t.Fatal(err)
	}
	trap, _ := os.ReadFile(fixtureAs(t, "inittrap", "40-trap.wasm"))
	publishRaw(t, st, priv, func(ps []redis.PluginEntry) []redis.PluginEntry {
		d, _ := st.PutPluginModule(ctx, trap)
		return append(ps, redis.PluginEntry{File: "40-trap.wasm", Module: d, Sig: pluginsig.Sign(priv, "40-trap", trap, nil)})
	})
	s := waitStatus(t, url, "trap refused fleet-wide", func(s fleet.Status, code int) bool {
		return code == exitNotConverged && refusedBy(s, 2, "plugin 40-trap.wasm: instantiate")
	})
	t.Logf("status after the trapping module: %+v", s.Gateways[0].Lag)
	text := fleetCLI(t, exitNotConverged, "plugin", "status", "--redis-url", url)
	if strings.Count(text, "refused version 4, serves version 3: plugin 40-trap.wasm: instantiate") != 2 || !strings.Contains(text, "\nnot converged\n") {
		t.Fatalf("status text:\n%s", text)
	}
	waitDecision(t, gws, 403, "old chain kept after the trap")
	if out := fleetCLI(t, 0, "plugin", "remove", "40-trap", "--redis-url", url, "--sign-key", keys+".key"); !strings.Contains(out, "removed 40-trap.wasm") {
		t.Fatalf("remove: %s", out)
	}
	waitStatus(t, url, "converged after the trap's removal", func(s fleet.Status, code int) bool { return code == 0 })

	// Pushed without --sign-key: the CLI refuses it, as every gateway
	// would; added to the signed chain by a Redis writer, every gateway
	// refuses it, and the operator rolls back (a remove would sign over it).
	allow := fixtureAs(t, "allow", "25-allow.wasm")
	if out := fleetCLI(t, 1, "plugin", "push", allow, "--redis-url", url, "--cache-dir", sharedCache); !strings.Contains(out,
		"the fleet chain is signed (version 5): gateways that trust keys refuse an unsigned chain; give --sign-key") {
		t.Fatalf("unsigned push: %s", out)
	}
	allowMod, _ := os.ReadFile(allow)
	publishRaw(t, st, priv, func(ps []redis.PluginEntry) []redis.PluginEntry {
		d, _ := st.PutPluginModule(ctx, allowMod)
		return append(ps, redis.PluginEntry{File: "25-allow.wasm", Module: d})
	})
	waitStatus(t, url, "unsigned refused", func(s fleet.Status, code int) bool {
		return code == exitNotConverged && refusedBy(s, 2, "refused: not signed by a trusted key")
	})
	if out := fleetCLI(t, 1, "plugin", "remove", "25-allow", "--redis-url", url, "--sign-key", keys+".key"); !strings.Contains(out,
		"refusing to sign: the fleet chain in the store (version 6) does not verify: plugin 25-allow.wasm: refused: not signed by a trusted key") {
		t.Fatalf("remove over an unsigned plugin: %s", out)
	}
	fleetCLI(t, 0, "plugin", "rollback", "--redis-url", url, "--sign-key", keys+".key")
	waitStatus(t, url, "converged after the rollback", func(s fleet.Status, code int) bool { return code == 0 })

	// Someone who can write Redis but holds no key, keeping every
	// signature in place: a module swapped for another, a plugin dropped
	// from the chain, and an older signed version put back are all refused.
	evil, _ := os.ReadFile(fixtureAs(t, "allow", "30-deny.wasm"))
	publishRaw(t, st, nil, func(ps []redis.PluginEntry) []redis.PluginEntry {
		ps[2].Module, _ = st.PutPluginModule(ctx, evil) // 30-deny's entry now runs allow
		return ps
	})
	waitStatus(t, url, "forged module refused", func(s fleet.Status, code int) bool {
		return code == exitNotConverged && refusedBy(s, 2, "refused: chain signature does not match")
	})
	publishRaw(t, st, nil, func(ps []redis.PluginEntry) []redis.PluginEntry { return ps[:2] }) // 30-deny dropped
	waitStatus(t, url, "dropped plugin refused", func(s fleet.Status, code int) bool {
		return code == exitNotConverged && refusedBy(s, 2, "refused: chain signature does not match")
	})
	old, err := st.PluginManifest(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// Version 2's manifest and signature, as they were, under version 2.
	v2 := []redis.PluginEntry{old.Plugins[0], old.Plugins[1]}
	v2sig := signedChain(t, priv, 2, v2)
	raw, _ := json.Marshal(redis.PluginManifest{Plugins: v2, Sig: v2sig})
	if err := rawRedis(t, url).HSet(ctx, "plantgate:{plugins}:chain", "version", 2, "manifest", raw).Err(); err != nil {
		t.Fatal(err)
	}
	waitStatus(t, url, "rollback refused", func(s fleet.Status, code int) bool {
		return code == exitNotConverged && refusedBy(s, 2, "chain version 2 refused: older than version")
	})
	waitDecision(t, gws, 403, "old chain kept after the forgeries")
	for _, g := range gws {
		if !strings.Contains(g.stderr.String(), "plugin chain reload refused") || !strings.Contains(g.stderr.String(), "chain signature does not match") {
			t.Fatalf("gateway log does not name the refusal:\n%s", g.stderr)
		}
	}
	// The operator's push refuses to sign over the older chain; told to,
	// the new version goes past the one the gateways serve, so they take it.
	if out := push(1, fixtureAs(t, "deny", "30-deny.wasm")); !strings.Contains(out,
		"refusing to sign: the fleet chain in the store is version 2, older than version 7 a live gateway serves") {
		t.Fatalf("push over the rollback: %s", out)
	}
	if out := push(0, fixtureAs(t, "deny", "30-deny.wasm"), "--sign-unverified"); !strings.Contains(out, "fleet chain version 8") ||
		!strings.Contains(out, "  10-bearer-auth.wasm module "+old.Plugins[0].Module[:12]+" (NOT verified: --sign-unverified)\n") {
		t.Fatalf("push after the rollback: %s", out)
	}
	waitStatus(t, url, "converged on version 8", func(s fleet.Status, code int) bool { return code == 0 && s.Version == 8 })

	// Remove the deny-all plugin (the forged entry is 30-deny too): both
	// gateways allow again and the fleet converges.
	if out := fleetCLI(t, 0, "plugin", "remove", "30-deny", "--redis-url", url, "--sign-key", keys+".key"); !strings.Contains(out, "removed 30-deny.wasm") {
		t.Fatalf("remove: %s", out)
	}
	waitDecision(t, gws, 200, "deny-all removed")
	s = waitStatus(t, url, "converged after remove", func(s fleet.Status, code int) bool { return code == 0 && s.Converged })
	if len(s.Gateways) != 2 || s.Gateways[0].Digest != s.Digest {
		t.Fatalf("status %+v", s)
	}
	text = fleetCLI(t, 0, "plugin", "status", "--redis-url", url)
	if !strings.Contains(text, "converged: 2 gateways serve version") {
		t.Fatalf("status text:\n%s", text)
	}
	fleetCLI(t, 1, "plugin", "remove", "30-deny", "--redis-url", url, "--sign-key", keys+".key")

	// A changed config of a standard-Go plugin: every gateway applies it.
	rules := filepath.Join(t.TempDir(), "rules.json")
	if err := os.WriteFile(rules, []byte(`{"config": {"name_max": 5}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	start = time.Now()
	push(0, filepath.Join(bundledDir, "20-plant-rules.wasm"), "--config", rules)
	pushed = time.Now()
	waitDecision(t, gws, 400, "name_max 5 pushed")
	t.Logf("push of a config change → last gateway applies it: %v (of which the push command %v)", time.Since(start).Round(time.Millisecond), pushed.Sub(start).Round(time.Millisecond))
	if status, body := decision(t, gws[0]); status != 400 || !strings.HasPrefix(body, `{"error":40051,`) {
		t.Fatalf("name_max 5: %d %s", status, body)
	}

	// A stopped gateway leaves the fleet at once.
	gws[1].stop(t)
	waitStatus(t, url, "one gateway left", func(s fleet.Status, code int) bool { return len(s.Gateways) == 1 })
}

// publishRaw publishes the chain edit makes of the current one, as someone
// with write access to Redis, not the CLI, would: signed with key, or (nil)
// with the current chain signature kept.
func publishRaw(t *testing.T, st *redis.Store, key ed25519.PrivateKey, edit func([]redis.PluginEntry) []redis.PluginEntry) {
	t.Helper()
	ctx := context.Background()
	m, err := st.PluginManifest(ctx)
	if err != nil {
		t.Fatal(err)
	}
	next := redis.PluginManifest{Plugins: edit(slices.Clone(m.Plugins)), Sig: m.Sig}
	if key != nil {
		next.Sig = signedChain(t, key, m.Version+1, next.Plugins)
	}
	if _, err := st.PublishPlugins(ctx, m, next); err != nil {
		t.Fatal(err)
	}
}

func signedChain(t *testing.T, key ed25519.PrivateKey, version uint64, ps []redis.PluginEntry) []byte {
	t.Helper()
	entries := make([]pluginsig.ChainEntry, len(ps))
	for i, p := range ps {
		entries[i] = pluginsig.ChainEntry{File: p.File, Module: p.Module, Sidecar: p.Sidecar}
	}
	return pluginsig.SignChain(key, version, pluginsig.ChainDigest(entries))
}

// rawRedis is a plain client on url (a cluster client for a cluster URL,
// redis://h1:p1?addr=h2:p2), closed when the test ends.
func rawRedis(t *testing.T, url string) goredis.UniversalClient {
	t.Helper()
	var c goredis.UniversalClient
	if strings.Contains(url, "addr=") {
		opt, err := goredis.ParseClusterURL(url)
		if err != nil {
			t.Fatal(err)
		}
		c = goredis.NewClusterClient(opt)
	} else {
		opt, err := goredis.ParseURL(url)
		if err != nil {
			t.Fatal(err)
		}
		c = goredis.NewClient(opt)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// refusedBy reports whether n gateways refused the newest version with a
// reason containing why.
func refusedBy(s fleet.Status, n int, why string) bool {
	count := 0
	for _, g := range s.Gateways {
		if g.State == fleet.StateRefused && strings.Contains(g.Error, why) && g.Refused == s.Version {
			count++
		}
	}
	return count == n && len(s.Gateways) == n
}

// TestFleetFlagCombinations: the combinations serve refuses at start, each
// with a message naming the fix, and a signed plugins directory.
func TestFleetFlagCombinations(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--redis-url", srv.URL(), "--plugins-from-store", "--plugins", bundledDir}, "--plugins-from-store and --plugins: give one or the other"},
		{[]string{"--plugins-from-store"}, "--plugins-from-store needs --redis-url"},
		{[]string{"--plugins", bundledDir, "--plugin-trust-key", "/nonexistent.pub"}, "--plugin-trust-key: open /nonexistent.pub"},
	} {
		g := launchGateway(t, nil, tc.args...)
		if code := g.exit(t, time.Minute); code != 1 || !strings.Contains(g.stderr.String(), tc.want) {
			t.Errorf("%v: exit %d, want 1 and %q\n%s", tc.args, code, tc.want, g.stderr)
		}
	}

	// A directory whose plugins carry .sig files by a trusted key serves;
	// the same directory without them is refused at start.
	keys := filepath.Join(t.TempDir(), "dir")
	fleetCLI(t, 0, "plugin", "keygen", "--out", keys)
	dir := pluginsDir(t, "10-bearer-auth.wasm", "20-plant-rules.wasm")
	g := launchGateway(t, nil, "--plugins", dir, "--plugin-trust-key", keys+".pub")
	if code := g.exit(t, time.Minute); code != 1 || !strings.Contains(g.stderr.String(), "plugin 10-bearer-auth.wasm: refused: not signed by a trusted key") {
		t.Fatalf("unsigned directory: exit %d\n%s", code, g.stderr)
	}
	for _, name := range []string{"10-bearer-auth", "20-plant-rules"} {
		out := fleetCLI(t, 0, "plugin", "sign", filepath.Join(dir, name+".wasm"), "--sign-key", keys+".key")
		if want := "wrote " + filepath.Join(dir, name+".sig"); !strings.Contains(out, want) {
			t.Fatalf("plugin sign: %s, want %q", out, want)
		}
	}
	gw := startGateway(t, nil, "--plugins", dir, "--plugin-trust-key", keys+".pub", "--bootstrap-token", rolloutToken)
	if status, body := decision(t, gw); status != 200 {
		t.Fatalf("signed directory: %d %s", status, body)
	}
}
