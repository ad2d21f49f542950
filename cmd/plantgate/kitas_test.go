package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/plantgate/plantgate/host"
	"github.com/plantgate/plantgate/host/wasm"
	"github.com/plantgate/plantgate/host/wasm/wasmtest"
)

// The AssemblyScript guest kit (sdk/assemblyscript): its own tests (node
// --test), and its plant-rules example judged by this binary's `plugin run`
// and `plugin check` against testdata/expect/plant-rules.jsonl, then served
// by the real gateway.

// needNode skips a test when node or npm is missing, unless
// PLANTGATE_REQUIRE_TOOLCHAINS=1 (CI), where that is a failure.
func needNode(t testing.TB) { wasmtest.NeedKitToolchain(t, "assemblyscript") }

var asKitBuild struct {
	once sync.Once
	dir  string // the copy's sdk/assemblyscript
	out  string // npm's output
	err  error
}

// asKit copies the kit (without node_modules and build) and the expect
// tables into a temporary tree laid out as the repository, runs `npm ci`
// and `npm test` there (which builds the example and the kit's test module
// and runs node --test), once per test binary, and returns the copy's
// sdk/assemblyscript. A copy, so tests never write into the source tree.
func asKit(t testing.TB) string {
	t.Helper()
	needNode(t)
	asKitBuild.once.Do(func() {
		root, err := wasmtest.ModuleRoot()
		if err != nil {
			asKitBuild.err = err
			return
		}
		tree := filepath.Join(filepath.Dir(bundledDir), "askit")
		dir := filepath.Join(tree, "sdk", "assemblyscript")
		if err := copyTree(filepath.Join(root, "sdk", "assemblyscript"), dir); err != nil {
			asKitBuild.err = err
			return
		}
		if err := copyTree(filepath.Join(root, "testdata", "expect"), filepath.Join(tree, "testdata", "expect")); err != nil {
			asKitBuild.err = err
			return
		}
		var out bytes.Buffer
		for _, args := range [][]string{{"ci", "--no-audit", "--no-fund"}, {"test"}} {
			cmd := exec.Command("npm", args...)
			cmd.Dir = dir
			cmd.Stdout, cmd.Stderr = &out, &out
			if err := cmd.Run(); err != nil {
				asKitBuild.out, asKitBuild.err = out.String(), err
				return
			}
		}
		asKitBuild.dir, asKitBuild.out = dir, out.String()
	})
	if asKitBuild.err != nil {
		t.Fatalf("npm in the AssemblyScript kit: %v\n%s", asKitBuild.err, asKitBuild.out)
	}
	return asKitBuild.dir
}

// copyTree copies src to dst, leaving out node_modules and build output.
func copyTree(src, dst string) error {
	return filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "node_modules" || d.Name() == "build") {
			return filepath.SkipDir
		}
		rel, _ := filepath.Rel(src, p)
		if d.IsDir() {
			return os.MkdirAll(filepath.Join(dst, rel), 0o755)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dst, rel), b, 0o644)
	})
}

