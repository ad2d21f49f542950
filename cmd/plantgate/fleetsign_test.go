package main

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/plantgate/plantgate/host/fleet"
	"github.com/plantgate/plantgate/host/pluginsig"
	"github.com/plantgate/plantgate/host/redis"
	"github.com/plantgate/plantgate/host/redis/redistest"
)

// Hostile cases of a signed fleet: someone who can write the store's Redis
// but holds no trusted key tries to have the operator's own signing
// commands sign a policy of theirs, or a restarted gateway load it.

const chainKey = "plantgate:{plugins}:chain"

// signedFleet is a real redis-server whose chain an operator built with
// plugin push --sign-key: 10-bearer-auth (version 1), 20-plant-rules
// (version 2), then more pushes of 20-plant-rules with a config for each
// of configs. It returns the store's URL, the key pair's path prefix and
// an open store.
func signedFleet(t *testing.T, configs ...string) (url, keys string, st *redis.Store) {
	t.Helper()
	url = redistest.Start(t).URL()
	keys = filepath.Join(t.TempDir(), "ops")
	fleetCLI(t, 0, "plugin", "keygen", "--out", keys)
	for _, name := range []string{"10-bearer-auth.wasm", "20-plant-rules.wasm"} {
		fleetCLI(t, 0, "plugin", "push", filepath.Join(bundledDir, name), "--redis-url", url, "--sign-key", keys+".key", "--cache-dir", sharedCache)
	}
	for _, c := range configs {
		file := filepath.Join(t.TempDir(), "rules.json")
		if err := os.WriteFile(file, []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
		fleetCLI(t, 0, "plugin", "push", filepath.Join(bundledDir, "20-plant-rules.wasm"), "--config", file,
			"--redis-url", url, "--sign-key", keys+".key", "--cache-dir", sharedCache)
	}
	st, err := redis.Open(context.Background(), url, redis.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return url, keys, st
}

// chainFields reads the chain's hash as it is in Redis: what a refused
// command must leave exactly as it was.
func chainFields(t *testing.T, url string) map[string]string {
	t.Helper()
	h, err := rawRedis(t, url).HGetAll(context.Background(), chainKey).Result()
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// refused runs a fleet command that must exit 1 with every one of want in
// its output and leave the chain in Redis untouched.
func refused(t *testing.T, url string, want []string, args ...string) {
	t.Helper()
	before := chainFields(t, url)
	out := fleetCLI(t, 1, args...)
	for _, w := range want {
		if !strings.Contains(out, w) {
			t.Errorf("plantgate %s: output lacks %q:\n%s", strings.Join(args, " "), w, out)
		}
	}
	after := chainFields(t, url)
	for k, v := range before {
		if after[k] != v {
			t.Errorf("plantgate %s changed the chain's %s:\n%s\n→\n%s", strings.Join(args, " "), k, v, after[k])
		}
	}
}

// TestRollbackVerifiesWhatItSigns: a Redis writer rewrites the chain's
// previous field (the rollback target) to drop 20-plant-rules; the
// operator's rollback --sign-key refuses to sign it, saying why, and
// publishes nothing. The genuine previous chain rolls back, the command
// saying what it signs.
func TestRollbackVerifiesWhatItSigns(t *testing.T) {
	t.Parallel()
	url, keys, st := signedFleet(t, `{"config": {"name_max": 5}}`)
	ctx := context.Background()
	m, err := st.PluginManifest(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if m.Version != 3 || m.Previous == nil || m.Previous.Version != 2 || len(m.Previous.Plugins) != 2 {
		t.Fatalf("chain %+v, previous %+v", m, m.Previous)
	}
	genuine := chainFields(t, url)["previous"]
	rollback := []string{"plugin", "rollback", "--redis-url", url, "--sign-key", keys + ".key", "--cache-dir", sharedCache}
	for name, forged := range map[string]map[string]any{
		// Version 2's chain signature kept, plant-rules dropped.
		"plugin dropped": {"version": 2, "plugins": m.Previous.Plugins[:1], "sig": m.Previous.Sig},
		// No signature at all.
		"unsigned": {"version": 2, "plugins": m.Previous.Plugins[:1]},
	} {
		raw, _ := json.Marshal(forged)
		if err := rawRedis(t, url).HSet(ctx, chainKey, "previous", raw).Err(); err != nil {
			t.Fatal(err)
		}
		want := map[string]string{"plugin dropped": "chain signature does not match", "unsigned": "not signed by a trusted key"}[name]
		refused(t, url, []string{"refusing to sign the chain of version 2 (the rollback target): chain version 2 refused: " + want}, rollback...)
	}

	if err := rawRedis(t, url).HSet(ctx, chainKey, "previous", genuine).Err(); err != nil {
		t.Fatal(err)
	}
	out := fleetCLI(t, 0, rollback...)
	for _, want := range []string{
		"signed fleet chain version 4:\n",
		"  10-bearer-auth.wasm module " + m.Previous.Plugins[0].Module[:12] + " (signature verified)\n",
		"  20-plant-rules.wasm module " + m.Previous.Plugins[1].Module[:12] + " (signature verified)\n",
		"rolled back from version 3 to the chain of version 2 (10-bearer-auth.wasm, 20-plant-rules.wasm): fleet chain version 4\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("rollback output lacks %q:\n%s", want, out)
		}
	}
}

// TestPromoteVerifiesWhatItSigns: an unsigned permissive shadow planted in
// the store (chain signature kept), or one signed with the writer's own
// key (chain signed again with it), never becomes a signed live plugin
// through promote --sign-key.
func TestPromoteVerifiesWhatItSigns(t *testing.T) {
	t.Parallel()
	url, keys, st := signedFleet(t)
	ctx := context.Background()
	allow, _ := os.ReadFile(fixtureAs(t, "allow", "20-plant-rules.shadow.wasm"))
	_, evil, _ := ed25519.GenerateKey(nil)
	promote := []string{"plugin", "promote", "plant-rules", "--redis-url", url, "--sign-key", keys + ".key", "--cache-dir", sharedCache}

	// Unsigned, the chain signature of version 2 left in place.
	publishRaw(t, st, nil, func(ps []redis.PluginEntry) []redis.PluginEntry {
		d, _ := st.PutPluginModule(ctx, allow)
		return append(ps, redis.PluginEntry{File: "20-plant-rules.shadow.wasm", Module: d})
	})
	refused(t, url, []string{"refusing to sign: the fleet chain in the store (version 3) does not verify: chain version 3 refused: chain signature does not match"}, promote...)

	// Signed, and the chain signed, by a key nobody trusts.
	publishRaw(t, st, evil, func(ps []redis.PluginEntry) []redis.PluginEntry {
		ps[2].Sig = pluginsig.Sign(evil, "20-plant-rules.shadow", allow, nil)
		return ps
	})
	refused(t, url, []string{"refusing to sign: the fleet chain in the store (version 4) does not verify: chain version 4 refused: not signed by a trusted key: signed only by untrusted keys"}, promote...)

	// The operator's way out: roll back to the version before, which
	// verifies (the writer's version 3 is what it replaced).
	m, _ := st.PluginManifest(ctx)
	if m.Previous.Version != 3 {
		t.Fatalf("previous %d", m.Previous.Version)
	}
	refused(t, url, []string{"refusing to sign the chain of version 3 (the rollback target): chain version 3 refused: chain signature does not match"},
		"plugin", "rollback", "--redis-url", url, "--sign-key", keys+".key", "--cache-dir", sharedCache)
}

// TestPublishRefusesWhatGatewaysRefuse: fleet commands that would publish
// a chain the gateways refuse (they keep the old one; a restarted one does
// not start) refuse before publishing, with the gateway's reason.
func TestPublishRefusesWhatGatewaysRefuse(t *testing.T) {
	t.Parallel()
	url, keys, _ := signedFleet(t)
	rules := filepath.Join(bundledDir, "20-plant-rules.wasm")
	store := []string{"--redis-url", url, "--cache-dir", sharedCache}
	signed := append([]string{"--sign-key", keys + ".key"}, store...)

	// Unsigned on a signed fleet: push, remove, promote, rollback.
	const unsigned = "the fleet chain is signed (version 2): gateways that trust keys refuse an unsigned chain; give --sign-key"
	refused(t, url, []string{unsigned}, append([]string{"plugin", "push", rules, "--shadow"}, store...)...)
	refused(t, url, []string{unsigned}, append([]string{"plugin", "remove", "20-plant-rules"}, store...)...)
	refused(t, url, []string{unsigned}, append([]string{"plugin", "rollback"}, store...)...)
	fleetCLI(t, 0, append([]string{"plugin", "push", fixtureAs(t, "deny", "20-plant-rules.wasm"), "--canary", "50"}, signed...)...)
	refused(t, url, []string{strings.Replace(unsigned, "version 2", "version 3", 1)}, append([]string{"plugin", "promote", "plant-rules"}, store...)...)

	// A live plugin removed while its canary stays.
	refused(t, url, []string{"not published: gateways would refuse this chain: plugin 20-plant-rules.canary.wasm: a canary needs the live plugin 20-plant-rules.wasm in its slot"},
		append([]string{"plugin", "remove", "20-plant-rules"}, signed...)...)
	// The only authorize plugin removed.
	refused(t, url, []string{"not published: gateways would refuse this chain: no authorize plugin would be left"},
		append([]string{"plugin", "remove", "10-bearer-auth"}, signed...)...)

	// What gateways accept still goes through.
	out := fleetCLI(t, 0, append([]string{"plugin", "promote", "plant-rules"}, signed...)...)
	if !strings.Contains(out, "promoted 20-plant-rules.canary.wasm to 20-plant-rules.wasm") || !strings.Contains(out, "  20-plant-rules.wasm module ") ||
		!strings.Contains(out, "(signed now)\n") || !strings.Contains(out, "  10-bearer-auth.wasm module ") {
		t.Fatalf("promote: %s", out)
	}

	// Gateways running --insecure-no-auth refuse any authorize plugin.
	refused(t, url, []string{"not published: gateways would refuse this chain: an authorize plugin is loaded while serve runs with --insecure-no-auth, which hands the authorize phase no credential: 10-bearer-auth.wasm"},
		append([]string{"plugin", "remove", "20-plant-rules", "--insecure-no-auth"}, signed...)...)
	// Signed by a key the gateways (--plugin-trust-key) do not trust.
	other := filepath.Join(t.TempDir(), "other")
	fleetCLI(t, 0, "plugin", "keygen", "--out", other)
	refused(t, url, []string{"not published: gateways would refuse this chain: chain version 5 refused: not signed by a trusted key: signed only by untrusted keys"},
		append([]string{"plugin", "remove", "20-plant-rules", "--plugin-trust-key", other + ".pub"}, signed...)...)
}

// TestChainVersionZeroRefused: a Redis writer sets the chain to version 0
// with a subset of the signed plugins (plant-rules dropped): a trusting
// gateway that restarts refuses to start; an older signed version put
// back is never signed over by the operator's next push.
func TestChainVersionZeroRefused(t *testing.T) {
	t.Parallel()
	url, keys, st := signedFleet(t)
	ctx := context.Background()
	args := []string{"--redis-url", url, "--plugins-from-store", "--plugin-trust-key", keys + ".pub", "--bootstrap-token", rolloutToken}
	g := startGateway(t, nil, args...)
	long := `{"id":8,"name":"` + strings.Repeat("n", 150) + `"}`
	if status, body := post(t, g.base, rolloutToken, long); status != 400 {
		t.Fatalf("150-character name before: %d %s", status, body)
	}
	m, err := st.PluginManifest(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for name, sig := range map[string][]byte{"unsigned": nil, "version 2's signature": m.Sig} {
		raw, _ := json.Marshal(redis.PluginManifest{Plugins: m.Plugins[:1], Sig: sig})
		if err := rawRedis(t, url).HSet(ctx, chainKey, "version", 0, "manifest", raw).Err(); err != nil {
			t.Fatal(err)
		}
		g.stop(t)
		g = launchGateway(t, nil, args...)
		want := map[string]string{"unsigned": "not signed by a trusted key", "version 2's signature": "chain signature does not match"}[name]
		if code := g.exit(t, time.Minute); code != 1 || !strings.Contains(g.stderr.String(), "load plugins: chain version 0 refused: "+want) {
			t.Fatalf("%s: restart on version 0: exit %d\n%s", name, code, g.stderr)
		}
		if err := rawRedis(t, url).HSet(ctx, chainKey, "version", 2, "manifest", mustJSON(t, m)).Err(); err != nil {
			t.Fatal(err)
		}
		g = startGateway(t, nil, args...)
	}

	// Version 1's chain (bearer-auth alone) and its signature put back: the
	// gateway keeps version 2, and the operator's next push refuses to sign
	// over the older chain.
	v1 := m.Previous
	raw, _ := json.Marshal(redis.PluginManifest{Plugins: v1.Plugins, Sig: v1.Sig})
	if err := rawRedis(t, url).HSet(ctx, chainKey, "version", 1, "manifest", raw).Err(); err != nil {
		t.Fatal(err)
	}
	waitStatus(t, url, "older version refused", func(s fleet.Status, code int) bool {
		return code == exitNotConverged && refusedBy(s, 1, "chain version 1 refused: older than version 2")
	})
	refused(t, url, []string{"refusing to sign: the fleet chain in the store is version 1, older than version 2 a live gateway serves: someone put an older chain back"},
		"plugin", "push", fixtureAs(t, "deny", "30-deny.wasm"), "--redis-url", url, "--sign-key", keys+".key", "--cache-dir", sharedCache)
	if status, body := post(t, g.base, rolloutToken, long); status != 400 {
		t.Fatalf("150-character name after: %d %s", status, body)
	}
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
