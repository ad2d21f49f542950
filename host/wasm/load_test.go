package wasm

import (
	"context"
	"crypto/sha256"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	jsonv2 "github.com/go-json-experiment/json"

	"github.com/plantgate/plantgate/host"
)

func TestLoadPluginErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		fixture string
		config  string // "" for none
		limits  Limits
		want    string
	}{
		{"not wasm", "notwasm", "", Limits{},
			`plugin notwasm.wasm: not a WebAssembly module (no "\0asm" header): build a wasm32 module (see docs/abi.md#the-module); a Go plugin with GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared`},
		{"missing file", "nosuch", "", Limits{},
			"plugin nosuch.wasm: open ../../testdata/abi/nosuch.wasm: no such file or directory"},
		{"missing export", "nobuffer", "", Limits{},
			`plugin nobuffer.wasm: missing export "plantgate_buffer" with signature (i32) -> i32`},
		{"wrong export signature", "badsig", "", Limits{},
			`plugin badsig.wasm: export "plantgate_validate" has signature (i32) -> i64, want (i32, i32) -> i64`},
		{"no exported memory", "nomemory", "", Limits{},
			`plugin nomemory.wasm: missing exported memory "memory"`},
		{"unknown host import", "badimport", "", Limits{},
			`plugin badimport.wasm: imports unknown host function "plantgate.kv_scan"`},
		{"wrong host import signature", "badimportsig", "", Limits{},
			`plugin badimportsig.wasm: import "plantgate.log" has signature (i32, i32) -> (), want (i32, i32, i32) -> ()`},
		{"command, not reactor", "command", "", Limits{},
			`plugin command.wasm: built as a command (it exports "_start"): build it as a reactor (Rust: --crate-type cdylib; C: -mexec-model=reactor), so the host can call it between requests (see docs/abi.md#start-up)`},
		{"wrong ABI version", "abi3", "", Limits{},
			"plugin abi3.wasm: built for ABI version 3, this host speaks 1 to 2"},
		{"no phases", "nophases", "", Limits{},
			"plugin nophases.wasm: plantgate_phases returned 0: it must return the phases served, 1 (authorize), 2 (validate) or 3 (both) (see docs/abi.md#phases-and-deny-codes)"},
		{"unknown phase bit", "badphases", "", Limits{},
			"plugin badphases.wasm: plantgate_phases returned 0x5: unknown phase bits 0x4"},
		{"phase without export", "missingphase", "", Limits{},
			`plugin missingphase.wasm: serves the validate phase but does not export "plantgate_validate"`},
		{"configure refuses", "configure", "false", Limits{},
			"plugin configure.wasm: config refused: config rejected by fixture (sidecar configure.json; docs/abi.md#config)"},
		{"configure refuses long config", "configure", `"` + strings.Repeat("a", 1100) + `"`, Limits{},
			"plugin configure.wasm: config refused: config too long (sidecar configure.json; docs/abi.md#config)"},
		{"config without configure", "allow", `{"a":1}`, Limits{},
			`plugin allow.wasm: has a config but does not export "plantgate_configure"`},
		{"new instance over the recycle threshold", "bigmem", "", Limits{MemoryMiB: 1},
			`plugin bigmem.wasm: "limits.memory_mib" is 1, below what this module needs: a new instance uses 832 KiB, and one over 3/4 of memory_mib is recycled; set "memory_mib" to 2 or more`},
		{"limit out of range", "allow", "", Limits{Instances: 2000},
			`plugin allow.wasm: "limits.instances" must be an integer from 1 to 1024, got 2000`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			opts, _ := testOptions()
			opts.Limits = tt.limits.Or(Limits{Instances: 2})
			var config []byte
			if tt.config != "" {
				config = []byte(tt.config)
			}
			p, err := LoadPlugin(context.Background(), fixture(tt.fixture), config, opts)
			if err == nil {
				_ = p.Close(context.Background())
				t.Fatalf("LoadPlugin succeeded, want %q", tt.want)
			}
			if err.Error() != tt.want {
				t.Fatalf("err =\n%s\nwant\n%s", err, tt.want)
			}
		})
	}
}

func TestLoadPluginStartTrap(t *testing.T) {
	t.Parallel()
	opts, _ := testOptions()
	_, err := LoadPlugin(context.Background(), fixture("inittrap"), nil, opts)
	const want = "plugin inittrap.wasm: instantiate: module[] function[_initialize] failed: wasm error: unreachable"
	if err == nil || !strings.HasPrefix(err.Error(), want) {
		t.Fatalf("err = %v, want it to start with %q", err, want)
	}
}

