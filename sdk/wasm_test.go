package sdk_test

import (
	"context"
	"crypto/sha256"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/imports/wasi_snapshot_preview1"

	"github.com/plantgate/plantgate/sdk/abi"
)

// These tests build the bundled plugins with the real toolchain and run them
// in wazero, proving the wasip1 half of the SDK: exports, imports, address
// translation and the guest's allocation-free call path. They are a minimal
// host; the real one is host/wasm.

// wasmPlugins maps a bundled plugin's name to its module, built in TestMain.
var wasmPlugins = map[string][]byte{}

func TestMain(m *testing.M) { os.Exit(buildPlugins(m)) }

func buildPlugins(m *testing.M) int {
	goBin, err := exec.LookPath("go")
	if err != nil {
		fmt.Fprintln(os.Stderr, "sdk: no go command; the wasm tests will skip")
		return m.Run()
	}
	dir, err := os.MkdirTemp("", "plantgate-sdk-wasm")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	for _, name := range []string{"plant-rules", "bearer-auth"} {
		out := filepath.Join(dir, name+".wasm")
		cmd := exec.Command(goBin, "build", "-buildmode=c-shared", "-o", out, "../plugins/"+name)
		cmd.Env = append(os.Environ(), "GOOS=wasip1", "GOARCH=wasm")
		if b, err := cmd.CombinedOutput(); err != nil {
			fmt.Fprintf(os.Stderr, "build %s: %v\n%s", name, err, b)
			return 1
		}
		if wasmPlugins[name], err = os.ReadFile(out); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
	}
	return m.Run()
}

// wasmPlugin is one instance of a plugin module.
type wasmPlugin struct {
	t   testing.TB
	ctx context.Context
	mod api.Module
}

// newWasmPlugin instantiates a bundled plugin with a stub host module whose
// token store holds tokens (digest → record).
func newWasmPlugin(t testing.TB, name string, tokens map[[32]byte][]byte) *wasmPlugin {
	t.Helper()
	bin, ok := wasmPlugins[name]
	if !ok {
		t.Skip("plugin not built")
	}
	ctx := context.Background()
	r := wazero.NewRuntime(ctx)
	t.Cleanup(func() { r.Close(ctx) })
	wasi_snapshot_preview1.MustInstantiate(ctx, r)
	_, err := r.NewHostModuleBuilder(abi.HostModule).
		NewFunctionBuilder().WithFunc(func(_ context.Context, m api.Module, level int32, ptr, n uint32) {
		msg, _ := m.Memory().Read(ptr, n)
		t.Logf("plugin log %d: %s", level, msg)
	}).Export(abi.ImportLog).
		NewFunctionBuilder().WithFunc(func(_ context.Context, m api.Module, hashPtr, hashLen, outPtr, outCap uint32) int32 {
		digest, ok := m.Memory().Read(hashPtr, hashLen)
		if !ok || hashLen != abi.DigestSize {
			return abi.LookupBadArgument
		}
		rec, ok := tokens[[32]byte(digest)]
		if !ok {
			return abi.LookupNotFound
		}
		if uint32(len(rec)) <= outCap && !m.Memory().Write(outPtr, rec) {
			return abi.LookupBadArgument
		}
		return int32(len(rec))
	}).Export(abi.ImportTokenLookup).
		Instantiate(ctx)
	if err != nil {
		t.Fatal(err)
	}
	mod, err := r.InstantiateWithConfig(ctx, bin, wazero.NewModuleConfig().
		WithName("").WithStartFunctions(abi.ExportInitialize).WithSysWalltime().WithSysNanotime())
	if err != nil {
		t.Fatal(err)
	}
	return &wasmPlugin{t: t, ctx: ctx, mod: mod}
}

func (p *wasmPlugin) call(export string, params ...uint64) uint64 {
	p.t.Helper()
	res, err := p.mod.ExportedFunction(export).Call(p.ctx, params...)
	if err != nil {
		p.t.Fatalf("%s: %v", export, err)
	}
	return res[0]
}

