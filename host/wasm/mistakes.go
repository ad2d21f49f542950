package wasm

import (
	"bytes"
	"context"
	"debug/buildinfo"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"

	"github.com/tetratelabs/wazero"

	"github.com/plantgate/plantgate/sdk/abi"
)

// The ordinary ways to build a plugin wrong each get one message that names
// the fix, ahead of the generic checks that would describe the symptom
// (a missing export, a trap at start) rather than the cause.

// buildLine is how a Go plugin is built, quoted by the messages.
const buildLine = "GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared"

// The messages name the Go fix only for a module recognisably built by Go
// (goBuilt); any other language gets a neutral fix and the section of
// docs/abi.md that says what is wanted.
const (
	docModule  = "docs/abi.md#the-module"
	docStartUp = "docs/abi.md#start-up"
	docExports = "docs/abi.md#exports"
	docImports = "docs/abi.md#imports"
	docPhases  = "docs/abi.md#phases-and-deny-codes"
)

// goBuilt reports whether bin was built by the Go toolchain: a WebAssembly
// module whose first section is Go's "go:buildid" custom section (the Go
// linker writes it first), or a native executable with Go build info.
func goBuilt(bin []byte) bool {
	if bytes.HasPrefix(bin, []byte("\x00asm")) {
		b := bin[min(len(bin), 8):]
		if len(b) == 0 || b[0] != 0 { // not a custom section
			return false
		}
		_, n := uleb(b[1:])
		b = b[min(len(b), 1+n):]
		size, n := uleb(b)
		const name = "go:buildid"
		return n > 0 && size == uint64(len(name)) && bytes.HasPrefix(b[n:], []byte(name))
	}
	_, err := buildinfo.Read(bytes.NewReader(bin))
	return err == nil
}

// uleb decodes an unsigned LEB128 number; n is 0 when b does not hold one.
func uleb(b []byte) (v uint64, n int) {
	for i := 0; i < len(b) && i < 10; i++ {
		v |= uint64(b[i]&0x7f) << (7 * i)
		if b[i]&0x80 == 0 {
			return v, i + 1
		}
	}
	return 0, 0
}

// nativeFormats are the headers of native executables and libraries: a
// plugin built for the machine rather than for wasm32.
var nativeFormats = []struct {
	magic []byte
	name  string
}{
	{[]byte("\x7fELF"), "an ELF (Linux) executable"},
	{[]byte{0xcf, 0xfa, 0xed, 0xfe}, "a Mach-O (macOS) executable"},
	{[]byte{0xce, 0xfa, 0xed, 0xfe}, "a Mach-O (macOS) executable"},
	{[]byte{0xca, 0xfe, 0xba, 0xbe}, "a Mach-O (macOS) universal executable"},
	{[]byte("MZ"), "a PE (Windows) executable"},
}

// notWasm explains a file without the WebAssembly header.
func notWasm(bin []byte) error {
	fix := "build it for wasm32 as a reactor (see " + docModule + ")"
	if goBuilt(bin) {
		fix = "build it with " + buildLine
	}
	for _, f := range nativeFormats {
		if bytes.HasPrefix(bin, f.magic) {
			return fmt.Errorf("%s, not WebAssembly: %s", f.name, fix)
		}
	}
	if bytes.HasPrefix(bytes.TrimSpace(bin), []byte("(module")) {
		return fmt.Errorf("WebAssembly text (.wat), not a binary module: build it with wat2wasm (see %s)", docModule)
	}
	if !goBuilt(bin) {
		fix = "build a wasm32 module (see " + docModule + "); a Go plugin with " + buildLine
	}
	return fmt.Errorf(`not a WebAssembly module (no "\0asm" header): %s`, fix)
}

