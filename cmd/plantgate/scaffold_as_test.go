package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"text/template"
)

// TestScaffoldAssemblyScript renders scaffold/assemblyscript/*.tmpl with
// the data `plugin new` gives the Go templates, adds the kit as copyASKit
// does, and runs the project as its README says: npm install, npm test
// (build and node --test), then plugin check and a real gateway on the
// module it built.
func TestScaffoldAssemblyScript(t *testing.T) {
	needNode(t)
	t.Parallel()
	work := filepath.Join(t.TempDir(), "name-cap")
	data := scaffoldData{Name: "name-cap", File: scaffoldOrder + "-name-cap", GoVersion: "1.26"}
	tmpls, err := filepath.Glob(filepath.Join("scaffold", "assemblyscript", "*.tmpl"))
	if err != nil || len(tmpls) == 0 {
		t.Fatalf("templates: %v %v", tmpls, err)
	}
	files := asScaffoldFiles(data)
	for _, tmpl := range tmpls {
		name := filepath.Base(tmpl)
		out, ok := files[name]
		if !ok {
			t.Fatalf("template %s has no file in asScaffoldFiles", name)
		}
		tp, err := template.ParseFiles(tmpl)
		if err != nil {
			t.Fatal(err)
		}
		var b bytes.Buffer
		if err := tp.Execute(&b, data); err != nil {
			t.Fatal(err)
		}
		if err := writeNew(filepath.Join(work, out), b.Bytes()); err != nil {
			t.Fatal(err)
		}
	}
	if len(tmpls) != len(files) {
		t.Fatalf("%d templates, %d files in asScaffoldFiles", len(tmpls), len(files))
	}
	if err := copyASKit(filepath.Join(work, sdkDir)); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"install", "--no-audit", "--no-fund"}, {"test"}} {
		cmd := exec.Command("npm", args...)
		cmd.Dir = work
		b, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("npm %v: %v\n%s", args, err, b)
		}
		if args[0] == "test" && (!strings.Contains(string(b), "\n# pass 2\n") || !strings.Contains(string(b), "\n# fail 0\n")) {
			t.Fatalf("npm test did not pass its two tests:\n%s", b)
		}
	}
	module := filepath.Join(work, data.File+".wasm")
	stdout, stderr, code := runCLI(t, "", "plugin", "check", module)
	if code != 0 || !strings.Contains(stdout, "\nok                serve would load this plugin\n") ||
		!strings.Contains(stdout, "\nsidecar           "+data.File+".json\n") {
		t.Fatalf("plugin check: exit %d\n%s%s", code, stdout, stderr)
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