// TestLoadPluginStartHang: an _initialize that never returns is stopped at
// the start-up deadline (the loop guard runs it, not wazero's start
// functions), and loading fails naming it.
func TestLoadPluginStartHang(t *testing.T) {
	t.Parallel()
	opts, _ := testOptions()
	_, err := LoadPlugin(context.Background(), fixture("inithang"), nil, opts)
	const want = "plugin inithang.wasm: instantiate: module[] function[_initialize] failed: wasm error: unreachable"
	if err == nil || !strings.HasPrefix(err.Error(), want) || !strings.Contains(err.Error(), "ran past its start-up deadline") {
		t.Fatalf("err = %v, want it to start with %q and name the deadline", err, want)
	}
}

func TestPluginInfo(t *testing.T) {
	t.Parallel()
	opts, _ := testOptions()
	p := load(t, "principal", nil, Limits{Instances: 3, Timeout: 250 * time.Millisecond}, opts)
	bin, err := os.ReadFile(fixture("principal"))
	if err != nil {
		t.Fatal(err)
	}
	got := p.Info()
	got.CompileTime = 0
	want := PluginInfo{
		Name:       "principal",
		File:       "principal.wasm",
		Phases:     []string{"authorize", "validate"},
		ABIVersion: 1,
		Size:       int64(len(bin)),
		SHA256:     sha256.Sum256(bin),
		Limits:     Limits{MemoryMiB: 64, Timeout: 250 * time.Millisecond, Instances: 3, MaxCalls: 100000, Interrupt: InterruptOn},
		phases:     3,
	}
	if !slices.Equal(got.Phases, want.Phases) || got.Name != want.Name || got.File != want.File ||
		got.ABIVersion != want.ABIVersion || got.Size != want.Size || got.SHA256 != want.SHA256 ||
		got.Limits != want.Limits || got.HasConfig {
		t.Fatalf("Info() = %+v, want %+v", got, want)
	}
	if s := p.Stats(); s != (Stats{Live: 3, Created: 3}) {
		t.Fatalf("Stats() = %+v, want 3 pre-warmed instances", s)
	}
}

func TestParseSidecar(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		in         string
		wantConfig string // "" for none
		wantLimits Limits
		wantErr    string
	}{
		{"empty object", `{}`, "", Limits{}, ""},
		{"config verbatim and every limit",
			`{"config": {"b": [1, 2.50], "a": "x"}, "limits": {"memory_mib": 8, "timeout_ms": 250, "instances": 3, "max_calls": 7, "interrupt": false}}`,
			`{"b": [1, 2.50], "a": "x"}`, Limits{MemoryMiB: 8, Timeout: 250 * time.Millisecond, Instances: 3, MaxCalls: 7, Interrupt: InterruptOff}, ""},
		{"interrupt on", `{"limits": {"interrupt": true}}`, "", Limits{Interrupt: InterruptOn}, ""},
		{"interrupt not a bool", `{"limits": {"interrupt": 0}}`, "", Limits{},
			`line 1, column 26: "limits.interrupt" must be true or false, got 0`},
		{"interrupt null", `{"limits": {"interrupt": null}}`, "", Limits{},
			`line 1, column 26: "limits.interrupt" must be true or false, got null`},
		{"null config is a config", `{"config": null}`, "null", Limits{}, ""},
		{"unknown key", `{"confg": 1}`, "", Limits{}, `line 1, column 2: unknown key "confg", want one of config, limits, headers, decision_cache, sample_percent, canary_percent`},
		{"headers not names", `{"headers": "X-Tenant"}`, "", Limits{},
			`line 1, column 13: "headers" must be an array of header names, got "X-Tenant"`},
		{"headers credential", `{"headers": ["x-tenant", "authorization"]}`, "", Limits{},
			`line 1, column 13: "headers": Authorization is never sent to plugins (the credential reaches them as Request.Credential)`},
		{"unknown limit", `{"limits": {"timeout": 5}}`, "", Limits{},
			`line 1, column 13: unknown key "limits.timeout", want one of memory_mib, timeout_ms, instances, max_calls, interrupt`},
		{"zero limit", `{"limits": {"memory_mib": 0}}`, "", Limits{},
			`line 1, column 27: "limits.memory_mib" must be an integer from 1 to 4096, got 0`},
		{"fraction", `{"limits": {"instances": 1.5}}`, "", Limits{},
			`line 1, column 26: "limits.instances" must be an integer from 1 to 1024, got 1.5`},
		{"string limit", `{"limits": {"max_calls": "5"}}`, "", Limits{},
			`line 1, column 26: "limits.max_calls" must be an integer from 1 to 1073741824, got "5"`},
		{"timeout too long", `{"limits": {"timeout_ms": 60001}}`, "", Limits{},
			`line 1, column 27: "limits.timeout_ms" must be an integer from 1 to 60000, got 60001`},
		{"duplicate key", `{"config": 1, "config": 2}`, "", Limits{}, `line 1, column 15: duplicate key "config"`},
		{"duplicate limit", `{"limits": {"instances": 1, "instances": 2}}`, "", Limits{}, `line 1, column 29: duplicate key "limits.instances"`},
		{"duplicate inside config", `{"config": {"a": 1, "a": 2}}`, "", Limits{}, `line 1, column 21: duplicate key "config.a"`},
		{"not an object", `[]`, "", Limits{}, "line 1, column 1: the sidecar must be a JSON object"},
		{"null file", `null`, "", Limits{}, "line 1, column 1: the sidecar must be a JSON object"},
		{"limits not an object", `{"limits": []}`, "", Limits{}, `line 1, column 12: "limits" must be a JSON object`},
		{"limits null", `{"limits": null}`, "", Limits{}, `line 1, column 12: "limits" must be a JSON object`},
		{"trailing data", `{} {}`, "", Limits{}, "line 1, column 4: invalid JSON: data after the top-level object"},
		{"empty file", ``, "", Limits{}, "line 1, column 1: invalid JSON: unexpected end of file"},
		{"cut short", "{\n  \"config\": [1,", "", Limits{}, "line 2, column 16: invalid JSON: unexpected end of file"},
		{"bad config value", `{"config": }`, "", Limits{}, "line 1, column 12: invalid JSON: invalid character '}' at start of value"},
		{"lines and columns count characters", "{\n  \"config\": \"é\",\n\t\"limits\": {\n    \"memory_mib\": 0\n  }\n}", "", Limits{},
			`line 4, column 19: "limits.memory_mib" must be an integer from 1 to 4096, got 0`},
		{"unknown key after a multi-byte character", "{\"config\": \"ééé\", \"limit\": {}}", "", Limits{},
			`line 1, column 19: unknown key "limit", want one of config, limits, headers, decision_cache, sample_percent, canary_percent`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			sc, err := ParseSidecar([]byte(tt.in))
			if tt.wantErr != "" {
				if err == nil || err.Error() != tt.wantErr {
					t.Fatalf("err = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if string(sc.Config) != tt.wantConfig || (tt.wantConfig == "") != (sc.Config == nil) || sc.Limits != tt.wantLimits {
				t.Fatalf("ParseSidecar = {%q %+v}, want {%q %+v}", sc.Config, sc.Limits, tt.wantConfig, tt.wantLimits)
			}
		})
	}
}

func TestLoadDirErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		files map[string]string
		want  string
	}{
		{"one-digit prefix", map[string]string{"1-allow.wasm": "allow"},
			"plugin 1-allow.wasm: file name must be NN-name.wasm (or NN-name.shadow.wasm, NN-name.canary.wasm): two digits, a dash, then a-z, 0-9 or -"},
		{"upper case", map[string]string{"10-Allow.wasm": "allow"},
			"plugin 10-Allow.wasm: file name must be NN-name.wasm (or NN-name.shadow.wasm, NN-name.canary.wasm): two digits, a dash, then a-z, 0-9 or -"},
		{"no prefix", map[string]string{"allow.wasm": "allow"},
			"plugin allow.wasm: file name must be NN-name.wasm (or NN-name.shadow.wasm, NN-name.canary.wasm): two digits, a dash, then a-z, 0-9 or -"},
		{"sidecar without plugin", map[string]string{"10-allow.wasm": "allow", "30-gone.json": `{}`},
			"plugin 30-gone.json: no 30-gone.wasm beside it"},
		{"bad sidecar", map[string]string{"10-allow.wasm": "allow", "10-allow.json": `{"limit": {}}`},
			`plugin 10-allow.json: line 1, column 2: unknown key "limit", want one of config, limits, headers, decision_cache, sample_percent, canary_percent`},
		{"bad limit", map[string]string{"10-allow.wasm": "allow", "10-allow.json": `{"limits": {"instances": 0}}`},
			`plugin 10-allow.json: line 1, column 26: "limits.instances" must be an integer from 1 to 1024, got 0`},
		{"bad second plugin", map[string]string{"10-allow.wasm": "allow", "20-trap.wasm": "badsig"},
			`plugin 20-trap.wasm: export "plantgate_validate" has signature (i32) -> i64, want (i32, i32) -> i64`},
		{"config refused", map[string]string{"10-configure.wasm": "configure", "10-configure.json": `{"config": false}`},
			"plugin 10-configure.wasm: config refused: config rejected by fixture (sidecar 10-configure.json; docs/abi.md#config)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			opts, _ := testOptions()
			opts.Limits.Instances = 1
			c, err := Load(context.Background(), Dir(copyFixtures(t, tt.files)), opts)
			if err == nil {
				_ = c.Close(context.Background())
				t.Fatalf("Load succeeded, want %q", tt.want)
			}
			if err.Error() != tt.want {
				t.Fatalf("err =\n%s\nwant\n%s", err, tt.want)
			}
		})
	}
}

