package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/plantgate/plantgate/host/wasm/wasmtest"
)

// TestPluginNewCheck runs the real binary as a newcomer does, from the
// repository's bin/ and not on PATH, then the project's `make build` and
// the exact `make check` line it printed: check must find the binary that
// wrote the project. On PATH, the line stays the short one.
func TestPluginNewCheck(t *testing.T) {
	t.Parallel()
	bin := buildBinary(t)
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Fatal(err)
	}
	makeBin, err := exec.LookPath("make")
	if err != nil {
		t.Fatal(err)
	}
	// go, make and a shell, but no plantgate.
	path := strings.Join([]string{filepath.Dir(goBin), filepath.Dir(makeBin), "/bin", "/usr/bin"}, string(os.PathListSeparator))
	for _, c := range []struct {
		path, want string
	}{
		{path, "  make check PLANTGATE=" + bin + "    # plantgate is not on PATH: check with the binary that wrote this\n"},
		{filepath.Dir(bin) + string(os.PathListSeparator) + path, "  make check    # plantgate plugin check 50-cap.wasm\n"},
	} {
		work := filepath.Join(t.TempDir(), "cap")
		cmd := exec.Command(bin, "plugin", "new", "cap", work)
		cmd.Env = append(os.Environ(), "PATH="+c.path)
		out, err := cmd.Output()
		if err != nil || !strings.Contains(string(out), "\n"+c.want) {
			t.Fatalf("PATH %s: plugin new: %v\n%s\nwant the line %q", c.path, err, out, c.want)
		}
		if c.path != path {
			continue
		}
		args := strings.Fields(strings.TrimPrefix(strings.SplitN(c.want, "#", 2)[0], "  make "))
		mk := exec.Command("make", args...)
		mk.Dir = work
		mk.Env = append(os.Environ(), append(offline, "PATH="+c.path)...)
		b, err := mk.CombinedOutput()
		if err != nil || !strings.Contains(string(b), "\nok                serve would load this plugin\n") {
			t.Fatalf("make %v: %v\n%s", args, err, b)
		}
	}
}

// offline is the environment a scaffold builds in: no module proxy, no
// workspace, and modules resolved from the project's go.mod alone, so the
// build can use nothing of this repository but what the binary copied.
var offline = []string{"GOFLAGS=-mod=mod", "GOPROXY=off", "GOWORK=off"}

// TestPluginNew makes a plugin project outside the repository, runs its
// tests and its Makefile's wasm build there, offline, and serves the module
// it built in a gateway: its rule answers a real request.
func TestPluginNew(t *testing.T) {
	t.Parallel()
	work := filepath.Join(t.TempDir(), "name-cap")
	out, errOut, code := runCLI(t, "", "plugin", "new", "name-cap", work)
	// In process, plantgate is this test binary: TestPluginNewCheck runs
	// the real one, on PATH and not.
	checkHint := "    # plantgate plugin check 50-name-cap.wasm"
	if exe, err := os.Executable(); err == nil && strings.Contains(out, "PLANTGATE="+exe) {
		checkHint = " PLANTGATE=" + exe + "    # plantgate is not on PATH: check with the binary that wrote this"
	}
	want := "wrote " + work + `: main.go (one validate rule), main_test.go, Makefile, 50-name-cap.json, go.mod, plantgate-sdk/
next:
  cd ` + work + `
  make test     # the rule's tests, natively
  make build    # 50-name-cap.wasm
  make check` + checkHint + `
then copy 50-name-cap.json and 50-name-cap.wasm into the gateway's plugins directory
`
	if code != 0 || out != want || errOut != "" {
		t.Fatalf("plugin new: exit %d\nstdout %s\nstderr %s\nwant stdout %s", code, out, errOut, want)
	}
	for _, target := range []string{"test", "build"} {
		make := exec.Command("make", target)
		make.Dir = work
		make.Env = append(os.Environ(), offline...)
		b, err := make.CombinedOutput()
		if err != nil {
			t.Fatalf("make %s: %v\n%s", target, err, b)
		}
		if target == "test" && !strings.Contains(string(b), "ok  \tname-cap\t") {
			t.Fatalf("make test ran no test:\n%s", b)
		}
	}

	dir := pluginsDir(t, "10-bearer-auth.wasm")
	for _, f := range []string{"50-name-cap.json", "50-name-cap.wasm"} {
		b, err := os.ReadFile(filepath.Join(work, f))
		if err != nil {
			t.Fatal(err)
		}
		writeFile(t, filepath.Join(dir, f), string(b))
	}
	m := startMain(t, dir, nil)
	base := "http://" + m.Addr().String()
	long := strings.Repeat("n", 41)
	if status, body := post(t, base, testToken, `{"id":1,"name":"`+long+`"}`); status != 400 || body != `{"error":40060,"message":"plant name is longer than 40 bytes"}` {
		t.Fatalf("41-byte name: %d %s; want 400 and the scaffold's deny", status, body)
	}
	if status, body := post(t, base, testToken, `{"id":2,"name":"`+long[:40]+`"}`); status != 200 {
		t.Fatalf("40-byte name: %d %s; want 200", status, body)
	}
}