// phase writes msg into the plugin's buffer, calls export and returns the
// decision as sdk.Decision.String would print it.
func (p *wasmPlugin) phase(export string, msg []byte) string {
	p.t.Helper()
	ptr := uint32(p.call(abi.ExportBuffer, uint64(len(msg))))
	if ptr == 0 || !p.mod.Memory().Write(ptr, msg) {
		p.t.Fatalf("no buffer of %d bytes at %#x", len(msg), ptr)
	}
	res := p.call(export, uint64(ptr), uint64(len(msg)))
	if res == abi.ResultAllow {
		return "allow"
	}
	rec, ok := p.mod.Memory().Read(abi.UnpackResult(res))
	if !ok {
		p.t.Fatalf("%s: result %#x outside memory", export, res)
	}
	d, err := abi.ParseDecision(rec)
	switch {
	case err != nil:
		p.t.Fatalf("%s: %v", export, err)
	case d.Verdict == abi.VerdictAllow:
		return "allow as " + string(d.Text)
	case d.Verdict == abi.VerdictDeny:
		return fmt.Sprintf("deny %d: %s", d.Code, d.Text)
	}
	return "fault: " + string(d.Text)
}

func TestWasmPlantRules(t *testing.T) {
	p := newWasmPlugin(t, "plant-rules", nil)
	if v := p.call(abi.ExportABIVersion); v != uint64(abi.Version) {
		t.Errorf("abi version %d", v)
	}
	if ph := p.call(abi.ExportPhases); ph != uint64(abi.PhaseValidate) {
		t.Errorf("phases %#b, want validate", ph)
	}
	// plant-rules has defaults: it does not call RequireConfig.
	if r := p.call(abi.ExportConfigRequired); r != 0 {
		t.Errorf("%s answered %d, want 0", abi.ExportConfigRequired, r)
	}
	steps := []struct {
		export string
		msg    []byte
		want   string
	}{
		{abi.ExportConfigure, []byte(`{"name_max": 5}`), "allow"},
		{abi.ExportValidate, abi.AppendValidate(nil, 1, "Fern", "green", true, "ci"), "allow"},
		{abi.ExportValidate, abi.AppendValidate(nil, 1, "Monstera", "", false, ""),
			"deny 40051: name must be 1–5 characters after trimming, got 8"},
		{abi.ExportValidate, abi.AppendValidate(nil, 0, "Fern", "", false, ""), "deny 40050: id must be at least 1, got 0"},
		{abi.ExportConfigure, []byte(`{"colour": 1}`),
			`fault: plant-rules config: unknown key "colour" (known: allow_control, id_min, name_max, name_min, tag_max, tag_min)`},
		{abi.ExportAuthorize, abi.AppendAuthorize(nil, "POST", "/plants", "x"),
			"fault: sdk: authorize called but the plugin registered no authorize handler"},
		{abi.ExportValidate, []byte{1, 2, 3}, "fault: sdk: validate request: " + abi.ErrShort.Error()},
	}
	for _, s := range steps {
		if got := p.phase(s.export, s.msg); got != s.want {
			t.Errorf("%s(%q):\ngot  %s\nwant %s", s.export, s.msg, got, s.want)
		}
	}
	// A request that is not where plantgate_buffer said is refused.
	if res := p.call(abi.ExportValidate, 8, 16); res == abi.ResultAllow {
		t.Error("validate of a request outside the buffer allowed")
	}
	if ptr := p.call(abi.ExportBuffer, 64<<20); ptr != 0 {
		t.Errorf("buffer(64 MiB) = %#x, want 0", ptr)
	}
}

func TestWasmBearerAuth(t *testing.T) {
	sum := sha256.Sum256([]byte("s3cret"))
	tokens := map[[32]byte][]byte{
		sum: abi.AppendTokenRecord(nil, 1, 0, false, sum[:], "ci", "plants:read plants:write"),
	}
	p := newWasmPlugin(t, "bearer-auth", tokens)
	if ph := p.call(abi.ExportPhases); ph != uint64(abi.PhaseAuthorize) {
		t.Errorf("phases %#b, want authorize", ph)
	}
	for _, s := range []struct{ credential, want string }{
		{"s3cret", "allow as ci"},
		{"guess", "deny 40151: invalid token"},
		{"", "deny 40150: missing bearer token"},
	} {
		if got := p.phase(abi.ExportAuthorize, abi.AppendAuthorize(nil, "POST", "/plants", s.credential)); got != s.want {
			t.Errorf("credential %q: got %s, want %s", s.credential, got, s.want)
		}
	}
	// An expired token: the guest's clock is the real one.
	tokens[sum] = abi.AppendTokenRecord(nil, 1, time.Now().UnixMilli(), false, sum[:], "ci", "plants:write")
	if got := p.phase(abi.ExportAuthorize, abi.AppendAuthorize(nil, "POST", "/plants", "s3cret")); got != "deny 40153: token expired" {
		t.Errorf("expired token: %s", got)
	}
}