func TestLoadDirMissing(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "nope")
	_, err := Load(context.Background(), Dir(dir), Options{})
	if want := "plugins directory: open " + dir + ": no such file or directory"; err == nil || err.Error() != want {
		t.Fatalf("err = %v, want %q", err, want)
	}
}

func TestLoadDir(t *testing.T) {
	t.Parallel()
	dir := copyFixtures(t, map[string]string{
		"30-echo.wasm":      "echo",
		"10-configure.wasm": "configure",
		"10-configure.json": `{"config": {"greeting": "hi"}, "limits": {"instances": 3, "timeout_ms": 250}}`,
		"20-allow.wasm":     "allow",
		"README.md":         "ignored",
		"notes.txt":         "ignored",
	})
	if err := os.Mkdir(filepath.Join(dir, "99-subdir.wasm"), 0o755); err != nil {
		t.Fatal(err)
	}
	opts, _ := testOptions()
	opts.Limits.Instances = 2
	c, err := Load(context.Background(), Dir(dir), opts)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(context.Background())

	var names []string
	for _, info := range c.Plugins() {
		names = append(names, info.File)
	}
	if want := []string{"10-configure.wasm", "20-allow.wasm", "30-echo.wasm"}; !slices.Equal(names, want) {
		t.Fatalf("plugins %v, want %v", names, want)
	}
	info := c.Plugins()[0]
	if want := (Limits{MemoryMiB: 64, Timeout: 250 * time.Millisecond, Instances: 3, MaxCalls: 100000, Interrupt: InterruptOn}); info.Limits != want || !info.HasConfig || info.Name != "configure" {
		t.Fatalf("10-configure: %+v, want limits %+v, a config, name configure", info, want)
	}
	if got := []int{c.Stats()[0].Live, c.Stats()[1].Live, c.Stats()[2].Live}; !slices.Equal(got, []int{3, 2, 2}) {
		t.Fatalf("live instances %v, want [3 2 2]", got)
	}
	// The first plugin denies with its config, verbatim: the chain stops there.
	_, err = c.Authorize(context.Background(), host.AuthorizeRequest{Method: "POST", Path: "/plants"})
	wantError(t, err, &host.Error{Code: 40350, Message: `{"greeting": "hi"}`})
}

func TestLoadDirEmpty(t *testing.T) {
	t.Parallel()
	c, err := Load(context.Background(), Dir(copyFixtures(t, map[string]string{"README": "x"})), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(context.Background())
	if c.Authorizes() || len(c.Plugins()) != 0 {
		t.Fatalf("Authorizes() = %v, %d plugins; want an empty chain", c.Authorizes(), len(c.Plugins()))
	}
	principal, err := c.Authorize(context.Background(), host.AuthorizeRequest{Method: "POST", Path: "/plants"})
	if principal != "" || err != nil {
		t.Fatalf("Authorize = %q, %v; want allow", principal, err)
	}
}

func TestLimitsDefaults(t *testing.T) {
	t.Parallel()
	got := Options{}.withDefaults().Limits
	want := Limits{MemoryMiB: 64, Timeout: 100 * time.Millisecond, Instances: runtime.GOMAXPROCS(0) + 1, MaxCalls: 100000, Interrupt: InterruptOn}
	if got != want {
		t.Fatalf("default limits %+v, want %+v", got, want)
	}
	got = Limits{Timeout: time.Second, Instances: 1}.Or(want)
	want.Timeout, want.Instances = time.Second, 1
	if got != want {
		t.Fatalf("Or = %+v, want %+v", got, want)
	}
	if r := (Limits{MemoryMiB: 64}).recycleBytes(); r != 48<<20 {
		t.Fatalf("recycle threshold %d, want 48 MiB", r)
	}
}

// TestSidecarTypedKey: a key added to the sidecar with a Go type of its own
// (a list, say) gets a positioned message when the file gives another kind.
func TestSidecarTypedKey(t *testing.T) {
	t.Parallel()
	var v struct {
		Headers []string `json:"headers"`
	}
	data := []byte("{\n  \"headers\": 5\n}")
	err := positioned(data, jsonv2.Unmarshal(data, &v, jsonv2.RejectUnknownMembers(true)))
	if want := `line 2, column 14: "headers" cannot be a JSON number`; err == nil || err.Error() != want {
		t.Fatalf("err = %v, want %q", err, want)
	}
}