func TestPluginNewRefuses(t *testing.T) {
	t.Parallel()
	full := t.TempDir()
	writeFile(t, filepath.Join(full, "main.go"), "package main\n")
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"Name-Cap", t.TempDir()}, `plantgate: plugin name "Name-Cap": want a lower-case letter, then up to 39 of a-z, 0-9 and -` + "\n"},
		{[]string{"10-cap", t.TempDir()}, `plantgate: plugin name "10-cap": want a lower-case letter, then up to 39 of a-z, 0-9 and -` + "\n"},
		{[]string{"cap", full}, "plantgate: " + full + " is not empty: plugin new writes only into a new or empty directory\n"},
		{nil, "plantgate: want NAME and an optional DIR: plantgate plugin new [--lang LANG] NAME [DIR]\n"},
		{[]string{"--lang", "cobol", "cap", t.TempDir()}, `plantgate: --lang "cobol": want one of ` + strings.Join(langs, ", ") + "\n"},
	} {
		out, errOut, code := runCLI(t, "", append([]string{"plugin", "new"}, c.args...)...)
		if code != 1 || out != "" || errOut != c.want {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want exit 1 and %q", c.args, code, out, errOut, c.want)
		}
	}
	if b, err := os.ReadFile(filepath.Join(full, "main.go")); err != nil || string(b) != "package main\n" {
		t.Fatalf("the non-empty directory's main.go changed: %q %v", b, err)
	}
}

// TestPluginNewLang makes a project in each kit's language outside the
// repository, as a newcomer does: its tests pass, it builds with make, the
// exact `make check` line it printed passes with the binary that wrote it,
// and its module decides with the scaffold's rule and sidecar config.
// Without a language's toolchain it skips, or fails under
// PLANTGATE_REQUIRE_TOOLCHAINS=1.
func TestPluginNewLang(t *testing.T) {
	t.Parallel()
	bin := buildBinary(t)
	for _, c := range []struct {
		lang, files, testOut string
	}{
		{"rust", "src/lib.rs (one validate rule and its tests), Makefile, Cargo.toml", "test result: ok. 2 passed"},
		{"c", "plugin.c (one validate rule), plugin_test.c, Makefile", "name-cap: ok"},
	} {
		t.Run(c.lang, func(t *testing.T) {
			t.Parallel()
			wasmtest.NeedKitToolchain(t, c.lang)
			work := filepath.Join(t.TempDir(), "name-cap")
			cmd := exec.Command(bin, "plugin", "new", "--lang", c.lang, "name-cap", work)
			cmd.Env = append(os.Environ(), "PATH=/usr/bin:/bin")
			out, err := cmd.Output()
			check := "make check PLANTGATE=" + bin + "    # plantgate is not on PATH: check with the binary that wrote this"
			want := "wrote " + work + ": " + c.files + ", 50-name-cap.json, plantgate-sdk/\n"
			if err != nil || !strings.HasPrefix(string(out), want) || !strings.Contains(string(out), "\n  "+check+"\n") {
				t.Fatalf("plugin new --lang %s: %v\n%s\nwant it to start %q and hold %q", c.lang, err, out, want, check)
			}
			for _, args := range [][]string{{"test"}, {"check", "PLANTGATE=" + bin}} {
				runMake(t, work, c.testOut, args...)
			}
			long := strings.Repeat("n", 41)
			wantNameCap(t, filepath.Join(work, "50-name-cap.wasm"), long[:40], long, "plant name is longer than 40 bytes")
		})
	}
}

// runMake runs make with args in a scaffolded project, and checks that
// `make test` ran testOut and that `make check` passed.
func runMake(t *testing.T, work, testOut string, args ...string) {
	t.Helper()
	mk := exec.Command("make", args...)
	mk.Dir = work
	b, err := mk.CombinedOutput()
	if err != nil {
		t.Fatalf("make %v: %v\n%s", args, err, b)
	}
	if len(args) > 0 && args[0] == "test" && !strings.Contains(string(b), testOut) {
		t.Fatalf("make test ran no test:\n%s", b)
	}
	if len(args) > 0 && args[0] == "check" && !strings.Contains(string(b), "\nok                serve would load this plugin\n") {
		t.Fatalf("make check:\n%s", b)
	}
}

// wantNameCap checks a scaffolded name-cap module's two decisions: the
// name ok allowed, the name long denied with 40060 and message.
func wantNameCap(t *testing.T, module, ok, long, message string) {
	t.Helper()
	for _, r := range []struct{ input, want string }{
		{`{"id":1,"name":"` + long + `"}`, `{"decision":"deny","status":400,"error":40060,"message":"` + message + `"}`},
		{`{"id":1,"name":"` + ok + `"}`, `{"decision":"allow"}`},
	} {
		got, errOut, _ := runCLI(t, r.input, "plugin", "run", "--phase", "validate", "--input", "-", module)
		if strings.TrimSpace(got) != r.want {
			t.Errorf("plugin run %s: %s %s, want %s", r.input, got, errOut, r.want)
		}
	}
}
