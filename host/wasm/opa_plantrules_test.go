package wasm

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"unicode"

	"github.com/plantgate/plantgate/host"
	"github.com/plantgate/plantgate/host/wasm/wasmtest"
)

// TestOPAPlantRulesControl: the Rego plant-rules, run by OPA's Wasm
// runtime, finds a control character exactly where Go's unicode.IsControl
// does (the Go plant-rules' rule) for every code point below U+3100, past
// a "." and after printable ASCII, and names it in the deny as the Go one
// does. The policy tests characters against the control ranges by string
// order and takes the code point from its index in a string of them.
func TestOPAPlantRulesControl(t *testing.T) {
	t.Parallel()
	wasmtest.NeedKitToolchain(t, "rego")
	out := filepath.Join(t.TempDir(), "plant-rules.wasm")
	if err := wasmtest.BuildKit("rego", "plant-rules", out); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	p, err := LoadPlugin(ctx, out, nil, Options{CacheDir: cacheDir, Limits: Limits{Instances: 1, MaxCalls: maxMaxCalls}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close(ctx) })
	for r := rune(0); r < 0x3100; r++ {
		if r >= 0xd800 && r < 0xe000 {
			continue // surrogates are not characters
		}
		err := p.Validate(ctx, host.Plant{ID: 1, Name: "Mr. a" + string(r) + "b.c"}, "ci")
		want := "<nil>"
		if unicode.IsControl(r) {
			want = fmt.Sprintf("40052: name must not contain control characters, found U+%04X at character 6", r)
		}
		if fmt.Sprint(err) != want {
			t.Fatalf("U+%04X: got %v, want %s", r, err, want)
		}
	}
}
