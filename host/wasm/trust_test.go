package wasm

import (
	"context"
	"crypto/ed25519"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/plantgate/plantgate/host/pluginsig"
)

// TestDirSignatures: with trusted keys, a directory plugin loads only with
// a valid NN-name.sig beside it; an unsigned, tampered or untrusted plugin
// is refused naming the plugin and the reason, and a reload keeps the
// signed chain.
func TestDirSignatures(t *testing.T) {
	t.Parallel()
	_, priv, _ := ed25519.GenerateKey(nil)
	_, other, _ := ed25519.GenerateKey(nil)
	opts, _ := testOptions()
	opts.Limits = Limits{Instances: 1}
	opts.Trust = pluginsig.NewKeyring(priv.Public().(ed25519.PublicKey))
	ctx := context.Background()

	dir := copyFixtures(t, map[string]string{"10-auth.wasm": "principal"})
	module, _ := os.ReadFile(filepath.Join(dir, "10-auth.wasm"))
	side := []byte(`{"limits": {"instances": 1}}`)
	write := func(name string, b []byte) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("10-auth.json", side)

	if _, err := Load(ctx, Dir(dir), opts); err == nil || !strings.Contains(err.Error(), "plugin 10-auth.wasm: refused: not signed by a trusted key") {
		t.Fatalf("unsigned: %v", err)
	}
	write("10-auth.sig", pluginsig.Sign(other, "10-auth", module, side))
	if _, err := Load(ctx, Dir(dir), opts); err == nil || !strings.Contains(err.Error(), "signed only by untrusted keys") {
		t.Fatalf("untrusted key: %v", err)
	}
	write("10-auth.sig", pluginsig.Sign(priv, "10-auth", module, side))
	r, err := NewReloader(ctx, Dir(dir), opts, ReloadOptions{})
	if err != nil {
		t.Fatalf("signed: %v", err)
	}
	defer r.Close(ctx)

	// The sidecar changed after signing: refused, the signed chain stays.
	write("10-auth.json", []byte(`{"limits": {"instances": 2}}`))
	if _, err := r.Reload(ctx); err == nil || !strings.Contains(err.Error(), "plugin 10-auth.wasm: refused: signature does not match") {
		t.Fatalf("tampered sidecar: %v", err)
	}
	if _, plugins := r.Snapshot(); len(plugins) != 1 || plugins[0].Info.Limits.Instances != 1 {
		t.Fatalf("chain after the refusal: %+v", plugins)
	}
	// A signature file without its module is a naming mistake.
	write("20-x.sig", []byte("ed25519 a b\n"))
	if _, err := r.Reload(ctx); err == nil || !strings.Contains(err.Error(), "plugin 20-x.sig: no 20-x.wasm beside it") {
		t.Fatalf("stray .sig: %v", err)
	}
}

// versioned is a Source whose snapshot the test sets, as the store's.
type versioned struct {
	mu   sync.Mutex
	snap Snapshot
}

func (v *versioned) String() string { return "test store" }

func (v *versioned) Snapshot(context.Context) (Snapshot, error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.snap, nil
}

func (v *versioned) set(s Snapshot) {
	v.mu.Lock()
	v.snap = s
	v.mu.Unlock()
}

// TestVersionedChainSignature: with trusted keys, a versioned source's
// chain must carry a valid chain signature over its version and digest,
// and never go back to an older version.
func TestVersionedChainSignature(t *testing.T) {
	t.Parallel()
	opts, priv := trustingOptions()
	ctx := context.Background()
	auth, _ := os.ReadFile(fixture("principal"))
	deny, _ := os.ReadFile(fixture("deny"))
	file := func(name string, mod []byte) File {
		return File{Name: name + ".wasm", Module: mod, Sig: pluginsig.Sign(priv, name, mod, nil)}
	}
	signed := func(version uint64, files ...File) Snapshot { return signedSnapshot(priv, version, files...) }
	src := &versioned{}
	src.set(signed(3, file("10-auth", auth)))
	r, err := NewReloader(ctx, src, opts, ReloadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close(ctx)

	two := []File{file("10-auth", auth), file("20-deny", deny)}
	for name, tc := range map[string]struct {
		snap Snapshot
		want string
	}{
		"unsigned chain":       {Snapshot{Version: 4, Files: two}, "chain version 4 refused: not signed by a trusted key"},
		"signature of another": {Snapshot{Version: 4, Files: two, Sig: signed(4, two[:1]...).Sig}, "chain version 4 refused: chain signature does not match"},
		"signed for version 3": {Snapshot{Version: 4, Files: two, Sig: signed(3, two...).Sig}, "chain version 4 refused: chain signature does not match"},
		"older version":        {signed(2, two...), "chain version 2 refused: older than version 3 in force"},
	} {
		src.set(tc.snap)
		if _, err := r.Reload(ctx); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", name, err, tc.want)
		}
		if st, _ := r.Snapshot(); st.Version != 3 || files(r) != "10-auth.wasm" {
			t.Errorf("%s: serves version %d %s", name, st.Version, files(r))
		}
	}
	src.set(signed(4, two...))
	if changed, err := r.Reload(ctx); !changed || err != nil {
		t.Fatalf("signed version 4: %v %v", changed, err)
	}
	if st, _ := r.Snapshot(); st.Version != 4 || st.Digest != ChainDigest(two) {
		t.Fatalf("status %+v", st)
	}
}

// trustingOptions are test options (one instance per plugin) that trust
// one new key, and its private half.
func trustingOptions() (Options, ed25519.PrivateKey) {
	_, priv, _ := ed25519.GenerateKey(nil)
	opts, _ := testOptions()
	opts.Limits = Limits{Instances: 1}
	opts.Trust = pluginsig.NewKeyring(priv.Public().(ed25519.PublicKey))
	return opts, priv
}

// signedSnapshot is a store's chain at version, signed with priv.
func signedSnapshot(priv ed25519.PrivateKey, version uint64, files ...File) Snapshot {
	return Snapshot{Version: version, Files: files, Sig: pluginsig.SignChain(priv, version, ChainDigest(files))}
}
