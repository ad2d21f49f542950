package wasm

import (
	"context"
	"crypto/ed25519"
	"os"
	"path/filepath"
	"strings"
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