// TestAssemblyScriptKit runs the kit's node tests (through asKit), then
// every row of the plant-rules table through `plugin run` on the
// AssemblyScript example, `plugin check`, and the example in a gateway.
func TestAssemblyScriptKit(t *testing.T) {
	dir := asKit(t)
	out := asKitBuild.out
	if !strings.Contains(out, "\n# fail 0\n") || !strings.Contains(out, "\n# pass ") {
		t.Fatalf("npm test: no passing node test run in its output:\n%s", out)
	}
	module := filepath.Join(dir, "examples", "plant-rules", "build", "20-plant-rules.wasm")

	t.Run("expect table", func(t *testing.T) {
		root, err := wasmtest.ModuleRoot()
		if err != nil {
			t.Fatal(err)
		}
		f, err := os.Open(filepath.Join(root, "testdata", "expect", "plant-rules.jsonl"))
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		rows := 0
		for sc := bufio.NewScanner(f); sc.Scan(); {
			if strings.TrimSpace(sc.Text()) == "" {
				continue
			}
			var row struct {
				Name  string                     `json:"name"`
				Phase string                     `json:"phase"`
				Input json.RawMessage            `json:"input"`
				Want  map[string]json.RawMessage `json:"want"`
			}
			if err := json.Unmarshal(sc.Bytes(), &row); err != nil {
				t.Fatal(err)
			}
			rows++
			stdout, stderr, _ := runCLI(t, string(row.Input), "plugin", "run", "--phase", row.Phase, "--input", "-", module)
			var got map[string]json.RawMessage
			if err := json.Unmarshal([]byte(stdout), &got); err != nil {
				t.Fatalf("%s: plugin run printed %q (stderr %s)", row.Name, stdout, stderr)
			}
			for k, want := range row.Want {
				if !bytes.Equal(compactJSON(t, got[k]), compactJSON(t, want)) {
					t.Errorf("%s: %s is %s, want %s", row.Name, k, got[k], want)
				}
			}
		}
		if rows < 19 {
			t.Fatalf("read %d rows of the table; want all of them", rows)
		}
	})

	t.Run("plugin check", func(t *testing.T) {
		stdout, stderr, code := runCLI(t, "", "plugin", "check", module)
		if code != 0 || !strings.Contains(stdout, "\nok                serve would load this plugin\n") ||
			!strings.Contains(stdout, "\nphases            validate\n") {
			t.Fatalf("plugin check: exit %d\n%s%s", code, stdout, stderr)
		}
	})

	t.Run("gateway", func(t *testing.T) {
		pdir := pluginsDir(t, "10-bearer-auth.wasm")
		b, err := os.ReadFile(module)
		if err != nil {
			t.Fatal(err)
		}
		writeFile(t, filepath.Join(pdir, "20-plant-rules.wasm"), string(b))
		m := startMain(t, pdir, nil)
		base := "http://" + m.Addr().String()
		if status, body := post(t, base, testToken, `{"id":1,"name":"Mon\u0007stera"}`); status != 400 ||
			body != `{"error":40052,"message":"name must not contain control characters, found U+0007 at character 4"}` {
			t.Fatalf("control character: %d %s; want the example's 400 40052", status, body)
		}
		if status, body := post(t, base, testToken, `{"id":0,"name":"Fern"}`); status != 400 ||
			body != `{"error":40050,"message":"id must be at least 1, got 0"}` {
			t.Fatalf("id 0: %d %s; want the example's 400 40050", status, body)
		}
		if status, body := post(t, base, testToken, `{"id":2,"name":"Ficus élégant 🌿","tag":"日本"}`); status != 200 {
			t.Fatalf("valid plant: %d %s; want 200", status, body)
		}
	})
}

func compactJSON(t *testing.T, b json.RawMessage) []byte {
	t.Helper()
	if b == nil {
		return nil
	}
	var out bytes.Buffer
	if err := json.Compact(&out, b); err != nil {
		t.Fatalf("%s: %v", b, err)
	}
	return out.Bytes()
}

// BenchmarkPlantRulesAssemblyScript compares one validate call of the
// AssemblyScript plant-rules example with the bundled Go one, in the same
// run, through host/wasm as the gateway calls them (deadline enforcement
// on, as serve runs): an allowed plant and a denied one. Compare go/CASE
// with as/CASE of the same run.
//
//	go test -run '^$' -bench PlantRulesAssemblyScript ./cmd/plantgate/
func BenchmarkPlantRulesAssemblyScript(b *testing.B) {
	dir := asKit(b)
	ctx := context.Background()
	// A deadline no stall of a shared machine reaches: this measures cost.
	limits := wasm.Limits{MaxCalls: 1 << 30, Instances: 1, Timeout: 10 * time.Second}
	for _, c := range []struct {
		name  string
		plant host.Plant
		deny  bool
	}{
		{"allow", host.Plant{ID: 42, Name: "Monstera deliciosa", Tag: "tropical", HasTag: true}, false},
		{"deny", host.Plant{ID: 42, Name: "Monstera \u0007deliciosa", Tag: "tropical", HasTag: true}, true},
	} {
		var ps [2]*wasm.Plugin
		for i, pl := range []struct{ name, path string }{
			{"go", filepath.Join(bundledDir, "20-plant-rules.wasm")},
			{"as", filepath.Join(dir, "examples", "plant-rules", "build", "20-plant-rules.wasm")},
		} {
			p, err := wasm.LoadPlugin(ctx, pl.path, nil, wasm.Options{CacheDir: sharedCache, Limits: limits})
			if err != nil {
				b.Fatal(err)
			}
			defer p.Close(ctx)
			ps[i] = p
			b.Run(pl.name+"/"+c.name, func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					if err := p.Validate(ctx, c.plant, ""); (err != nil) != c.deny {
						b.Fatal(err)
					}
				}
			})
		}
		// Both in one loop, call by call, so that a shared machine's load
		// weighs on both alike: the as/go ratio is the figure to quote.
		b.Run("both/"+c.name, func(b *testing.B) {
			var spent [2]time.Duration
			for b.Loop() {
				for i, p := range ps {
					t0 := time.Now()
					if err := p.Validate(ctx, c.plant, ""); (err != nil) != c.deny {
						b.Fatal(err)
					}
					spent[i] += time.Since(t0)
				}
			}
			b.ReportMetric(float64(spent[0].Nanoseconds())/float64(b.N), "go-ns/call")
			b.ReportMetric(float64(spent[1].Nanoseconds())/float64(b.N), "as-ns/call")
			b.ReportMetric(float64(spent[1])/float64(spent[0]), "as/go")
		})
	}
}