// TestWasmNoGrowth makes 100k allowed calls after a warm-up and checks the
// guest's linear memory did not grow: a guest that allocates per call grows
// its heap within a few thousand calls, and linear memory never shrinks.
// The deny path of plant-rules, which formats its message, is the control
// that shows the check can fail.
func TestWasmNoGrowth(t *testing.T) {
	if testing.Short() {
		t.Skip("100k wasm calls")
	}
	const credential = "pg_5J9x2mQvT7cR1nB8kW4zL6yH3dF0sA2eG9uP1oI7"
	sum := sha256.Sum256([]byte(credential))
	tokens := map[[32]byte][]byte{sum: abi.AppendTokenRecord(nil, 1, 0, false, sum[:], "ci", "plants:write")}
	for _, tt := range []struct {
		name, plugin, export string
		msg                  []byte
		want                 string
		grows                bool
	}{
		{"validate allow", "plant-rules", abi.ExportValidate,
			abi.AppendValidate(nil, 7, "  Monstera deliciosa ", "tropical", true, "ci"), "allow", false},
		{"authorize allow", "bearer-auth", abi.ExportAuthorize,
			abi.AppendAuthorize(nil, "POST", "/plants", credential), "allow as ci", false},
		{"control: validate deny allocates", "plant-rules", abi.ExportValidate,
			abi.AppendValidate(nil, 0, "Fern", "", false, ""), "deny 40050: id must be at least 1, got 0", true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			p := newWasmPlugin(t, tt.plugin, tokens)
			if got := p.phase(tt.export, tt.msg); got != tt.want {
				t.Fatalf("got %s, want %s", got, tt.want)
			}
			f := p.mod.ExportedFunction(tt.export)
			ptr := uint32(p.call(abi.ExportBuffer, uint64(len(tt.msg))))
			p.mod.Memory().Write(ptr, tt.msg)
			stack := make([]uint64, 2)
			run := func(n int) {
				for range n {
					stack[0], stack[1] = uint64(ptr), uint64(len(tt.msg))
					if err := f.CallWithStack(p.ctx, stack); err != nil {
						t.Fatal(err)
					}
				}
			}
			run(1000)
			before := p.mod.Memory().Size()
			start := time.Now()
			run(100_000)
			perCall := time.Since(start) / 100_000
			after := p.mod.Memory().Size()
			if grew := after > before; grew != tt.grows {
				t.Errorf("linear memory went from %d to %d KiB in 100k calls; want growth %v", before>>10, after>>10, tt.grows)
			}
			t.Logf("%v per call; linear memory %d → %d KiB", perCall, before>>10, after>>10)
		})
	}
}

// BenchmarkWasmValidate measures one plant-rules validate call through
// wazero, with the SDK's decode, handler and yield:
//
//	go test -run '^$' -bench WasmValidate ./sdk
func BenchmarkWasmValidate(b *testing.B) {
	p := newWasmPlugin(b, "plant-rules", nil)
	msg := abi.AppendValidate(nil, 7, "  Monstera deliciosa ", "tropical", true, "ci")
	ptr := uint32(p.call(abi.ExportBuffer, uint64(len(msg))))
	p.mod.Memory().Write(ptr, msg)
	f := p.mod.ExportedFunction(abi.ExportValidate)
	stack := make([]uint64, 2)
	b.ReportAllocs()
	for b.Loop() {
		stack[0], stack[1] = uint64(ptr), uint64(len(msg))
		if err := f.CallWithStack(p.ctx, stack); err != nil {
			b.Fatal(err)
		}
	}
	if stack[0] != abi.ResultAllow {
		b.Fatalf("result %#x, want allow", stack[0])
	}
}
