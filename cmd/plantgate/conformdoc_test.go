package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/plantgate/plantgate/host/wasm/wasmtest"
)

// TestPluginConformanceDocExample: docs/abi.md's complete module, which
// serves authorize only and holds requests in a static buffer of one page
// (returning 0 above 64512 bytes, as the document allows), passes every
// check: the buffer check asks only up to the largest authorize message.
// testdata/conformance/docexample.wat must be the document's block.
func TestPluginConformanceDocExample(t *testing.T) {
	t.Parallel()
	root, doc := readABIDoc(t)
	m := regexp.MustCompile("(?s)## A complete module\n.*?```wat\n(.*?)```").FindSubmatch(doc)
	if m == nil {
		t.Fatal("docs/abi.md: no ```wat block under \"## A complete module\"")
	}
	wat, err := os.ReadFile(filepath.Join(root, "testdata", "conformance", "docexample.wat"))
	if err != nil {
		t.Fatal(err)
	}
	// The fixture is the block after its two comment lines.
	if _, body, _ := strings.Cut(string(wat), "\n(module"); "(module"+body != string(m[1]) {
		t.Fatalf("testdata/conformance/docexample.wat differs from docs/abi.md's complete module; copy the block, then run make fixtures")
	}
	file := filepath.Join(t.TempDir(), "50-no.wasm")
	b, err := os.ReadFile(filepath.Join(root, "testdata", "conformance", "docexample.wasm"))
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, file, string(b))
	out, errOut, code := runCLI(t, "", "plugin", "conformance", "--cache-dir", sharedCache, file)
	if code != 0 {
		t.Fatalf("exit %d\n%s%s", code, out, errOut)
	}
	for _, want := range []string{
		"ok    load       50-no.wasm: ABI 2, phases authorize\n",
		"ok    buffer     5 sizes from 1 byte to 16 KiB, the largest authorize message (an 8 KiB request head and its context), on one instance\n",
		"ok    validate   not served\n",
		"conformance: every check passed\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("no line %q in:\n%s", want, out)
		}
	}
	// --body-limit does not change an authorize-only module's bound.
	out2, errOut, code := runCLI(t, "", "plugin", "conformance", "--cache-dir", sharedCache, "--body-limit", "131072", file)
	if code != 0 || !strings.Contains(out2, "to 16 KiB, the largest authorize message") {
		t.Fatalf("--body-limit 131072: exit %d\n%s%s", code, out2, errOut)
	}
}

// TestPluginConformanceBufferBound: a validate module is asked for a buffer
// as large as --body-limit allows, and a failure says how large and why.
func TestPluginConformanceBufferBound(t *testing.T) {
	t.Parallel()
	// A static buffer of 130048 bytes: too small for 1 MiB bodies.
	file := conformanceFixture(t, "conformance", "staticvalidate")
	out, _, code := runCLI(t, "", "plugin", "conformance", "--cache-dir", sharedCache, file)
	want := "FAIL  buffer     plantgate_buffer(1052672) returned 0: no buffer; the phases served need up to 1 MiB + 4 KiB, the largest validate message (--body-limit 1 MiB) (docs/abi.md#the-request-buffer)\n"
	if code != 1 || !strings.Contains(out, want) {
		t.Fatalf("exit %d, output:\n%s\nwant a line %s", code, out, want)
	}
	// Enough for a gateway whose bodies are at most 64 KiB.
	out, errOut, code := runCLI(t, "", "plugin", "conformance", "--cache-dir", sharedCache, "--body-limit", "65536", file)
	for _, want := range []string{
		"ok    buffer     6 sizes from 1 byte to 64 KiB + 4 KiB, the largest validate message (--body-limit 64 KiB), on one instance\n",
		// The largest name fills the body limit; the two 64 KiB cases, which
		// no 64 KiB body carries, are left out.
		"ok    validate   17 inputs: 17 allow, 0 deny\n",
		// it allows everything: the report says its rules went unexercised
		"conformance: every check passed, but no input was denied: ",
	} {
		if code != 0 || !strings.Contains(out, want) {
			t.Errorf("--body-limit 65536: exit %d, no %q in:\n%s%s", code, want, out, errOut)
		}
	}
	_, errOut, code = runCLI(t, "", "plugin", "conformance", "--body-limit", "100", file)
	if want := "plantgate: --body-limit 100: want 65536 to 1073741824 bytes\n"; code == 0 || errOut != want {
		t.Errorf("--body-limit 100: exit %d, stderr %q, want %q", code, errOut, want)
	}
}

