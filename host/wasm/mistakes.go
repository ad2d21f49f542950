package wasm

import (
	"bytes"
	"context"
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

// nativeFormats are the headers of native executables and libraries: a
// plugin built without GOOS=wasip1 GOARCH=wasm.
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
	for _, f := range nativeFormats {
		if bytes.HasPrefix(bin, f.magic) {
			return fmt.Errorf("%s, not WebAssembly: build it with %s", f.name, buildLine)
		}
	}
	return fmt.Errorf(`not a WebAssembly module (no "\0asm" header): build it with %s`, buildLine)
}

// buildMistake recognizes a module built the wrong way before its exports
// are checked one by one.
func buildMistake(m wazero.CompiledModule) error {
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
			return fmt.Errorf("built as a command (it exports %q): rebuild it as a reactor with %s, so the host can call it between requests", startExport, buildLine)
		}
	}
	for name := range fns {
		if strings.HasPrefix(name, "plantgate_") {
			return nil
		}
	}
	return errors.New("exports no plantgate_ function, so it is not a policy plugin: a Go plugin gets its exports by importing github.com/plantgate/plantgate/sdk and registering a handler in init()")
}

// errNoPhases is plantgate_phases answering 0. With the SDK that means no
// handler was registered when the host asked, right after start-up: a
// c-shared module runs its init functions but never main.
var errNoPhases = fmt.Errorf("%s returned 0: no phase handler is registered; register handlers in init(), not in main() (a c-shared module never runs main)", abi.ExportPhases)

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
