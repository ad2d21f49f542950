package wasm

import (
	"os"
	"path/filepath"
	"regexp"
	"sync"
	"testing"

	"github.com/plantgate/plantgate/host/wasm/wasmtest"
)

// Rego fixtures: each directory under testdata/rego is built by TestMain
// with opa into "rego-<dir>" (fixture), its entrypoints the plantgate/
// rules it defines. Without opa each is an error that needRego turns into
// a skip, or a failure under PLANTGATE_REQUIRE_OPA=1.
var regoDir = filepath.Join("..", "..", "testdata", "rego")

var regoRule = regexp.MustCompile(`(?m)^(authorize|validate)\b`)

func buildRegoFixtures(dir string, wg *sync.WaitGroup, mu *sync.Mutex) {
	entries, err := os.ReadDir(regoDir)
	if err != nil {
		panic(err)
	}
	opa, opaErr := wasmtest.OPA()
	for _, e := range entries {
		name := "rego-" + e.Name()
		out := filepath.Join(dir, name+".wasm")
		goFixtures[name] = out
		if opaErr != nil {
			goFixtureErr[name] = opaErr
			continue
		}
		src := filepath.Join(regoDir, e.Name())
		wg.Go(func() {
			err := wasmtest.BuildRego(opa, out, regoEntrypoints(src), src)
			mu.Lock()
			goFixtureErr[name] = err
			mu.Unlock()
		})
	}
}

// regoEntrypoints lists the plantgate/ rules the .rego files in dir define.
func regoEntrypoints(dir string) []string {
	seen := map[string]bool{}
	var eps []string
	files, _ := filepath.Glob(filepath.Join(dir, "*.rego"))
	for _, f := range files {
		b, _ := os.ReadFile(f)
		for _, m := range regoRule.FindAllStringSubmatch(string(b), -1) {
			if ep := "plantgate/" + m[1]; !seen[ep] {
				seen[ep] = true
				eps = append(eps, ep)
			}
		}
	}
	return eps
}

// needRego skips t (or fails it under PLANTGATE_REQUIRE_OPA=1) when opa is
// missing, and returns the fixture's name.
func needRego(t testing.TB, dir string) string {
	t.Helper()
	wasmtest.NeedOPA(t)
	return "rego-" + dir
}
