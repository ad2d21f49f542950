package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/plantgate/plantgate/host/wasm/wasmtest"
)

// TestGuideExample follows sdk/README.md step by step with its worked
// example, sdk/examples/tag-denylist: build, check, dry-run, drop into a
// running gateway's plugins directory, see it deny, watch its metrics.
// (The guide's unit-test step is the example's own main_test.go.)
func TestGuideExample(t *testing.T) {
	t.Parallel()
	work := t.TempDir()
	wasmFile := filepath.Join(work, "30-tag-denylist.wasm")
	// "GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -o 30-tag-denylist.wasm ./sdk/examples/tag-denylist"
	if err := wasmtest.Build(wasmFile, "./sdk/examples/tag-denylist"); err != nil {
		t.Fatal(err)
	}
	sidecar := writeFile(t, filepath.Join(work, "30-tag-denylist.json"), `{"config": {"tags": ["weed", "plastic"]}, "limits": {"instances": 2}}`)

	// plantgate plugin check 30-tag-denylist.wasm
	out, errOut, code := runCLI(t, "", "plugin", "check", "--cache-dir", sharedCache, wasmFile)
	if code != 0 || !strings.Contains(out, "phases            validate") || !strings.Contains(out, "30-tag-denylist.json") {
		t.Fatalf("check: exit %d\n%s%s", code, out, errOut)
	}
	// plantgate plugin conformance 30-tag-denylist.wasm: none of its inputs
	// is a weed, so the report says the policy was not exercised (issue 33)
	out, errOut, code = runCLI(t, "", "plugin", "conformance", "--cache-dir", sharedCache, wasmFile)
	if code != 0 || !strings.Contains(out, "\nok    validate   19 inputs: 19 allow, 0 deny\n") || !strings.HasSuffix(out, "\n"+noDenyHint(true)) {
		t.Fatalf("conformance: exit %d\n%s%s\nwant it to end with\n%s", code, out, errOut, noDenyHint(true))
	}
	// ... and with the guide's table of its own cases, it is.
	table := writeFile(t, filepath.Join(work, "tag-denylist.jsonl"), `{"name": "a weed", "phase": "validate", "input": {"id": 1, "name": "Dandelion", "tag": "weed"}, "want": {"decision": "deny", "error": 40070}}
{"name": "a fern", "phase": "validate", "input": {"id": 2, "name": "Fern", "tag": "indoor"}, "want": {"decision": "allow"}}
`)
	out, errOut, code = runCLI(t, "", "plugin", "conformance", "--cache-dir", sharedCache, wasmFile, "--expect", table)
	if code != 0 || !strings.Contains(out, "\nok    expect     2 decisions as ") || !strings.HasSuffix(out, "\nconformance: every check passed\n") {
		t.Fatalf("conformance --expect: exit %d\n%s%s", code, out, errOut)
	}
	// plantgate plugin run 30-tag-denylist.wasm --phase validate --input plant.json
	plant := writeFile(t, filepath.Join(work, "plant.json"), `{"id": 1, "name": "Dandelion", "tag": "Weed"}`)
	out, _, code = runCLI(t, "", "plugin", "run", "--cache-dir", sharedCache, wasmFile, "--phase", "validate", "--input", plant)
	if want := `{"decision":"deny","status":400,"error":40070,"message":"tag \"weed\" is not allowed"}`; code != exitDeny || strings.TrimSpace(out) != want {
		t.Fatalf("run: exit %d, %s; want %s", code, out, want)
	}

	// Drop it into a running gateway: each file under a temporary name,
	// then renamed into place, the sidecar first.
	dir := pluginsDir(t, "10-bearer-auth.wasm", "20-plant-rules.wasm")
	m := startMain(t, dir, nil)
	base, admin := "http://"+m.Addr().String(), "http://"+m.AdminAddr().String()
	for _, src := range []string{sidecar, wasmFile} {
		data, err := os.ReadFile(src)
		if err != nil {
			t.Fatal(err)
		}
		wasmtest.Drop(t, dir, filepath.Base(src), data)
	}
	took := wasmtest.Eventually(t, "the dropped plugin serves", func() bool {
		status, _ := post(t, base, testToken, `{"id":7,"name":"Dandelion","tag":"weed"}`)
		return status == 400
	})
	t.Logf("guide example: drop to serving %v", took)
	if status, body := post(t, base, testToken, `{"id":7,"name":"Dandelion","tag":"weed"}`); body != `{"error":40070,"message":"tag \"weed\" is not allowed"}` {
		t.Fatalf("denied tag: %d %s", status, body)
	}
	if status, body := post(t, base, testToken, `{"id":8,"name":"Fern","tag":"green"}`); status != 200 {
		t.Fatalf("allowed tag: %d %s", status, body)
	}
	// curl -s 127.0.0.1:9090/metrics | grep tag-denylist
	_, metrics, _ := get(t, admin+"/metrics")
	for _, want := range []string{
		`plantgate_plugin_calls_total{outcome="deny",phase="validate",plugin="tag-denylist"} 2`,
		`plantgate_plugin_calls_total{outcome="allow",phase="validate",plugin="tag-denylist"} 1`,
		`plantgate_plugin_pool_size{plugin="tag-denylist"} 2`,
		`plantgate_chain_reloads_total{outcome="applied"} 1`,
	} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
}
