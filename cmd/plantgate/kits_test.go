package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/plantgate/plantgate/host/wasm/wasmtest"
)

// expectRow is one line of testdata/expect/*.jsonl (testdata/expect/README.md).
type expectRow struct {
	Name  string                     `json:"name"`
	Phase string                     `json:"phase"`
	Input json.RawMessage            `json:"input"`
	Want  map[string]json.RawMessage `json:"want"`
}

func readExpect(t *testing.T, name string) []expectRow {
	t.Helper()
	root, err := wasmtest.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(root, "testdata", "expect", name))
	if err != nil {
		t.Fatal(err)
	}
	var rows []expectRow
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		if len(bytes.TrimSpace(sc.Bytes())) == 0 {
			continue
		}
		var r expectRow
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatalf("%s: %v in %s", name, err, sc.Bytes())
		}
		rows = append(rows, r)
	}
	if len(rows) == 0 {
		t.Fatalf("%s has no rows", name)
	}
	return rows
}

// kitModule returns lang's plant-rules example, built once for the test
// binary (skipping, or failing under PLANTGATE_REQUIRE_TOOLCHAINS=1,
// without the toolchain). "go" is the bundled Go plugin, the table's
// reference.
func kitModule(t *testing.T, lang string) string {
	t.Helper()
	if lang == "go" {
		return filepath.Join(pluginsDir(t, "20-plant-rules.wasm"), "20-plant-rules.wasm")
	}
	return kitExample(t, lang, "plant-rules")
}

// kitBuild is one example built for the whole test binary: the Rust ones
// take seconds, and several tests serve each.
type kitBuild struct {
	once sync.Once
	file string
	err  error
}

var kitBuilds sync.Map // "lang/example" → *kitBuild

// kitExample returns the module of lang's example, built once into the
// test binary's temporary directory (removed by TestMain).
func kitExample(t *testing.T, lang, example string) string {
	t.Helper()
	wasmtest.NeedKitToolchain(t, lang)
	v, _ := kitBuilds.LoadOrStore(lang+"/"+example, &kitBuild{})
	b := v.(*kitBuild)
	b.once.Do(func() {
		b.file = filepath.Join(filepath.Dir(sharedCache), "kits", lang+"-"+example+".wasm")
		b.err = wasmtest.BuildKit(lang, example, b.file)
	})
	if b.err != nil {
		t.Fatal(b.err)
	}
	return b.file
}

// TestKitsExpect runs `plugin conformance --expect
// testdata/expect/plant-rules.jsonl` on the plant-rules example of every
// guest kit, on the Rego policy (sdk/rego) and on the bundled Go plugin:
// each passes every check of the conformance kit, and the one table holds
// the same decisions, codes and messages in every language.
func TestKitsExpect(t *testing.T) {
	t.Parallel()
	root, err := wasmtest.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	table := filepath.Join(root, "testdata", "expect", "plant-rules.jsonl")
	rows := len(readExpect(t, "plant-rules.jsonl"))
	for _, lang := range append([]string{"go"}, append(wasmtest.Kits, "assemblyscript", "rego")...) {
		t.Run(lang, func(t *testing.T) {
			t.Parallel()
			var module string
			if lang == "assemblyscript" {
				module = filepath.Join(asKit(t), "examples", "plant-rules", "build", "20-plant-rules.wasm")
			} else {
				// Built as <lang>-plant-rules.wasm; a plugin file is NN-name.wasm.
				b, err := os.ReadFile(kitModule(t, lang))
				if err != nil {
					t.Fatal(err)
				}
				module = writeFile(t, filepath.Join(t.TempDir(), "20-plant-rules.wasm"), string(b))
			}
			out, errOut, code := runCLI(t, "", "plugin", "conformance", "--cache-dir", sharedCache, module, "--expect", table)
			expect := regexp.MustCompile(fmt.Sprintf(`(?m)^ok +expect +%d decisions as .*plant-rules\.jsonl wants$`, rows))
			if code != 0 || !expect.MatchString(out) || !strings.HasSuffix(out, "conformance: every check passed\n") {
				t.Fatalf("%s: exit %d, want 0, every check passed and the %d rows as the table wants\n%s%s", lang, code, rows, out, errOut)
			}
		})
	}
}

// jsonEqual compares two JSON values by their decoded form, numbers exactly.
func jsonEqual(a, b json.RawMessage) bool {
	var x, y any
	da, db := json.NewDecoder(bytes.NewReader(a)), json.NewDecoder(bytes.NewReader(b))
	da.UseNumber()
	db.UseNumber()
	if da.Decode(&x) != nil || db.Decode(&y) != nil {
		return false
	}
	ja, _ := json.Marshal(x)
	jb, _ := json.Marshal(y)
	return bytes.Equal(ja, jb)
}

