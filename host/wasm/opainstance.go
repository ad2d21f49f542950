package wasm

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/tetratelabs/wazero/api"

	"github.com/plantgate/plantgate/sdk/abi"
)

// opaInstance is the OPA side of one instance of an OPA policy.
type opaInstance struct {
	eval, malloc, jsonParse, jsonDump, valueParse, valueDump api.Function

	data uint32 // the parsed sidecar config, the policy's data
	// heap is where each evaluation writes its input; the heap starts
	// after it. Every opa_eval resets the heap there, so an instance's
	// memory stays what its largest evaluation needed.
	heap uint32
	// The call being made: its entrypoint's id and name, and the code a
	// deny without one takes.
	entry     int32
	entryName string
	firstCode int32
	stack     [7]uint64
	// now is the evaluation's time for time.now_ns and the time builtins
	// that default to now, one value per evaluation as in OPA.
	now time.Time
	// decision is the deny the last evaluation came to (decision reads it).
	decision abi.Decision
	text     []byte // decision.Text's storage, reused
}

// setupOPA readies a new instance of an OPA policy: checks its ABI version,
// parses the config as data, resolves its builtins and entrypoints (the
// first instance) and notes where the heap starts.
func (p *Plugin) setupOPA(ctx context.Context, in *instance) error {
	in.mem = in.env.ExportedMemory(memoryName)
	in.memory = in.mem.Size()
	p.stats.memory.Add(int64(in.memory))
	major, minor, err := opaVersion(in.mod)
	if err != nil {
		return err
	}
	if major != 1 || minor < opaMinMinor {
		return fmt.Errorf("is an OPA policy of Wasm ABI %d.%d: Plantgate runs ABI 1.%d and later (OPA v0.30+); rebuild it with a current opa build -t wasm", major, minor, opaMinMinor)
	}
	o := &opaInstance{
		eval:       in.mod.ExportedFunction(opaExportEval),
		malloc:     in.mod.ExportedFunction(opaExportMalloc),
		jsonParse:  in.mod.ExportedFunction(opaExportJSONParse),
		jsonDump:   in.mod.ExportedFunction(opaExportJSONDump),
		valueParse: in.mod.ExportedFunction(opaExportValueParse),
		valueDump:  in.mod.ExportedFunction(opaExportValueDump),
	}
	in.opa = o
	data := p.config
	if data == nil {
		data = []byte("{}")
	}
	if t := bytes.TrimLeft(data, " \t\r\n"); len(t) == 0 || t[0] != '{' {
		return fmt.Errorf("config (the policy's data) must be a JSON object, got %.100s", data)
	}
	if o.data, err = in.opaParse(ctx, o.jsonParse, data); err != nil {
		return fmt.Errorf("config (the policy's data): %w", err)
	}
	heap, err := in.mod.ExportedFunction(opaExportHeapGet).Call(ctx)
	if err != nil {
		return memorySuspect{fmt.Errorf("%s: %w", opaExportHeapGet, opaCallErr(err))}
	}
	o.heap = uint32(heap[0])
	if p.opa.entry == nil {
		if err := p.resolveOPA(ctx, in); err != nil {
			return err
		}
		p.info.Kind, p.info.ABIVersion = KindRego, abi.Version
		p.info.OPAABI = fmt.Sprintf("%d.%d", major, minor)
	}
	in.authorize, in.validate = o.eval, o.eval
	return nil
}

