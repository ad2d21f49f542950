package wasm

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/experimental"
)

// A Rego policy compiled by OPA (opa build -t wasm) is a module kind of its
// own, with OPA's ABI instead of Plantgate's: it imports its memory and a
// few functions from "env", exports opa_eval and friends, and answers each
// entrypoint with a JSON value. The host recognises it by its exports
// (isOPA) and adapts it to the same phases and decisions, so everything
// around a plugin (chain, pool, limits, signatures, shadow and canary roles,
// reloads) is the same code for both kinds. See docs/abi.md#rego-policies.
//
// A wazero host module cannot export a memory, and a named module can be
// instantiated once per runtime, so each instance gets its own small "env"
// module (opaGlue, anonymous, holding the instance's memory and
// re-exporting the host functions of opaHostModule), handed to the policy
// through an import resolver.

// OPA's names.
const (
	opaEnvModule = "env"
	// opaHostModule holds the Go host functions the glue re-exports.
	opaHostModule = "plantgate_opa"

	opaExportEval       = "opa_eval"
	opaExportEvalOld    = "eval" // ABI 1.0 and 1.1
	opaExportEntrypoint = "entrypoints"
	opaExportBuiltins   = "builtins"
	opaExportMalloc     = "opa_malloc"
	opaExportJSONParse  = "opa_json_parse"
	opaExportJSONDump   = "opa_json_dump"
	opaExportValueParse = "opa_value_parse"
	opaExportValueDump  = "opa_value_dump"
	opaExportHeapGet    = "opa_heap_ptr_get"
	opaGlobalABI        = "opa_wasm_abi_version"
	opaGlobalABIMinor   = "opa_wasm_abi_minor_version"

	opaImportAbort   = "opa_abort"
	opaImportPrintln = "opa_println"

	// The entrypoints that serve Plantgate's phases.
	OPAEntrypointAuthorize = "plantgate/authorize"
	OPAEntrypointValidate  = "plantgate/validate"

	// opaMinMinor is the oldest ABI 1.x minor loaded: 1.2 added opa_eval.
	opaMinMinor = 2
)

func i32s(n int) []api.ValueType {
	ts := make([]api.ValueType, n)
	for i := range ts {
		ts[i] = i32
	}
	return ts
}

var (
	sigOPAEval  = signature{params: i32s(7), results: i32s(1)}
	sigOPAParse = signature{params: i32s(2), results: i32s(1)}
	sigOPAAbort = signature{params: i32s(1)}
)

// sigOPABuiltin is the signature of opa_builtinN: (id, ctx, N args) -> value.
func sigOPABuiltin(n int) signature {
	return signature{params: i32s(2 + n), results: i32s(1)}
}

// opaExports are the exports the host calls, checked at load.
var opaExports = []struct {
	name string
	sig  signature
}{
	{opaExportEval, sigOPAEval},
	{opaExportEntrypoint, sigU32},
	{opaExportBuiltins, sigU32},
	{opaExportMalloc, sigBuffer},
	{opaExportJSONParse, sigOPAParse},
	{opaExportJSONDump, sigBuffer},
	{opaExportValueParse, sigOPAParse},
	{opaExportValueDump, sigBuffer},
	{opaExportHeapGet, sigU32},
}

// opaImports are the env functions a policy may import (the glue exports
// them all).
var opaImports = map[string]signature{
	opaImportAbort:   sigOPAAbort,
	opaImportPrintln: sigOPAAbort,
	"opa_builtin0":   sigOPABuiltin(0),
	"opa_builtin1":   sigOPABuiltin(1),
	"opa_builtin2":   sigOPABuiltin(2),
	"opa_builtin3":   sigOPABuiltin(3),
	"opa_builtin4":   sigOPABuiltin(4),
}

// opaGlueFuncs is the glue's import (and export) order.
var opaGlueFuncs = []string{opaImportAbort, opaImportPrintln, "opa_builtin0", "opa_builtin1", "opa_builtin2", "opa_builtin3", "opa_builtin4"}

