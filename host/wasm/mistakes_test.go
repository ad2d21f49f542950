package wasm

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/plantgate/plantgate/docs"
)

// TestBuildMistakes loads real modules built the ordinary wrong ways (by
// TestMain) and checks that each gets its one message naming the fix.
func TestBuildMistakes(t *testing.T) {
	t.Parallel()
	native, err := os.Executable() // this test binary: a native executable
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	header := func(name, magic string) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, append([]byte(magic), make([]byte, 60)...), 0o644); err != nil {
			t.Fatal(err)
		}
		return path
	}
	const fix = "GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared"
	guide, err := os.ReadFile(filepath.Join("..", "..", "sdk", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, path, want string
		neutral          bool // not recognisably Go: a fix for every language, not quoted by the Go guide
	}{
		{"GOOS=js", fixture("jsbuild"),
			`plugin jsbuild.wasm: built for GOOS=js (it imports "gojs" functions): rebuild it with ` + fix, false},
		{"native ELF", native,
			"plugin " + filepath.Base(native) + ": an ELF (Linux) executable, not WebAssembly: build it with " + fix, false},
		{"native Mach-O", header("macho.wasm", "\xcf\xfa\xed\xfe"),
			"plugin macho.wasm: a Mach-O (macOS) executable, not WebAssembly: build it for wasm32 as a reactor (see docs/abi.md#the-module)", true},
		{"native PE", header("pe.wasm", "MZ\x90\x00"),
			"plugin pe.wasm: a PE (Windows) executable, not WebAssembly: build it for wasm32 as a reactor (see docs/abi.md#the-module)", true},
		{"not wasm at all", header("text.wasm", "hello"),
			`plugin text.wasm: not a WebAssembly module (no "\0asm" header): build a wasm32 module (see docs/abi.md#the-module); a Go plugin with ` + fix, true},
		{"WebAssembly text", header("wat.wasm", "(module (memory 1))"),
			"plugin wat.wasm: WebAssembly text (.wat), not a binary module: build it with wat2wasm (see docs/abi.md#the-module)", true},
		{"AssemblyScript's env.abort", fixture("envabort"),
			`plugin envabort.wasm: imports "env.abort"; only "plantgate" and "wasi_snapshot_preview1" functions are provided (see docs/abi.md#imports). AssemblyScript: build with --use abort= (or --use abort=yourAbort).`, true},
		{"hand-written command", fixture("command"),
			`plugin command.wasm: built as a command (it exports "_start"): build it as a reactor (Rust: --crate-type cdylib; C: -mexec-model=reactor), so the host can call it between requests (see docs/abi.md#start-up)`, true},
		{"hand-written, no phases", fixture("nophases"),
			"plugin nophases.wasm: plantgate_phases returned 0: it must return the phases served, 1 (authorize), 2 (validate) or 3 (both) (see docs/abi.md#phases-and-deny-codes)", true},
		{"not c-shared", fixture("gocommand"),
			`plugin gocommand.wasm: built as a command (it exports "_start"): rebuild it as a reactor with ` + fix + `, so the host can call it between requests`, false},
		{"handlers registered in main", fixture("inmain"),
			"plugin inmain.wasm: plantgate_phases returned 0: no phase handler is registered; register handlers in init(), not in main() (a c-shared module never runs main)", false},
		{"no SDK, no exports", fixture("nosdk"),
			"plugin nosdk.wasm: exports no plantgate_ function, so it is not a policy plugin: a Go plugin gets its exports by importing github.com/plantgate/plantgate/sdk and registering a handler in init()", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			for name, err := range goFixtureErr {
				if err != nil && fixture(name) == tt.path {
					t.Fatal(err)
				}
			}
			opts, logs := testOptions()
			opts.Limits = Limits{Instances: 1}.Or(DefaultLimits())
			p, err := LoadPlugin(context.Background(), tt.path, nil, opts)
			if err == nil {
				p.Close(context.Background())
				t.Fatalf("loaded; want %q", tt.want)
			}
			if err.Error() != tt.want {
				t.Fatalf("err =\n%s\nwant\n%s", err, tt.want)
			}
			if recs := logs.records(); len(recs) != 0 {
				t.Fatalf("logged %v; the error says it all", recs)
			}
			// The Go guide's table of mistakes quotes each Go message; the
			// neutral ones name the section of docs/abi.md, which exists.
			if tt.neutral {
				_, anchor, _ := strings.Cut(tt.want, "docs/abi.md#")
				anchor, _, _ = strings.Cut(anchor, ")")
				if !docAnchors(t)[anchor] {
					t.Errorf("message names docs/abi.md#%s, which is no heading there", anchor)
				}
			}
			_, msg, _ := strings.Cut(tt.want, ": ") // after "plugin FILE"
			if !tt.neutral && !strings.Contains(string(guide), "`"+msg+"`") {
				t.Errorf("sdk/README.md does not quote %q", msg)
			}
		})
	}
}

// TestMemoryBelowNeed: a memory_mib too small for a Go plugin, whether it
// fails at compile (the module's initial memory is over it), at start (the
// Go runtime runs out) or right after (over the recycling threshold), is
// one message saying how much the module needs, and nothing else is logged.
func TestMemoryBelowNeed(t *testing.T) {
	t.Parallel()
	if err := goFixtureErr["sdkpanic"]; err != nil {
		t.Fatal(err)
	}
	// What a configured instance uses, measured the way the message does.
	opts, _ := testOptions()
	p := load(t, "sdkpanic", nil, Limits{MemoryMiB: maxMemoryMiB}, opts)
	used := uint64(p.Memory())
	need := (used*4/3 + 1<<20 - 1) >> 20
	if need < 5 {
		t.Fatalf("a Go instance uses %d KiB; the cases below assume more than 3 MiB", used>>10)
	}
	for _, mib := range []uint32{1, 3, uint32(need - 1)} {
		t.Run(fmt.Sprint(mib), func(t *testing.T) {
			t.Parallel()
			opts, logs := testOptions()
			opts.Limits = Limits{Instances: 1, MemoryMiB: mib}.Or(DefaultLimits())
			p, err := LoadPlugin(context.Background(), fixture("sdkpanic"), nil, opts)
			if err == nil {
				p.Close(context.Background())
				t.Fatal("loaded")
			}
			want := fmt.Sprintf(`plugin sdkpanic.wasm: "limits.memory_mib" is %d, below what this module needs: a new instance uses %d KiB, and one over 3/4 of memory_mib is recycled; set "memory_mib" to %d or more`,
				mib, used>>10, need)
			if err.Error() != want {
				t.Fatalf("err =\n%s\nwant\n%s", err, want)
			}
			if recs := logs.records(); len(recs) != 0 {
				t.Fatalf("logged %d records, first %v; want none: the error says it all", len(recs), recs[0])
			}
		})
	}
}

// docAnchors returns the GitHub anchors of docs/abi.md's headings.
func docAnchors(t *testing.T) map[string]bool {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "docs", "abi.md"))
	if err != nil {
		t.Fatal(err)
	}
	return docs.Anchors(string(b))
}
