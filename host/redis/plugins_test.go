package redis

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"
)

func testPluginChain(t *testing.T, newF newFixture) {
	f := newF(t)
	ctx := context.Background()
	if m, err := f.store.PluginManifest(ctx); err != nil || m.Version != 0 || len(m.Plugins) != 0 {
		t.Fatalf("empty store: %+v %v", m, err)
	}
	mod := []byte("\x00asm module one")
	digest, err := f.store.PutPluginModule(ctx, mod)
	sum := sha256.Sum256(mod)
	if err != nil || digest != hex.EncodeToString(sum[:]) {
		t.Fatalf("PutPluginModule = %q, %v", digest, err)
	}
	if got, err := f.raw.Get(ctx, f.key("{plugins}:module:"+digest)).Bytes(); err != nil || string(got) != string(mod) {
		t.Fatalf("stored module %q %v", got, err)
	}
	entry := PluginEntry{File: "10-a.wasm", Module: digest, Sidecar: []byte(`{"config":1}`), Sig: []byte("ed25519 x y\n")}
	v, err := f.store.PublishPlugins(ctx, PluginManifest{}, PluginManifest{Plugins: []PluginEntry{entry}, Sig: []byte("ed25519 chain sig\n")})
	if err != nil || v != 1 {
		t.Fatalf("publish = %d, %v", v, err)
	}
	// A publisher that read version 0 lost the race: nothing changes.
	if _, err := f.store.PublishPlugins(ctx, PluginManifest{}, PluginManifest{}); !errors.Is(err, ErrPluginConflict) {
		t.Fatalf("stale publish: %v", err)
	}
	if _, err := f.store.PublishPlugins(ctx, PluginManifest{Version: 1}, PluginManifest{Plugins: []PluginEntry{{File: "20-b.wasm", Module: "00ff"}}}); err == nil {
		t.Fatal("published a manifest naming a module not stored")
	}
	if n, err := f.store.PluginVersion(ctx); err != nil || n != 1 {
		t.Fatalf("version %d %v", n, err)
	}
	m, err := f.store.PluginManifest(ctx)
	if err != nil || m.Version != 1 || len(m.Plugins) != 1 || m.Plugins[0].File != "10-a.wasm" ||
		string(m.Plugins[0].Sidecar) != `{"config":1}` || string(m.Plugins[0].Sig) != "ed25519 x y\n" || string(m.Sig) != "ed25519 chain sig\n" {
		t.Fatalf("manifest %+v %v", m, err)
	}
	if got, err := f.store.PluginModule(ctx, digest); err != nil || string(got) != string(mod) {
		t.Fatalf("PluginModule %q %v", got, err)
	}
	// Rewritten in place by someone with write access to Redis.
	if err := f.raw.Set(ctx, f.key("{plugins}:module:"+digest), "\x00asm evil", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if _, err := f.store.PluginModule(ctx, digest); err == nil {
		t.Fatal("a module that no longer hashes to its key was read")
	}
	if v, err := f.store.PublishPlugins(ctx, PluginManifest{Version: 1}, PluginManifest{}); err != nil || v != 2 {
		t.Fatalf("publish empty chain = %d, %v", v, err)
	}
	// A publisher may skip versions, never go back.
	if v, err := f.store.PublishPlugins(ctx, PluginManifest{Version: 2}, PluginManifest{Version: 9}); err != nil || v != 9 {
		t.Fatalf("publish version 9 = %d, %v", v, err)
	}
}

func testFleet(t *testing.T, newF newFixture) {
	f := newF(t)
	ctx := context.Background()
	started := time.UnixMilli(1_700_000_000_000).UTC()
	a := Heartbeat{ID: "a", Host: "h1", Started: started, Beat: started, Version: 3, Digest: "d3", State: "serving"}
	b := Heartbeat{ID: "b", Host: "h2", Started: started, Beat: started, Version: 2, Digest: "d2", State: "refused", Error: "boom", Refused: 3}
	for _, hb := range []Heartbeat{b, a} {
		if err := f.store.Beat(ctx, hb, time.Minute); err != nil {
			t.Fatal(err)
		}
	}
	if ttl, err := f.raw.PTTL(ctx, f.key("{fleet}:gateway:a")).Result(); err != nil || ttl <= 0 || ttl > time.Minute {
		t.Fatalf("heartbeat TTL %v %v", ttl, err)
	}
	got, err := f.store.Gateways(ctx)
	if err != nil || !slices.Equal(got, []Heartbeat{a, b}) {
		t.Fatalf("Gateways = %+v, %v", got, err)
	}
	if err := f.store.Leave(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	// An expired record: its id is pruned from the index.
	if err := f.raw.Del(ctx, f.key("{fleet}:gateway:b")).Err(); err != nil {
		t.Fatal(err)
	}
	if got, err := f.store.Gateways(ctx); err != nil || len(got) != 0 {
		t.Fatalf("after leave and expiry: %+v %v", got, err)
	}
	if n, err := f.raw.SCard(ctx, f.key("{fleet}:gateways")).Result(); err != nil || n != 0 {
		t.Fatalf("index still holds %d ids (%v)", n, err)
	}
}

// testPluginModuleGrace checks what becomes of modules a publish drops:
// they expire ModuleGrace later, while the ones named stay; naming one
// again, or storing it again, keeps it; one no manifest ever named (pushed
// but not yet published) is left alone.
func testPluginModuleGrace(t *testing.T, newF newFixture) {
	f := newF(t)
	ctx := context.Background()
	put := func(content string) string {
		t.Helper()
		d, err := f.store.PutPluginModule(ctx, []byte(content))
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	// publish replaces the chain with one naming modules, on the chain it
	// reads, as the CLI does.
	publish := func(modules ...string) uint64 {
		t.Helper()
		base, err := f.store.PluginManifest(ctx)
		if err != nil {
			t.Fatal(err)
		}
		m := PluginManifest{}
		for i, d := range modules {
			m.Plugins = append(m.Plugins, PluginEntry{File: fmt.Sprintf("%02d-p.wasm", 10*(i+1)), Module: d})
		}
		v, err := f.store.PublishPlugins(ctx, base, m)
		if err != nil {
			t.Fatalf("publish %v on %d: %v", modules, base.Version, err)
		}
		return v
	}
	// ttl is the module's time to live: -1 for none, 0 when gone.
	ttl := func(d string) time.Duration {
		t.Helper()
		key := f.key("{plugins}:module:" + d)
		n, err := f.raw.Exists(ctx, key).Result()
		if err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			return 0
		}
		left, err := f.raw.PTTL(ctx, key).Result()
		if err != nil {
			t.Fatal(err)
		}
		return left
	}
	wantKept := func(what string, ds ...string) {
		t.Helper()
		for _, d := range ds {
			if left := ttl(d); left != -1 {
				t.Fatalf("%s: module %.8s has TTL %v, want kept (-1)", what, d, left)
			}
		}
	}
	wantExpiring := func(what string, d string) {
		t.Helper()
		if left := ttl(d); left <= ModuleGrace-time.Minute || left > ModuleGrace {
			t.Fatalf("%s: module %.8s has TTL %v, want about %v", what, d, left, ModuleGrace)
		}
	}
	a, b, c, loose := put("\x00asm a"), put("\x00asm b"), put("\x00asm c"), put("\x00asm pushed, never published")
	publish(a, b)
	wantKept("v1 names a and b", a, b, loose)
	publish(a, c)
	// b is v1's, the chain v2 replaced: kept for a rollback to it.
	wantKept("v2 names a and c, replaced v1 with b", a, b, c, loose)
	publish(c)
	wantKept("v3 names c, replaced v2 with a", a, c)
	wantExpiring("v3 dropped v1's b, which neither v3 nor v2 names", b)
	// Named again while expiring: kept.
	publish(a, b, c)
	wantKept("v4 names b again", a, b, c)
	publish(c)
	wantKept("v5 replaced v4 with a and b", a, b, c)
	// Dropped, then stored again (a push of the same module): kept.
	v := publish(c)
	wantExpiring("v6 dropped v4's a", a)
	wantExpiring("v6 dropped v4's b", b)
	put("\x00asm a")
	wantKept("a stored again", a, c)
	// A stale publish drops nothing, not even what its stale base names.
	stale := PluginManifest{Version: v - 1, Plugins: []PluginEntry{{File: "10-p.wasm", Module: c}}}
	if _, err := f.store.PublishPlugins(ctx, stale, PluginManifest{}); !errors.Is(err, ErrPluginConflict) {
		t.Fatalf("stale publish: %v", err)
	}
	wantKept("after a stale publish", c)
	if f.mr != nil {
		f.mr.FastForward(ModuleGrace)
		if left := ttl(b); left != 0 {
			t.Fatalf("b still stored %v after its grace", left)
		}
		wantKept("after b's grace", a, c, loose)
	}
}