// TestKitsServe serves each kit's plant-rules (and the Rego one, its
// sidecar config as data) in place of the bundled one,
// behind the bundled bearer-auth, with a sidecar config, and checks what
// POST /plants answers through the real Fiber stack.
func TestKitsServe(t *testing.T) {
	t.Parallel()
	for _, lang := range append(wasmtest.Kits, "rego") {
		t.Run(lang, func(t *testing.T) {
			t.Parallel()
			module := kitModule(t, lang)
			dir := pluginsDir(t, "10-bearer-auth.wasm")
			b, err := os.ReadFile(module)
			if err != nil {
				t.Fatal(err)
			}
			writeFile(t, filepath.Join(dir, "20-plant-rules.wasm"), string(b))
			writeFile(t, filepath.Join(dir, "20-plant-rules.json"), `{"config": {"id_min": 5, "tag_max": 3}}`)
			m := startMain(t, dir, nil)
			base := "http://" + m.Addr().String()
			for _, c := range []struct {
				token, body string
				status      int
				want        string
			}{
				{testToken, `{"id":5,"name":"Monstera","tag":"big"}`, 200, `{"name":"Monstera","tag":"big"}`},
				{testToken, `{"id":4,"name":"Fern"}`, 400, `{"error":40050,"message":"id must be at least 5, got 4"}`},
				{testToken, `{"id":6,"name":"Fern","tag":"tall"}`, 400, `{"error":40053,"message":"tag must be 1–3 characters after trimming, got 4"}`},
				{testToken, `{"id":7,"name":"Mon\u0007stera"}`, 400, `{"error":40052,"message":"name must not contain control characters, found U+0007 at character 4"}`},
				{"", `{"id":8,"name":"Fern"}`, 401, `{"error":40101,"message":"a bearer credential is required"}`},
			} {
				status, body := post(t, base, c.token, c.body)
				if status != c.status || (c.want != "" && body != c.want) {
					t.Errorf("POST %s: %d %s, want %d %s", c.body, status, body, c.status, c.want)
				}
			}
		})
	}
}

// TestKitsAuthorize serves each kit's token-quota example as the chain's
// authorize plugin: its token lookups and KV takes go to the gateway's
// real token store and KV, its decisions (with response headers) come back
// through the real Fiber stack.
func TestKitsAuthorize(t *testing.T) {
	t.Parallel()
	for _, lang := range wasmtest.Kits {
		t.Run(lang, func(t *testing.T) {
			t.Parallel()
			module := kitExample(t, lang, "token-quota")
			dir := pluginsDir(t, "20-plant-rules.wasm")
			b, err := os.ReadFile(module)
			if err != nil {
				t.Fatal(err)
			}
			writeFile(t, filepath.Join(dir, "10-token-quota.wasm"), string(b))
			writeFile(t, filepath.Join(dir, "10-token-quota.json"), `{"config": {"limit": 2}}`)
			m := startMain(t, dir, nil)
			base := "http://" + m.Addr().String()

			req, _ := http.NewRequest(http.MethodPost, base+"/plants", strings.NewReader(`{"id":1,"name":"Fern"}`))
			req.Header.Set("Content-Type", "application/json")
			if status, body, h := send(t, req, "pg_not_a_token_of_this_store"); status != 401 || body != `{"error":40151,"message":"invalid token"}` ||
				!strings.Contains(h.Get("WWW-Authenticate"), `error="invalid_token"`) {
				t.Fatalf("unknown token: %d %s %v", status, body, h)
			}
			// Two a minute, in windows aligned to the minute: a window that
			// ends between two requests only delays the 429, so send until
			// it comes, then check it and every allow before it.
			allowed := 0
			for id := 1; ; id++ {
				if id > 6 {
					t.Fatalf("no 429 after %d allowed requests with a limit of 2 a minute", allowed)
				}
				req, _ := http.NewRequest(http.MethodPost, base+"/plants", strings.NewReader(fmt.Sprintf(`{"id":%d,"name":"Fern"}`, id)))
				req.Header.Set("Content-Type", "application/json")
				status, body, h := send(t, req, testToken)
				if status == 200 {
					allowed++
					if rl := h.Get("RateLimit"); !strings.HasPrefix(rl, `"minute";r=`) {
						t.Fatalf("allow %d: RateLimit %q", id, rl)
					}
					continue
				}
				retry := h.Get("Retry-After")
				want := `{"error":42950,"message":"2 requests a minute; retry in ` + retry + ` s"}`
				if status != 429 || body != want || retry == "" || allowed < 1 {
					t.Fatalf("request %d after %d allowed: %d %s Retry-After %q; want 429 %s", id, allowed, status, body, retry, want)
				}
				break
			}
		})
	}
}
