package main

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"testing"

	"github.com/plantgate/plantgate/host/wasm"
)

// TestInsecureNoAuthRefusesAuthorizePlugins: --insecure-no-auth hands the
// authorize phase no credential, so an authorize plugin would deny every
// request, or worse let a plugin that ignores the credential decide alone.
// serve refuses the combination at start, and a reload that would add one
// is refused while the chain in force keeps serving.
func TestInsecureNoAuthRefusesAuthorizePlugins(t *testing.T) {
	t.Parallel()
	dir := pluginsDir(t, "10-bearer-auth.wasm", "20-plant-rules.wasm")
	_, errOut, code := runCLI(t, "", "serve", "--listen", "127.0.0.1:0", "--insecure-no-auth", "--plugins", dir, "--cache-dir", sharedCache, "--log-level", "error")
	want := "plantgate: refusing to start: an authorize plugin is loaded while serve runs with --insecure-no-auth, which hands the authorize phase no credential: 10-bearer-auth.wasm in " + dir + "; remove it or --insecure-no-auth\n"
	if code != 1 || errOut != want {
		t.Fatalf("serve --insecure-no-auth with bearer-auth: exit %d\n%q\nwant\n%q", code, errOut, want)
	}

	dir = pluginsDir(t, "20-plant-rules.wasm")
	m := &Main{Listen: "127.0.0.1:0", PluginsDir: dir, InsecureNoAuth: true, CacheDir: sharedCache, Logger: slog.New(slog.DiscardHandler)}
	if err := m.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	base := "http://" + m.Addr().String()
	b, err := os.ReadFile(filepath.Join(bundledDir, "10-bearer-auth.wasm"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "10-bearer-auth.wasm"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	err = m.Reload(context.Background())
	if !errors.Is(err, wasm.ErrAuthorizeForbidden) {
		t.Fatalf("reload adding bearer-auth under --insecure-no-auth: %v", err)
	}
	if status, body := post(t, base, "", `{"id":1,"name":"Fern"}`); status != 200 || body != `{"name":"Fern"}` {
		t.Fatalf("the chain in force after the refused reload: %d %s", status, body)
	}
}