// resolveOPA reads the policy's builtins and entrypoints, once per plugin.
func (p *Plugin) resolveOPA(ctx context.Context, in *instance) error {
	var names map[string]int32
	if err := in.opaExportJSON(ctx, opaExportBuiltins, &names); err != nil {
		return err
	}
	builtins, err := resolveBuiltins(names)
	if err != nil {
		return err
	}
	var entries map[string]int32
	if err := in.opaExportJSON(ctx, opaExportEntrypoint, &entries); err != nil {
		return err
	}
	entry := map[uint32]int32{}
	var phases uint32
	for bit, name := range map[uint32]string{abi.PhaseAuthorize: OPAEntrypointAuthorize, abi.PhaseValidate: OPAEntrypointValidate} {
		if id, ok := entries[name]; ok {
			entry[bit], phases = id, phases|bit
		}
	}
	if phases == 0 {
		return fmt.Errorf("is an OPA policy with neither entrypoint %s nor %s (it has %v): build it with opa build -t wasm -e %s -e %s",
			OPAEntrypointAuthorize, OPAEntrypointValidate, sortedKeys(entries), OPAEntrypointAuthorize, OPAEntrypointValidate)
	}
	p.opa.builtins, p.opa.entry = builtins, entry
	for _, b := range builtins {
		p.info.Builtins = append(p.info.Builtins, b.name)
	}
	slices.Sort(p.info.Builtins)
	p.info.phases, p.info.Phases = phases, phaseNames(phases)
	return nil
}

func opaVersion(mod api.Module) (major, minor uint32, err error) {
	g, gm := mod.ExportedGlobal(opaGlobalABI), mod.ExportedGlobal(opaGlobalABIMinor)
	if g == nil || gm == nil {
		return 0, 0, fmt.Errorf("is an OPA policy without the globals %s and %s (built before OPA v0.27): rebuild it with a current opa build -t wasm", opaGlobalABI, opaGlobalABIMinor)
	}
	return uint32(g.Get()), uint32(gm.Get()), nil
}

// opaParse copies JSON text into the instance and parses it with parse
// (opa_json_parse or opa_value_parse), returning the value's address.
func (in *instance) opaParse(ctx context.Context, parse api.Function, text []byte) (uint32, error) {
	r, err := in.opa.malloc.Call(ctx, uint64(len(text)))
	if err != nil {
		return 0, fmt.Errorf("%s: %w", opaExportMalloc, opaCallErr(err))
	}
	ptr := uint32(r[0])
	if !in.mem.Write(ptr, text) {
		return 0, fmt.Errorf("%s(%d) returned %#x, outside memory", opaExportMalloc, len(text), ptr)
	}
	if r, err = parse.Call(ctx, uint64(ptr), uint64(len(text))); err != nil {
		return 0, fmt.Errorf("%s: %w", parse.Definition().ExportNames()[0], opaCallErr(err))
	}
	if r[0] == 0 {
		return 0, errors.New("not valid JSON for OPA")
	}
	return uint32(r[0]), nil
}

// opaExportJSON calls an export that returns a value and decodes its JSON.
func (in *instance) opaExportJSON(ctx context.Context, export string, v any) error {
	r, err := in.mod.ExportedFunction(export).Call(ctx)
	if err != nil {
		return memorySuspect{fmt.Errorf("%s: %w", export, opaCallErr(err))}
	}
	text, err := in.opaDump(ctx, in.opa.jsonDump, uint32(r[0]))
	if err != nil {
		return fmt.Errorf("%s: %w", export, err)
	}
	if err := json.Unmarshal(text, v); err != nil {
		return fmt.Errorf("%s: %w", export, err)
	}
	return nil
}

// opaDump serialises the value at addr with dump (opa_json_dump or
// opa_value_dump) and returns the text, which stays valid until the next
// call into the instance.
func (in *instance) opaDump(ctx context.Context, dump api.Function, addr uint32) ([]byte, error) {
	r, err := dump.Call(ctx, uint64(addr))
	if err != nil {
		return nil, opaCallErr(err)
	}
	return in.cString(uint32(r[0]))
}

// cString reads the NUL-terminated text at ptr.
func (in *instance) cString(ptr uint32) ([]byte, error) {
	size := in.mem.Size()
	if ptr >= size {
		return nil, fmt.Errorf("text at %#x is outside memory", ptr)
	}
	b, _ := in.mem.Read(ptr, size-ptr)
	n := bytes.IndexByte(b, 0)
	if n < 0 {
		return nil, fmt.Errorf("text at %#x has no end", ptr)
	}
	return b[:n], nil
}

