package wasm

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"

	"github.com/go-json-experiment/json/jsontext"
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
// string, is never valid JSON), and is read token by token at a fraction
// of the parser's cost; anything else, and a string that is not valid
// UTF-8, goes to the parser, as ast.ParseTerm.
func opaTerm(text []byte) (*ast.Term, error) {
	d := jsontext.NewDecoder(bytes.NewReader(text))
	if v, err := opaJSONValue(d); err == nil {
		if _, err := d.ReadToken(); err == io.EOF {
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

// opaJSONValue reads the next JSON value of d as an OPA value; a number
// keeps its text, as ast.ParseTerm keeps it.
func opaJSONValue(d *jsontext.Decoder) (ast.Value, error) {
	tok, err := d.ReadToken()
	if err != nil {
		return nil, err
	}
	switch tok.Kind() {
	case 'n':
		return ast.Null{}, nil
	case 't', 'f':
		return ast.Boolean(tok.Bool()), nil
	case '"':
		return ast.String(tok.String()), nil
	case '0':
		return ast.Number(tok.String()), nil
	case '[':
		var elems []*ast.Term
		for d.PeekKind() != ']' {
			v, err := opaJSONValue(d)
			if err != nil {
				return nil, err
			}
			elems = append(elems, ast.NewTerm(v))
		}
		_, err := d.ReadToken()
		return ast.NewArray(elems...), err
	case '{':
		obj := ast.NewObject()
		for d.PeekKind() != '}' {
			k, err := d.ReadToken()
			if err != nil {
				return nil, err
			}
			key := ast.StringTerm(k.String()) // before the next read voids k
			v, err := opaJSONValue(d)
			if err != nil {
				return nil, err
			}
			obj.Insert(key, ast.NewTerm(v))
		}
		_, err := d.ReadToken()
		return obj, err
	}
	return nil, fmt.Errorf("unexpected %v", tok.Kind())
}
