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

// asTemplateData is the data the templates of every language get once
// `plugin new --lang` is generic (the kits branch's scaffoldData): this
// branch's scaffoldData has only Name, File and GoVersion.
type asTemplateData struct {
	Name, Ident, File, Dir, SDKDir, GoVersion, Check string
}

// TestScaffoldAssemblyScript writes a project from scaffold/assemblyscript
// as `plugin new --lang assemblyscript` will (every NAME.tmpl as NAME,
// gitignore as .gitignore, sidecar.json as File.json, the kit copied into
// plantgate-sdk/, next.txt printed), then runs it as a newcomer does: make
// test (npm install, build, node --test), the printed make check with this
// binary, and the module it built in a real gateway.
func TestScaffoldAssemblyScript(t *testing.T) {
	needNode(t)
	t.Parallel()
	bin := buildBinary(t)
	work := filepath.Join(t.TempDir(), "name-cap")
	data := asTemplateData{Name: "name-cap", Ident: "name_cap", File: scaffoldOrder + "-name-cap", Dir: work, SDKDir: sdkDir,
		GoVersion: "1.26", Check: "make check PLANTGATE=" + bin + "    # plantgate is not on PATH: check with the binary that wrote this"}
	root := filepath.Join("scaffold", "assemblyscript")
	entries, err := os.ReadDir(root)
	if err != nil || len(entries) == 0 {
		t.Fatalf("templates: %v %v", entries, err)
	}
	var next bytes.Buffer
	for _, e := range entries {
		tp, err := template.ParseFiles(filepath.Join(root, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		var b bytes.Buffer
		if err := tp.Execute(&b, data); err != nil {
			t.Fatal(err)
		}
		file, ok := strings.CutSuffix(e.Name(), ".tmpl")
		switch {
		case e.Name() == "next.txt":
			next = b
			continue
		case !ok:
			t.Fatalf("%s: neither NAME.tmpl nor next.txt", e.Name())
		case file == "gitignore":
			file = ".gitignore"
		case file == "sidecar.json":
			file = data.File + ".json"
		}
		if err := writeNew(filepath.Join(work, file), b.Bytes()); err != nil {
			t.Fatal(err)
		}
	}
	if err := copyASKit(filepath.Join(work, sdkDir)); err != nil {
		t.Fatal(err)
	}
	// The files next.txt names are the ones written.
	want := "wrote " + work + ": index.ts (one validate rule), index.test.mjs, package.json, asconfig.json, Makefile, 50-name-cap.json, plantgate-sdk/\n"
	if !strings.HasPrefix(next.String(), want) || !strings.Contains(next.String(), "\n  "+data.Check+"\n") {
		t.Fatalf("next.txt:\n%s\nwant it to start %q and hold the check line", next.String(), want)
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
		if args[0] == "test" && (!strings.Contains(string(b), "\n# pass 2\n") || !strings.Contains(string(b), "\n# fail 0\n")) {
			t.Fatalf("make test did not pass the project's two tests:\n%s", b)
		}
		if args[0] == "check" && (!strings.Contains(string(b), "\nok                serve would load this plugin\n") ||
			!strings.Contains(string(b), "\nsidecar           "+data.File+".json\n")) {
			t.Fatalf("make check:\n%s", b)
		}
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
