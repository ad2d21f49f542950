package wasm

import (
	"context"
	"os"
	"strings"
	"testing"

	"github.com/plantgate/plantgate/host/pluginsig"
)

// TestCheckIsTheGatewaysCheck: for each snapshot, Check refuses with
// exactly the error a Reloader with the same options gives at its first
// load, and accepts what it accepts: the fleet CLI and the gateway run one
// acceptance check. A store snapshot at version 0 needs its chain
// signature like any other; only a directory's has none.
func TestCheckIsTheGatewaysCheck(t *testing.T) {
	t.Parallel()
	opts, priv := trustingOptions()
	ctx := context.Background()
	auth, _ := os.ReadFile(fixture("principal"))
	deny, _ := os.ReadFile(fixture("deny"))
	trap, _ := os.ReadFile(fixture("inittrap"))
	file := func(name string, mod []byte, sidecar string) File {
		f := File{Name: name + ".wasm", Module: mod, Sig: pluginsig.Sign(priv, name, mod, []byte(sidecar))}
		if sidecar != "" {
			f.Sidecar = []byte(sidecar)
		}
		return f
	}
	signed := func(version uint64, files ...File) Snapshot { return signedSnapshot(priv, version, files...) }
	authF, denyF := file("10-auth", auth, ""), file("20-deny", deny, "")
	canary := file("20-deny.canary", deny, `{"canary_percent": 10}`)
	unsignedDeny := denyF
	unsignedDeny.Sig = nil
	require := ReloadOptions{RequireAuthorize: true}
	for _, tc := range []struct {
		name  string
		snap  Snapshot
		ropts ReloadOptions
		want  string // "": accepted
	}{
		{"signed", signed(3, authF, denyF), require, ""},
		{"version 0, unsigned", Snapshot{Files: []File{authF}}, require, "chain version 0 refused: not signed by a trusted key: no signature"},
		{"version 0, another version's signature", Snapshot{Files: []File{authF}, Sig: signed(2, authF, denyF).Sig}, require, "chain version 0 refused: chain signature does not match"},
		{"empty store", Snapshot{}, require, "chain version 0 refused: not signed by a trusted key: no signature (the store holds no chain: push plugins with plugin push --sign-key)"},
		{"directory, no chain signature", Snapshot{Files: []File{authF, denyF}, Directory: true}, require, ""},
		{"unsigned plugin", signed(3, authF, unsignedDeny), require, "plugin 20-deny.wasm: refused: not signed by a trusted key: no signature"},
		{"module traps", signed(3, authF, file("30-trap", trap, "")), require, "plugin 30-trap.wasm: instantiate"},
		{"canary alone", signed(3, authF, canary), require, "plugin 20-deny.canary.wasm: a canary needs the live plugin 20-deny.wasm in its slot"},
		{"authorize under --insecure-no-auth", signed(3, authF), ReloadOptions{ForbidAuthorize: true}, "an authorize plugin is loaded while serve runs with --insecure-no-auth, which hands the authorize phase no credential: 10-auth.wasm in test store"},
		{"nothing left", signed(3), require, "no authorize plugin would be left in test store"},
	} {
		_, checked := Check(ctx, tc.snap, opts, tc.ropts, "test store")
		r, loaded := NewReloader(ctx, &versioned{snap: tc.snap}, opts, tc.ropts)
		if loaded == nil {
			r.Close(ctx)
		}
		switch {
		case tc.want == "" && (checked != nil || loaded != nil):
			t.Errorf("%s: Check %v, Reloader %v; want both accepted", tc.name, checked, loaded)
		case tc.want != "" && (checked == nil || loaded == nil || checked.Error() != loaded.Error()):
			t.Errorf("%s: Check %v, Reloader %v; want the same refusal", tc.name, checked, loaded)
		case tc.want != "" && !strings.Contains(checked.Error(), tc.want):
			t.Errorf("%s: %v, want %q", tc.name, checked, tc.want)
		}
	}
}
