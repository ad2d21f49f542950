package loopguard

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/tetratelabs/wazero"
)

// fixtures are every committed module: the ABI fixtures (WAT-built) and the
// bundled plugins built with standard Go (testdata/abi1).
func fixtures(t testing.TB) map[string][]byte {
	t.Helper()
	var paths []string
	for _, dir := range []string{"abi", "abi1"} {
		m, err := filepath.Glob(filepath.Join("..", "..", "..", "testdata", dir, "*.wasm"))
		if err != nil {
			t.Fatal(err)
		}
		paths = append(paths, m...)
	}
	if len(paths) < 10 {
		t.Fatalf("found %d fixtures", len(paths))
	}
	out := map[string][]byte{}
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		out[p] = b
	}
	return out
}

// TestRoundTrip: walking every function of every fixture and inserting
// nothing gives the input back byte for byte.
func TestRoundTrip(t *testing.T) {
	for name, bin := range fixtures(t) {
		if !bytes.HasPrefix(bin, []byte(wasmHeader)) {
			continue // notwasm.wasm: the loader refuses it before
		}
		out, err := rewrite(bin, false)
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		if !bytes.Equal(out, bin) {
			t.Errorf("%s: round trip changed the module (%d → %d bytes)", name, len(bin), len(out))
		}
	}
}

// TestInstrumentValidates: every instrumented fixture that wazero compiles
// as it is still compiles, and exports the globals (a second pass finds
// them taken).
func TestInstrumentValidates(t *testing.T) {
	ctx := context.Background()
	rt := wazero.NewRuntime(ctx)
	defer rt.Close(ctx)
	guarded := 0
	for name, bin := range fixtures(t) {
		orig, err := rt.CompileModule(ctx, bin)
		if err != nil {
			continue // a fixture of a broken module
		}
		_ = orig.Close(ctx)
		out, err := Instrument(bin)
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		cm, err := rt.CompileModule(ctx, out)
		if err != nil {
			t.Errorf("%s: instrumented module does not compile: %v", name, err)
			continue
		}
		if _, err := Instrument(out); err == nil {
			t.Errorf("%s: instrumenting twice was not refused", name)
		}
		if len(out) > len(bin) {
			guarded++
		}
		_ = cm.Close(ctx)
	}
	if guarded < 5 {
		t.Fatalf("only %d modules instrumented", guarded)
	}
}

// FuzzWalk: no input makes the rewriter panic, and whatever it can walk
// round-trips exactly.
func FuzzWalk(f *testing.F) {
	for _, bin := range fixtures(f) {
		if len(bin) < 4096 {
			f.Add(bin)
		}
	}
	f.Fuzz(func(t *testing.T, bin []byte) {
		out, err := rewrite(bin, false)
		if err == nil && !bytes.Equal(out, bin) {
			t.Fatalf("round trip changed %x into %x", bin, out)
		}
		_, _ = Instrument(bin)
	})
}

// BenchmarkInstrument: the load-time cost of rewriting a bundled plugin
// (a standard-Go module of ~3.6 MB).
func BenchmarkInstrument(b *testing.B) {
	bin, err := os.ReadFile(filepath.Join("..", "..", "..", "testdata", "abi1", "10-bearer-auth.wasm"))
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(bin)))
	for b.Loop() {
		if _, err := Instrument(bin); err != nil {
			b.Fatal(err)
		}
	}
}
