package wasm

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/plantgate/plantgate/host"
	"github.com/plantgate/plantgate/host/wasm/wasmtest"
)

// BenchmarkOPAEval bounds what a Rego policy can cost: one validate call
// into a policy that answers true without reading its input (OPA's Wasm
// evaluator's own cost per evaluation, with the host's), one that reads
// the plant's name, one that calls sprintf (a builtin OPA does not compile
// into the module: a round trip to the host's topdown), and the Rego
// plant-rules, beside the bundled Go
// plant-rules, in the same run and in turn as BenchmarkKits does. It
// reports each one's ns per call and its ratio to Go (<policy>-x-go).
//
//	go test -run '^$' -bench OPAEval ./host/wasm/
func BenchmarkOPAEval(b *testing.B) {
	wasmtest.NeedOPA(b)
	opa, _ := wasmtest.OPA()
	dir := b.TempDir()
	files := map[string]string{"go": filepath.Join(dir, "go.wasm"), "plant-rules": filepath.Join(dir, "rego.wasm")}
	if err := wasmtest.Build(files["go"], "./plugins/plant-rules"); err != nil {
		b.Fatal(err)
	}
	if err := wasmtest.BuildKit("rego", "plant-rules", files["plant-rules"]); err != nil {
		b.Fatal(err)
	}
	names := []string{"go", "empty", "read-name", "sprintf", "plant-rules"}
	for name, src := range map[string]string{
		"empty":     "package plantgate\n\nvalidate := true\n",
		"read-name": "package plantgate\n\nvalidate if count(input.plant.name) > 0\n",
		"sprintf":   "package plantgate\n\nvalidate if sprintf(\"%s %d\", [input.plant.name, input.plant.id]) != \"\"\n",
	} {
		rego := filepath.Join(dir, name+".rego")
		if err := os.WriteFile(rego, []byte(src), 0o644); err != nil {
			b.Fatal(err)
		}
		files[name] = filepath.Join(dir, name+".wasm")
		if err := wasmtest.BuildRego(opa, files[name], []string{"plantgate/validate"}, rego); err != nil {
			b.Fatal(err)
		}
	}
	plugins := benchPlugins(b, files, names)
	benchInTurn(b, names, plugins, host.Plant{ID: 42, Name: "Monstera deliciosa", Tag: "tropical", HasTag: true}, false)
}
