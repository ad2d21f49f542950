package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/plantgate/plantgate/host"
	phttp "github.com/plantgate/plantgate/host/http"
	"github.com/plantgate/plantgate/host/jsonenc"
	"github.com/plantgate/plantgate/host/redis/redistest"
)

// requireNginxEnv makes a missing nginx + Lua a failure rather than a skip
// (CI sets it, as it sets redistest.RequireEnv).
const requireNginxEnv = "PLANTGATE_REQUIRE_NGINX"

// TestPeersAnswerLikeTheGateway starts each peer once against a real
// redis-server and holds it to the gateway's answers, so that the
// benchmark compares like with like: a create and a read give the status
// and body the gateway's own encoders give, a repeated create is the same
// 200 and other content under the id 409, a wrong token 401, and every
// validate case of plant-rules' expect table the plugin's decision (code
// and message, status 400).
func TestPeersAnswerLikeTheGateway(t *testing.T) {
	srv := redistest.Start(t)
	const token = "peer-test-token"

	rdb := goredis.NewClient(&goredis.Options{Addr: srv.Addr()})
	t.Cleanup(func() { _ = rdb.Close() })
	app := newFiberPeer(token, rdb)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = app.Listener(ln) }()
	t.Cleanup(func() { _ = app.Shutdown() })

	peers := map[string]string{"fiber": ln.Addr().String()}
	if bin, err := exec.LookPath("nginx"); err != nil || !nginxModulesPresent() {
		if os.Getenv(requireNginxEnv) == "1" {
			t.Fatalf("nginx with libnginx-mod-http-lua not found and %s=1 (%v)", requireNginxEnv, err)
		}
		t.Logf("nginx + Lua peer left out: nginx or its Lua module is not installed (set %s=1 to make it a failure)", requireNginxEnv)
	} else {
		p, err := startNginxPeer(context.Background(), bin, t.TempDir(), srv.Addr(), token)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(p.stop)
		peers["nginx"] = p.addr
	}

	for name, addr := range peers {
		t.Run(name, func(t *testing.T) {
			base := int64(1000)
			if name == "nginx" {
				base = 2000 // the peers share their keys
			}
			tag := "tropical"
			p := host.Plant{ID: base + 1, Name: "Monstera <deliciosa> & co", Tag: tag, HasTag: true}
			body := string(jsonenc.AppendStoredPlant(nil, p))
			want := string(phttp.AppendPlant(nil, p))
			expect(t, addr, "POST", "/plants", token, body, 200, want)
			expect(t, addr, "POST", "/plants", token, body, 200, want) // idempotent
			expect(t, addr, "GET", fmt.Sprintf("/plants/%d", p.ID), token, "", 200, string(jsonenc.AppendStoredPlant(nil, p)))
			other := fmt.Sprintf(`{"id":%d,"name":"Fern"}`, p.ID)
			expect(t, addr, "POST", "/plants", token, other, 409,
				fmt.Sprintf(`{"error":40003,"message":"plant %d already exists with other content"}`, p.ID))
			noTag := host.Plant{ID: base + 2, Name: "Fern"}
			expect(t, addr, "POST", "/plants", token, string(jsonenc.AppendStoredPlant(nil, noTag)), 200, `{"name":"Fern"}`)
			expect(t, addr, "GET", fmt.Sprintf("/plants/%d", noTag.ID), token, "", 200, fmt.Sprintf(`{"id":%d,"name":"Fern"}`, noTag.ID))
			expect(t, addr, "GET", "/plants/99999", token, "", 404, `{"error":40402,"message":"no plant with id 99999"}`)
			expect(t, addr, "POST", "/plants", "other", body, 401, `{"error":40151,"message":"invalid token"}`)
			expect(t, addr, "GET", fmt.Sprintf("/plants/%d", p.ID), "other", "", 401, `{"error":40151,"message":"invalid token"}`)

			// The stored content is the gateway's canonical content.
			got, err := rdb.Get(context.Background(), fmt.Sprintf("peer:plant:%d", p.ID)).Result()
			if err != nil || got != body {
				t.Errorf("stored %q, %v; want %q", got, err, body)
			}
			for i, c := range expectTable(t) {
				in := c.Input
				// Fresh ids for the cases that allow, so each is a create.
				var plant map[string]any
				if err := json.Unmarshal(in, &plant); err != nil {
					t.Fatal(err)
				}
				if c.Want.Decision == "allow" {
					plant["id"] = base + 100 + int64(i)
					in, _ = json.Marshal(plant)
					delete(plant, "id")
					wantBody, _ := marshalNoHTML(plant)
					// {"name":…,"tag":…}: json.Marshal sorts the keys, which is the gateway's order.
					expect(t, addr, "POST", "/plants", token, string(in), 200, wantBody)
					continue
				}
				wantBody := string(phttp.AppendError(nil, &host.Error{Code: c.Want.Error, Message: c.Want.Message}))
				expect(t, addr, "POST", "/plants", token, string(in), c.Want.Status, wantBody)
			}
		})
	}
}

func nginxModulesPresent() bool {
	for _, m := range nginxModules {
		if _, err := os.Stat(m); err != nil {
			return false
		}
	}
	return true
}

// expectCase is one line of testdata/expect/plant-rules.jsonl.
type expectCase struct {
	Name  string          `json:"name"`
	Phase string          `json:"phase"`
	Input json.RawMessage `json:"input"`
	Want  struct {
		Decision string `json:"decision"`
		Status   int    `json:"status"`
		Error    int32  `json:"error"`
		Message  string `json:"message"`
	} `json:"want"`
}

func expectTable(t *testing.T) []expectCase {
	t.Helper()
	f, err := os.Open("../../testdata/expect/plant-rules.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var cases []expectCase
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var c expectCase
		if err := json.Unmarshal(sc.Bytes(), &c); err != nil {
			t.Fatal(err)
		}
		if c.Phase == "validate" {
			cases = append(cases, c)
		}
	}
	if err := sc.Err(); err != nil || len(cases) < 10 {
		t.Fatalf("expect table: %d validate cases, %v", len(cases), err)
	}
	return cases
}

func expect(t *testing.T, addr, method, path, token, body string, status int, want string) {
	t.Helper()
	req, err := http.NewRequest(method, "http://"+addr+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := (&http.Client{Timeout: 10 * time.Second}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	got, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != status || string(got) != want || resp.Header.Get("Content-Type") != "application/json" {
		t.Errorf("%s %s %.80s: %d %s (%s), want %d %s", method, path, body, resp.StatusCode, got, resp.Header.Get("Content-Type"), status, want)
	}
}