// buildMistake recognizes a module built the wrong way before its exports
// are checked one by one. isGo: the module was built by Go (goBuilt).
func buildMistake(m wazero.CompiledModule, isGo bool) error {
	for _, def := range m.ImportedFunctions() {
		// Go's js/wasm port imports its runtime from "gojs" ("go" before
		// Go 1.21).
		if module, _, _ := def.Import(); module == "gojs" || module == "go" {
			return fmt.Errorf("built for GOOS=js (it imports %q functions): rebuild it with %s", module, buildLine)
		}
	}
	fns := m.ExportedFunctions()
	if _, ok := fns[startExport]; ok {
		if _, ok := fns[abi.ExportInitialize]; !ok {
			if isGo {
				return fmt.Errorf("built as a command (it exports %q): rebuild it as a reactor with %s, so the host can call it between requests", startExport, buildLine)
			}
			return fmt.Errorf("built as a command (it exports %q): build it as a reactor (Rust: --crate-type cdylib; C: -mexec-model=reactor), so the host can call it between requests (see %s)", startExport, docStartUp)
		}
	}
	for name := range fns {
		if strings.HasPrefix(name, "plantgate_") {
			return nil
		}
	}
	if isGo {
		return errors.New("exports no plantgate_ function, so it is not a policy plugin: a Go plugin gets its exports by importing github.com/plantgate/plantgate/sdk and registering a handler in init()")
	}
	return fmt.Errorf("exports no plantgate_ function, so it is not a policy plugin: export %s, %s, %s and a phase function under exactly these names (see %s)",
		abi.ExportABIVersion, abi.ExportPhases, abi.ExportBuffer, docExports)
}

// noPhases is plantgate_phases answering 0. With the Go SDK that means no
// handler was registered when the host asked, right after start-up: a
// c-shared module runs its init functions but never main.
func noPhases(isGo bool) error {
	if isGo {
		return fmt.Errorf("%s returned 0: no phase handler is registered; register handlers in init(), not in main() (a c-shared module never runs main)", abi.ExportPhases)
	}
	return fmt.Errorf("%s returned 0: it must return the phases served, %d (authorize), %d (validate) or %d (both) (see %s)",
		abi.ExportPhases, abi.PhaseAuthorize, abi.PhaseValidate, abi.PhaseMask, docPhases)
}

// foreignImport explains an import from a module the host does not
// provide, with the usual fix for the usual culprits.
func foreignImport(module, name string) error {
	hint := ""
	switch {
	case module == "env" && name == "abort":
		hint = " AssemblyScript: build with --use abort= (or --use abort=yourAbort)."
	case module == "env":
		hint = " Build for wasm32-wasi (WASI) rather than for a JavaScript host (Emscripten, AssemblyScript bindings)."
	}
	return fmt.Errorf("imports \"%s.%s\"; only %q and %q functions are provided (see %s).%s", module, name, abi.HostModule, wasiModule, docImports, hint)
}

// memoryUse loads one instance of the plugin at bin with all the memory
// wasm32 can address and returns how much memory it uses once started and
// configured. ok is false when the plugin does not load that way either, so
// memory was not what stopped it.
func memoryUse(ctx context.Context, path string, bin, config []byte, opts Options, cache *compileCache) (used uint64, ok bool) {
	opts.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	opts.Observer, opts.Decisions = nil, nil
	opts.Limits.MemoryMiB, opts.Limits.Instances = maxMemoryMiB, 1
	cache.acquire()
	defer cache.release(ctx)
	p, err := loadPluginBytes(ctx, path, bin, config, opts, cache)
	if err != nil {
		return 0, false
	}
	defer p.Close(ctx)
	return uint64(p.Memory()), true
}

// memorySuspect marks a load failure that too small a memory limit could
// cause: compiling (the module's initial memory), starting or configuring
// an instance, or a new instance over the recycling threshold.
type memorySuspect struct{ error }

func (e memorySuspect) Unwrap() error { return e.error }

// memoryError returns, for a load failure that memory could cause, the
// message saying that limits.memory_mib is below what the plugin needs and
// how much it needs, or err when memory was not the cause.
func memoryError(ctx context.Context, err error, path string, bin, config []byte, opts Options, cache *compileCache) error {
	have := opts.Limits.MemoryMiB
	if !errors.As(err, new(memorySuspect)) || have >= maxMemoryMiB {
		return err
	}
	used, ok := memoryUse(ctx, path, bin, config, opts, cache)
	// A new instance must stay under the recycling threshold, 3/4 of it.
	need := uint32((used*4/3 + 1<<20 - 1) >> 20)
	if !ok || need <= have {
		return err
	}
	return fmt.Errorf(`"limits.memory_mib" is %d, below what this module needs: a new instance uses %d KiB, and one over 3/4 of memory_mib is recycled; set "memory_mib" to %d or more`,
		have, used>>10, need)
}