// isOPA reports whether a compiled module is an OPA policy: it exports
// OPA's evaluation entry, entrypoints and builtins.
func isOPA(m wazero.CompiledModule) bool {
	fns := m.ExportedFunctions()
	_, eval := fns[opaExportEval]
	_, old := fns[opaExportEvalOld]
	_, ep := fns[opaExportEntrypoint]
	_, bi := fns[opaExportBuiltins]
	return (eval || old) && ep && bi
}

// opaModule is what a plugin of the OPA kind keeps beside its compiled
// policy.
type opaModule struct {
	glue wazero.CompiledModule // the per-instance env module
	// builtins maps the policy's builtin ids to their implementations,
	// resolved by the first instance (the ids are the module's, so every
	// instance has the same).
	builtins map[int32]opaBuiltin
	// entry holds the entrypoint ids of the phases served, by phase bit.
	entry map[uint32]int32
}

// checkOPACompiled checks an OPA policy's imports and exports before
// instantiation and returns the initial memory its env.memory import asks
// for, in pages.
func checkOPACompiled(m wazero.CompiledModule) (minPages uint32, err error) {
	fns := m.ExportedFunctions()
	if _, ok := fns[opaExportEval]; !ok {
		return 0, fmt.Errorf("is an OPA policy of Wasm ABI 1.0 or 1.1 (it exports %q, not %q): Plantgate runs ABI 1.%d and later (OPA v0.30+); rebuild it with a current opa build -t wasm",
			opaExportEvalOld, opaExportEval, opaMinMinor)
	}
	for _, e := range opaExports {
		def, ok := fns[e.name]
		if !ok {
			return 0, fmt.Errorf("is an OPA policy but lacks the export %q with signature %s", e.name, e.sig)
		}
		if !e.sig.equal(def.ParamTypes(), def.ResultTypes()) {
			return 0, fmt.Errorf("OPA export %q has signature %s, want %s", e.name, signature{def.ParamTypes(), def.ResultTypes()}, e.sig)
		}
	}
	mems := m.ImportedMemories()
	if len(mems) != 1 {
		return 0, fmt.Errorf("is an OPA policy but does not import its memory as %s.memory", opaEnvModule)
	}
	if module, name, _ := mems[0].Import(); module != opaEnvModule || name != memoryName {
		return 0, fmt.Errorf("is an OPA policy but imports its memory as \"%s.%s\", not %s.memory", module, name, opaEnvModule)
	}
	minPages = mems[0].Min()
	for _, def := range m.ImportedFunctions() {
		module, name, _ := def.Import()
		want, ok := opaImports[name]
		if module != opaEnvModule || !ok {
			return 0, fmt.Errorf("is an OPA policy but imports \"%s.%s\"; an OPA policy may import only %s.memory and %s.{%s}",
				module, name, opaEnvModule, opaEnvModule, strings.Join(sortedKeys(opaImports), ","))
		}
		if !want.equal(def.ParamTypes(), def.ResultTypes()) {
			return 0, fmt.Errorf("import \"%s.%s\" has signature %s, want %s", module, name, signature{def.ParamTypes(), def.ResultTypes()}, want)
		}
	}
	return minPages, nil
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// compileOPA checks an OPA policy and compiles its glue, and provides the
// host functions the glue re-exports.
func (p *Plugin) compileOPA(ctx context.Context) error {
	minPages, err := checkOPACompiled(p.compiled)
	if err != nil {
		return err
	}
	if minPages > p.limits.memoryPages() {
		return memorySuspect{fmt.Errorf("its memory import asks for %d pages, over limits.memory_mib %d", minPages, p.limits.MemoryMiB)}
	}
	p.opa = &opaModule{}
	if p.opa.glue, err = p.rt.CompileModule(ctx, opaGlue(minPages)); err != nil {
		return fmt.Errorf("compile the %s module: %w", opaEnvModule, err) // a bug of opaGlue
	}
	b := p.rt.NewHostModuleBuilder(opaHostModule).
		NewFunctionBuilder().
		WithGoModuleFunction(api.GoModuleFunc(p.opaAbort), sigOPAAbort.params, nil).
		WithParameterNames("msg_ptr").
		Export(opaImportAbort).
		NewFunctionBuilder().
		WithGoModuleFunction(api.GoModuleFunc(p.opaPrintln), sigOPAAbort.params, nil).
		WithParameterNames("msg_ptr").
		Export(opaImportPrintln)
	for n := range 5 {
		sig := sigOPABuiltin(n)
		b = b.NewFunctionBuilder().
			WithGoModuleFunction(p.opaBuiltinN(n), sig.params, sig.results).
			Export(fmt.Sprintf("opa_builtin%d", n))
	}
	if _, err := b.Instantiate(ctx); err != nil {
		return fmt.Errorf("host module: %w", err)
	}
	return nil
}

// instantiateOPA makes an instance's env module, then the policy importing
// from it.
func (p *Plugin) instantiateOPA(ctx context.Context, in *instance, cfg wazero.ModuleConfig) (api.Module, error) {
	env, err := p.rt.InstantiateModule(p.withLinearMemory(ctx), p.opa.glue, wazero.NewModuleConfig().WithName(""))
	if err != nil {
		return nil, err
	}
	resolve := func(name string) api.Module {
		if name == opaEnvModule {
			return env
		}
		return nil
	}
	mod, err := p.rt.InstantiateModule(experimental.WithImportResolver(ctx, resolve), p.compiled, cfg)
	if err != nil {
		_ = env.Close(ctx)
		return nil, err
	}
	in.env = env
	return mod, nil
}

// opaGlue is the binary of the env module: a memory of minPages (its
// maximum is the runtime's limit) and the functions of opaHostModule,
// imported and exported again under the names the policy imports.
func opaGlue(minPages uint32) []byte {
	var types, imports, memory, exports []byte
	// Types: 0 (i32) -> (); 1+n opa_builtinN.
	types = leb(types, 6)
	types = append(types, 0x60, 1, 0x7f, 0)
	for n := range 5 {
		types = append(types, 0x60, byte(2+n))
		for range 2 + n {
			types = append(types, 0x7f)
		}
		types = append(types, 1, 0x7f)
	}
	imports = leb(imports, uint32(len(opaGlueFuncs)))
	exports = leb(exports, uint32(len(opaGlueFuncs)+1))
	exports = appendName(exports, memoryName)
	exports = append(exports, 0x02, 0) // memory 0
	for i, name := range opaGlueFuncs {
		typ := byte(0)
		if strings.HasPrefix(name, "opa_builtin") {
			typ = 1 + name[len(name)-1] - '0'
		}
		imports = appendName(imports, opaHostModule)
		imports = appendName(imports, name)
		imports = append(imports, 0x00, typ) // a function of that type
		exports = appendName(exports, name)
		exports = append(exports, 0x00) // function
		exports = leb(exports, uint32(i))
	}
	memory = leb(memory, 1)
	memory = append(memory, 0x00) // no maximum
	memory = leb(memory, minPages)

	out := []byte("\x00asm\x01\x00\x00\x00")
	for _, s := range []struct {
		id   byte
		body []byte
	}{{1, types}, {2, imports}, {5, memory}, {7, exports}} {
		out = append(out, s.id)
		out = leb(out, uint32(len(s.body)))
		out = append(out, s.body...)
	}
	return out
}

// leb appends v in unsigned LEB128.
func leb(b []byte, v uint32) []byte {
	for {
		c := byte(v & 0x7f)
		v >>= 7
		if v == 0 {
			return append(b, c)
		}
		b = append(b, c|0x80)
	}
}

func appendName(b []byte, s string) []byte {
	return append(leb(b, uint32(len(s))), s...)
}
