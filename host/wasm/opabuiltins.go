package wasm

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/topdown"
	"github.com/open-policy-agent/opa/v1/topdown/builtins"
	"github.com/tetratelabs/wazero/api"
)

// Builtins OPA does not compile into the module arrive through
// env.opa_builtinN. They run OPA's own Go implementations (topdown), so a
// policy means in Plantgate what it means in opa eval and opa test
// (TestOPABuiltinsMatchOPAEval), except those refused at load: a builtin
// that reaches outside the gateway or answers differently on the same
// input would make a decision that cannot be replayed, shadowed or tested.

// opaRefused names the builtins refused at load, with why.
var opaRefused = map[string]string{
	"http.send":              "it reaches out over the network",
	"net.lookup_ip_addr":     "it reaches out to DNS",
	"opa.runtime":            "it reads the process's environment and configuration",
	"rego.parse_module":      "it runs OPA's compiler inside a decision",
	"rand.intn":              "it is random",
	"uuid.rfc4122":           "it is random",
	"io.jwt.encode_sign":     "its signatures are random for ES and PS keys",
	"io.jwt.encode_sign_raw": "its signatures are random for ES and PS keys",
}

// OPABuiltinRefused reports why a builtin is refused, "" when it is not.
func OPABuiltinRefused(name string) string { return opaRefused[name] }

// OPABuiltins lists the builtins a policy may call through opa_builtinN:
// every one OPA implements in Go, less the refused ones.
func OPABuiltins() []string {
	var names []string
	for _, b := range ast.Builtins {
		if _, refused := opaRefused[b.Name]; !refused && topdown.GetBuiltin(b.Name) != nil && !b.IsDeprecated() {
			names = append(names, b.Name)
		}
	}
	sort.Strings(names)
	return names
}

// opaBuiltin is one builtin a policy calls.
type opaBuiltin struct {
	name string
	fn   topdown.BuiltinFunc
}

// resolveBuiltins maps a policy's builtins (its "builtins" export) to
// their implementations, refusing the policy for a builtin it cannot have.
func resolveBuiltins(names map[string]int32) (map[int32]opaBuiltin, error) {
	out := make(map[int32]opaBuiltin, len(names))
	var refused []string
	for _, name := range sortedKeys(names) {
		if why := opaRefused[name]; why != "" {
			refused = append(refused, fmt.Sprintf("%s (%s)", name, why))
			continue
		}
		fn := topdown.GetBuiltin(name)
		if fn == nil {
			refused = append(refused, name+" (unknown to OPA "+opaVersionName+")")
			continue
		}
		out[names[name]] = opaBuiltin{name: name, fn: fn}
	}
	if len(refused) > 0 {
		return nil, fmt.Errorf("is an OPA policy that calls builtins Plantgate refuses: %s", strings.Join(refused, ", "))
	}
	return out, nil
}

// opaVersionName is the OPA release whose builtins the host runs.
const opaVersionName = "v1.22.3"

// opaBuiltinError is a builtin that halted the evaluation: a fault.
type opaBuiltinError struct {
	name string
	err  error
}

func (e *opaBuiltinError) Error() string { return e.name + ": " + e.err.Error() }

// opaBuiltinN implements env.opa_builtinN (id, ctx, a1…aN) -> value: the
// arguments are read with opa_value_dump, the builtin runs on OPA's terms,
// and its answer is written back with opa_value_parse; 0 is undefined.
// Errors that are not a halt make the call undefined, as opa eval's
// non-strict mode does.
func (p *Plugin) opaBuiltinN(n int) api.GoModuleFunc {
	return func(ctx context.Context, mod api.Module, stack []uint64) {
		hostExitIfSpent(ctx)
		c, ok := ctx.(*callContext)
		if !ok || c.opa == nil {
			panic(&opaAbortError{msg: "builtin called outside an evaluation"})
		}
		in := c.opa
		id := api.DecodeI32(stack[0])
		b, ok := p.opa.builtins[id]
		if !ok {
			panic(&opaAbortError{msg: fmt.Sprintf("unknown builtin id %d", id)})
		}
		args := make([]*ast.Term, n)
		for i := range n {
			text, err := in.opaDump(ctx, in.opa.valueDump, api.DecodeU32(stack[2+i]))
			if err != nil {
				panic(&opaBuiltinError{b.name, fmt.Errorf("argument %d: %w", i+1, err)})
			}
			if args[i], err = opaTerm(text); err != nil {
				panic(&opaBuiltinError{b.name, fmt.Errorf("argument %d: %w", i+1, err)})
			}
		}
		var out *ast.Term
		bctx := topdown.BuiltinContext{
			Context: ctx,
			Seed:    rand.Reader,
			Time:    ast.NumberTerm(json.Number(strconv.FormatInt(in.opa.now.UnixNano(), 10))),
			Cache:   builtins.Cache{},
			Cancel:  topdown.NewCancel(),
		}
		err := b.fn(bctx, args, func(t *ast.Term) error { out = t; return nil })
		if _, halt := err.(topdown.Halt); halt {
			panic(&opaBuiltinError{b.name, err})
		}
		if err != nil || out == nil {
			stack[0] = 0
			return
		}
		addr, err := in.opaParse(ctx, in.opa.valueParse, []byte(out.String()))
		if err != nil {
			panic(&opaBuiltinError{b.name, fmt.Errorf("result: %w", err)})
		}
		stack[0] = api.EncodeU32(addr)
	}
}

// opaTermOptions are ast.ParseTerm's options with the capabilities made
// once: ParseTerm makes them, sorting every builtin OPA has, on each call,
// which cost a sprintf's round trip more than the rest of it.
var opaTermOptions = ast.ParserOptions{SkipRules: true,
	Capabilities: ast.CapabilitiesForThisVersion(ast.CapabilitiesRegoVersion(ast.RegoUndefined))}

// opaTerm reads a value opa_value_dump wrote. Text that is JSON means in
// Rego what it means in JSON (a set, or an object with a key that is not a
// string, is never valid JSON), and a JSON decoder reads it at a fraction
// of the parser's cost; anything else goes to the parser, as ParseTerm.
func opaTerm(text []byte) (*ast.Term, error) {
	if json.Valid(text) {
		if v, err := ast.ValueFromReader(bytes.NewReader(text)); err == nil {
			return ast.NewTerm(v), nil
		}
	}
	body, err := ast.ParseBodyWithOpts(string(text), opaTermOptions)
	if err != nil {
		return nil, fmt.Errorf("failed to parse term: %w", err)
	}
	if len(body) != 1 {
		return nil, fmt.Errorf("expected exactly one term but got: %v", body)
	}
	term, ok := body[0].Terms.(*ast.Term)
	if !ok {
		return nil, fmt.Errorf("expected term but got %v", body[0].Terms)
	}
	return term, nil
}
