package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestScaffoldAssemblyScript makes a project with `plugin new --lang
// assemblyscript` outside the repository, then runs it as a newcomer does:
// make test (npm install, build, node --test), the printed make check with
// this binary, and the module it built in a real gateway.
func TestScaffoldAssemblyScript(t *testing.T) {
	needNode(t)
	t.Parallel()
	bin := buildBinary(t)
	work := filepath.Join(t.TempDir(), "name-cap")
	cmd := exec.Command(bin, "plugin", "new", "--lang", "assemblyscript", "name-cap", work)
	cmd.Env = append(os.Environ(), "PATH=/usr/bin:/bin")
	next, err := cmd.Output()
	if err != nil {
		t.Fatalf("plugin new --lang assemblyscript: %v\n%s", err, next)
	}
	data := struct{ File, Check string }{File: scaffoldOrder + "-name-cap",
		Check: "make check PLANTGATE=" + bin + "    # plantgate is not on PATH: check with the binary that wrote this"}
	// The files next.txt names are the ones written.
	want := "wrote " + work + ": index.ts (one validate rule), index.test.mjs, package.json, asconfig.json, Makefile, 50-name-cap.json, plantgate-sdk/\n"
	if !strings.HasPrefix(string(next), want) || !strings.Contains(string(next), "\n  "+data.Check+"\n") {
		t.Fatalf("next.txt:\n%s\nwant it to start %q and hold the check line", string(next), want)
	}
	for _, f := range []string{"index.ts", "index.test.mjs", "package.json", "asconfig.json", "Makefile", "50-name-cap.json", "plantgate-sdk/package.json", "README.md", ".gitignore"} {
		if _, err := os.Stat(filepath.Join(work, f)); err != nil {
			t.Errorf("the project lacks %s", f)
		}
	}
	for _, args := range [][]string{{"test"}, {"check", "PLANTGATE=" + bin}} {
		mk := exec.Command("make", args...)
		mk.Dir = work
		b, err := mk.CombinedOutput()
		if err != nil {
			t.Fatalf("make %v: %v\n%s", args, err, b)
		}
		// Three tests: the rule, its config, and the test helper's
		// encoding of docs/abi.md's validate example (a tag, allowed-as
		// and a caller).
		if args[0] == "test" && (!strings.Contains(string(b), "\n# pass 3\n") || !strings.Contains(string(b), "\n# fail 0\n")) {
			t.Fatalf("make test did not pass the project's three tests:\n%s", b)
		}
		if args[0] == "check" && (!strings.Contains(string(b), "\nok                serve would load this plugin\n") ||
			!strings.Contains(string(b), "\nsidecar           "+data.File+".json\n")) {
			t.Fatalf("make check:\n%s", b)
		}
	}
	// npm run check, with plantgate not on PATH, takes PLANTGATE as make does.
	npm := exec.Command("npm", "run", "check")
	npm.Dir = work
	npm.Env = append(os.Environ(), "PATH=/usr/bin:/bin", "PLANTGATE="+bin)
	if b, err := npm.CombinedOutput(); err != nil || !strings.Contains(string(b), "\nok                serve would load this plugin\n") {
		t.Fatalf("PLANTGATE=%s npm run check: %v\n%s", bin, err, b)
	}

	dir := pluginsDir(t, "10-bearer-auth.wasm")
	for _, f := range []string{data.File + ".json", data.File + ".wasm"} {
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