// callOPA evaluates the entrypoint of the phase being called (in.opa.entry)
// with input (JSON) through opa_eval: the input is written where the heap
// starts, and the heap given to opa_eval starts after it. The answer is a
// Result as from a Plantgate module: 0 allows, anything else is the deny in
// in.opa.decision.
func (in *instance) callOPA(ctx context.Context, fn api.Function, input []byte) (abi.Result, error) {
	o := in.opa
	if len(input) > abi.MaxRequest {
		return 0, fault(fmt.Sprintf("input of %d bytes, over the %d bytes (abi.MaxRequest) a module is sent", len(input), abi.MaxRequest), nil)
	}
	end := uint64(o.heap) + uint64(len(input))
	if size := uint64(in.mem.Size()); end > size {
		if _, ok := in.mem.Grow(uint32((end - size + 65535) / 65536)); !ok {
			return 0, fault(fmt.Sprintf("input of %d bytes does not fit within limits.memory_mib", len(input)), nil)
		}
	}
	in.mem.Write(o.heap, input)
	o.now = time.Now()
	o.stack = [7]uint64{0, uint64(uint32(o.entry)), uint64(o.data), uint64(o.heap), uint64(len(input)), end, 0}
	if err := fn.CallWithStack(ctx, o.stack[:]); err != nil {
		var ab *opaAbortError
		var be *opaBuiltinError
		switch {
		case errors.As(err, &ab):
			return 0, fault(opaExportEval+" aborted: "+ab.msg, nil)
		case errors.As(err, &be):
			return 0, fault(fmt.Sprintf("%s: builtin %s failed: %v", opaExportEval, be.name, be.err), nil)
		}
		return 0, callFailed(opaExportEval, err)
	}
	result, err := in.cString(uint32(o.stack[0]))
	if err != nil {
		return 0, badDecision(opaExportEval+" result", err)
	}
	return o.decide(result)
}

// opaCallErr names an abort in a set-up call.
func opaCallErr(err error) error {
	var ab *opaAbortError
	if errors.As(err, &ab) {
		return fmt.Errorf("aborted: %s", ab.msg)
	}
	return err
}

// entryFor sets the entrypoint of the next call, by phase.
func (p *Plugin) entryFor(in *instance, phase uint32) {
	o := in.opa
	o.entry, o.firstCode = p.opa.entry[phase], phaseFirstCode(phase)
	o.entryName = OPAEntrypointAuthorize
	if phase == abi.PhaseValidate {
		o.entryName = OPAEntrypointValidate
	}
}

// opaAbortError is opa_abort called: the policy cannot go on.
type opaAbortError struct{ msg string }

func (e *opaAbortError) Error() string { return "opa_abort: " + e.msg }

// opaAbort implements env.opa_abort (msg_ptr): a fault. The message goes
// to the log, never to the client.
func (p *Plugin) opaAbort(ctx context.Context, mod api.Module, stack []uint64) {
	panic(&opaAbortError{msg: guestText(mod.Memory(), api.DecodeU32(stack[0]))})
}

// opaPrintln implements env.opa_println (msg_ptr): Rego's print(), logged
// at debug level through the plugin's rate limit.
func (p *Plugin) opaPrintln(ctx context.Context, mod api.Module, stack []uint64) {
	hostExitIfSpent(ctx)
	p.logLine(ctx, slog.LevelDebug, []byte(guestText(mod.Memory(), api.DecodeU32(stack[0]))))
}

// guestText reads a NUL-terminated text of at most abi.MaxLog bytes.
func guestText(mem api.Memory, ptr uint32) string {
	if mem == nil || ptr >= mem.Size() {
		return "(unreadable)"
	}
	b, _ := mem.Read(ptr, min(mem.Size()-ptr, abi.MaxLog))
	if n := bytes.IndexByte(b, 0); n >= 0 {
		b = b[:n]
	}
	return string(slices.Clone(b))
}