// TestPluginConformanceFileName: a misnamed file is refused with the
// section of docs/abi.md that holds the naming rule.
func TestPluginConformanceFileName(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "x.wasm")
	writeFile(t, file, "\x00asm\x01\x00\x00\x00")
	out, _, code := runCLI(t, "", "plugin", "conformance", "--cache-dir", sharedCache, file)
	// The rule's own wording is host/wasm's (it names the shadow and
	// canary forms on main); the section is this command's.
	want := regexp.MustCompile(`^FAIL  load       plugin x\.wasm: file name must be NN-name\.wasm[^\n]*: two digits, a dash, then a-z, 0-9 or - \(docs/abi\.md#the-module\)\n$`)
	if code != 1 || !want.MatchString(out) {
		t.Fatalf("exit %d, output %q, want it to match %s", code, out, want)
	}
}

// TestHelpPluginRunFileName: `plugin run` takes any file name (a dry run)
// and its help says so, and where the rule for serve lives.
func TestHelpPluginRunFileName(t *testing.T) {
	t.Parallel()
	out, errOut, code := runCLI(t, "", "help", "plugin", "run")
	for _, want := range []string{"A dry run: FILE.wasm may have any name here", "want NN-name.wasm", "docs/abi.md#the-module"} {
		if code != 0 || !strings.Contains(out, want) {
			t.Errorf("exit %d, no %q in:\n%s%s", code, want, out, errOut)
		}
	}
}

// TestCompleteModuleCommands runs docs/abi.md's console block under "A
// complete module" as written, in a shell with the plantgate binary on
// PATH, and compares each command's output with the lines the block shows
// under it. wat2wasm (wabt) is run when it is installed; without it the
// module is the committed fixture, which `make fixtures` builds with that
// command from the same text (TestPluginConformanceDocExample holds the
// two texts equal).
func TestCompleteModuleCommands(t *testing.T) {
	t.Parallel()
	root, doc := readABIDoc(t)
	m := regexp.MustCompile("(?s)## A complete module\n.*?```console\n(.*?)```\n.*?```wat\n(.*?)```").FindSubmatch(doc)
	if m == nil {
		t.Fatal("docs/abi.md: no ```console and ```wat blocks under \"## A complete module\"")
	}
	bin := buildBinary(t)
	work := t.TempDir()
	writeFile(t, filepath.Join(work, "50-no.wat"), string(m[2]))
	_, haveWabt := exec.LookPath("wat2wasm")
	type step struct{ command, want string }
	var steps []step
	for line := range strings.SplitAfterSeq(string(m[1]), "\n") {
		if c, ok := strings.CutPrefix(line, "$ "); ok {
			steps = append(steps, step{command: strings.TrimSuffix(c, "\n")})
		} else if len(steps) > 0 {
			steps[len(steps)-1].want += line
		}
	}
	if len(steps) != 3 || !strings.HasPrefix(steps[0].command, "wat2wasm ") {
		t.Fatalf("the block's commands changed; update this test: %q", steps)
	}
	for _, s := range steps {
		if strings.HasPrefix(s.command, "wat2wasm ") && haveWabt != nil {
			b, err := os.ReadFile(filepath.Join(root, "testdata", "conformance", "docexample.wasm"))
			if err != nil {
				t.Fatal(err)
			}
			writeFile(t, filepath.Join(work, "50-no.wasm"), string(b))
			continue
		}
		sh := exec.Command("sh", "-c", s.command)
		sh.Dir = work
		sh.Env = append(os.Environ(), "PATH="+filepath.Dir(bin)+string(os.PathListSeparator)+os.Getenv("PATH"))
		var stderr strings.Builder
		sh.Stderr = &stderr
		out, err := sh.Output()
		if sh.ProcessState == nil {
			t.Fatalf("$ %s: %v", s.command, err)
		}
		code := 0 // plugin run exits 2 on a deny (docs/writing-plugins.md)
		if strings.Contains(s.want, `"decision":"deny"`) {
			code = 2
		}
		if sh.ProcessState.ExitCode() != code || string(out) != s.want {
			t.Errorf("$ %s: exit %d, want %d\n%s\nwant:\n%s\nstderr:\n%s", s.command, sh.ProcessState.ExitCode(), code, out, s.want, stderr.String())
		}
	}
}

// readABIDoc returns the module's root and docs/abi.md's text.
func readABIDoc(t *testing.T) (string, []byte) {
	t.Helper()
	root, err := wasmtest.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	doc, err := os.ReadFile(filepath.Join(root, "docs", "abi.md"))
	if err != nil {
		t.Fatal(err)
	}
	return root, doc
}
