package wasm

import (
	"fmt"
	"slices"
	"strings"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/imports/wasi_snapshot_preview1"

	"github.com/plantgate/plantgate/sdk/abi"
)

// signature is a function type, printed as "(i32, i32) -> i64": params in
// parentheses, a single result bare, none as "()".
type signature struct {
	params, results []api.ValueType
}

func (s signature) String() string {
	results := types(s.results)
	if len(s.results) == 1 {
		results = api.ValueTypeName(s.results[0])
	}
	return types(s.params) + " -> " + results
}

func (s signature) equal(params, results []api.ValueType) bool {
	return slices.Equal(s.params, params) && slices.Equal(s.results, results)
}

func types(ts []api.ValueType) string {
	names := make([]string, len(ts))
	for i, t := range ts {
		names[i] = api.ValueTypeName(t)
	}
	return "(" + strings.Join(names, ", ") + ")"
}

var (
	i32 = api.ValueTypeI32
	i64 = api.ValueTypeI64

	sigStart  = signature{}
	sigU32    = signature{results: []api.ValueType{i32}}
	sigBuffer = signature{params: []api.ValueType{i32}, results: []api.ValueType{i32}}
	sigDecide = signature{params: []api.ValueType{i32, i32}, results: []api.ValueType{i64}}
	sigLog    = signature{params: []api.ValueType{i32, i32, i32}}
	sigLookup = signature{params: []api.ValueType{i32, i32, i32, i32}, results: []api.ValueType{i32}}

	sigKVGet    = sigLookup
	sigKVSet    = signature{params: []api.ValueType{i32, i32, i32, i32, i64}, results: []api.ValueType{i32}}
	sigKVDelete = signature{params: []api.ValueType{i32, i32}, results: []api.ValueType{i32}}
	sigKVCount  = signature{params: []api.ValueType{i32, i32, i64, i64}, results: []api.ValueType{i64}}
)

const (
	memoryName  = "memory"
	wasiModule  = wasi_snapshot_preview1.ModuleName
	startExport = "_start" // a WASI command's entry point
)

// exports lists every export the host knows, in the order they are checked.
var exports = []struct {
	name     string
	sig      signature
	required bool
}{
	{abi.ExportABIVersion, sigU32, true},
	{abi.ExportPhases, sigU32, true},
	{abi.ExportBuffer, sigBuffer, true},
	{abi.ExportInitialize, sigStart, false},
	{abi.ExportConfigure, sigDecide, false},
	{abi.ExportConfigRequired, sigU32, false},
	{abi.ExportAuthorize, sigDecide, false},
	{abi.ExportValidate, sigDecide, false},
}

// hostImports are the functions of module abi.HostModule.
var hostImports = map[string]signature{
	abi.ImportLog:         sigLog,
	abi.ImportTokenLookup: sigLookup,
	abi.ImportKVGet:       sigKVGet,
	abi.ImportKVSet:       sigKVSet,
	abi.ImportKVDelete:    sigKVDelete,
	abi.ImportKVIncr:      sigKVCount,
	abi.ImportKVTake:      sigKVCount,
}

// phaseExports maps each phase bit to the export that serves it.
var phaseExports = []struct {
	bit    uint32
	name   string
	export string
}{
	{abi.PhaseAuthorize, "authorize", abi.ExportAuthorize},
	{abi.PhaseValidate, "validate", abi.ExportValidate},
}

// checkCompiled checks what can be checked before instantiation: the
// signature of every export the host knows, the exported memory, and that
// every import is one the host provides.
func checkCompiled(m wazero.CompiledModule) error {
	if err := buildMistake(m); err != nil {
		return err
	}
	fns := m.ExportedFunctions()
	for _, e := range exports {
		def, ok := fns[e.name]
		if !ok {
			if e.required {
				return fmt.Errorf("missing export %q with signature %s", e.name, e.sig)
			}
			continue
		}
		if !e.sig.equal(def.ParamTypes(), def.ResultTypes()) {
			got := signature{def.ParamTypes(), def.ResultTypes()}
			return fmt.Errorf("export %q has signature %s, want %s", e.name, got, e.sig)
		}
	}
	if _, ok := m.ExportedMemories()[memoryName]; !ok {
		return fmt.Errorf("missing exported memory %q", memoryName)
	}
	if len(m.ImportedMemories()) > 0 {
		return fmt.Errorf("imports a memory; it must define and export its own %q", memoryName)
	}
	for _, def := range m.ImportedFunctions() {
		module, name, _ := def.Import()
		switch module {
		case wasiModule:
			// wazero checks these against its WASI implementation.
		case abi.HostModule:
			want, ok := hostImports[name]
			if !ok {
				return fmt.Errorf("imports unknown host function \"%s.%s\"", module, name)
			}
			if !want.equal(def.ParamTypes(), def.ResultTypes()) {
				got := signature{def.ParamTypes(), def.ResultTypes()}
				return fmt.Errorf("import \"%s.%s\" has signature %s, want %s", module, name, got, want)
			}
		default:
			return fmt.Errorf("imports \"%s.%s\"; only %q and %q functions are provided", module, name, abi.HostModule, wasiModule)
		}
	}
	return nil
}

// checkPhases checks the bit set a module's plantgate_phases returned.
func checkPhases(phases uint32, fns map[string]api.FunctionDefinition) error {
	if phases == 0 {
		return errNoPhases
	}
	if extra := phases &^ abi.PhaseMask; extra != 0 {
		return fmt.Errorf("%s returned %#x: unknown phase bits %#x", abi.ExportPhases, phases, extra)
	}
	for _, ph := range phaseExports {
		if phases&ph.bit == 0 {
			continue
		}
		if _, ok := fns[ph.export]; !ok {
			return fmt.Errorf("serves the %s phase but does not export %q", ph.name, ph.export)
		}
	}
	return nil
}

// phaseNames lists the phases in phases, for logs and PluginInfo.
func phaseNames(phases uint32) []string {
	var names []string
	for _, ph := range phaseExports {
		if phases&ph.bit != 0 {
			names = append(names, ph.name)
		}
	}
	return names
}

// phaseName is the name of one phase bit.
func phaseName(bit uint32) string {
	for _, ph := range phaseExports {
		if ph.bit == bit {
			return ph.name
		}
	}
	return ""
}
