package main

// The hostile cases of issue 31 (hardening 3: records, caches, shadows and
// traces), each through a real serve process or Main, on a real
// redis-server where the store is involved. Elsewhere:
// TestTraceIncomingLink (trace_test.go), TestLeaseTableHardCap and
// TestRolloutSidecarKeys (host/wasm), TestCapTraceState (host/http).

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/plantgate/plantgate/host/redis/redistest"
)

// Bounds a hostile client must not get past in the records it makes
// (decision log lines, the fleet's diff stream, the console page).
const (
	maxRecordLine  = 4 << 10  // one decision log line, one diff stream entry
	maxConsolePage = 64 << 10 // the console page and its JSON, with 10 diffs
)

// TestRecordsBoundedByBytes: one client with plants:write sends five
// plants whose name and tag are 1 MiB each, made of '<' (six bytes each
// once HTML-escaped), to a real serve process on a real redis-server, with
// a decision log, a console, and shadows that disagree with the live chain
// (so every request writes diffs). Plant-rules refuses every name, yet
// before the records carried each name whole: multi-MB log lines, a
// tens-of-MB diff stream in the fleet's Redis and console page. Every
// record is now a few KiB, holds the name's first bytes and its length,
// and never escapes '<'.
func TestRecordsBoundedByBytes(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	dir := patientPlugins(t)
	withFixture(t, dir, "deny", "10-bearer-auth.shadow.wasm", `{"limits": {"timeout_ms": 1000}}`)
	withFixture(t, dir, "allow", "20-plant-rules.shadow.wasm", `{"limits": {"timeout_ms": 1000}}`)
	logPath := filepath.Join(t.TempDir(), "decisions.log")
	adminPort := freePort(t)
	g := startGateway(t, nil, "--plugins", dir, "--redis-url", srv.URL(), "--bootstrap-token", rolloutToken,
		"--decision-log", logPath, "--admin-listen", "127.0.0.1:"+adminPort, "--body-limit", fmt.Sprint(3<<20))
	token := strings.TrimSpace(fleetCLI(t, 0, "token", "create", "--name", "hostile", "--scope", "plants:write", "--redis-url", srv.URL()))

	const n, size = 5, 1 << 20
	name, tag := strings.Repeat("<", size), strings.Repeat("é", size/2)
	for i := range n {
		body := fmt.Sprintf(`{"id":%d,"name":%q,"tag":%q}`, i+1, name, tag)
		req, _ := http.NewRequest("POST", g.base+"/plants", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		if status, b, _ := send(t, req, token); status != 400 {
			t.Fatalf("plant %d: %d %s, want plant-rules' 400", i, status, b)
		}
	}
	// The fleet's diff stream: bearer-auth's shadow (deny) would deny each
	// request; both shadows fault on each plant (the fixtures' buffer is
	// 1 KiB), and a fault is logged with its plant.
	c := goredis.NewClient(&goredis.Options{Addr: srv.Addr()})
	defer c.Close()
	ctx := context.Background()
	waitMetrics(t, "http://127.0.0.1:"+adminPort,
		fmt.Sprintf(`plantgate_shadow_decisions_total{outcome="would_deny",plugin="bearer-auth"} %d`, n),
		fmt.Sprintf(`plantgate_shadow_decisions_total{outcome="fault",plugin="bearer-auth"} %d`, n),
		fmt.Sprintf(`plantgate_shadow_decisions_total{outcome="fault",plugin="plant-rules"} %d`, n))
	// Counted first, then written.
	var entries []goredis.XMessage
	eventually(t, func() bool {
		entries, _ = c.XRange(ctx, "plantgate:{shadow}:diffs", "-", "+").Result()
		return len(entries) >= 3*n
	})
	if len(entries) != 3*n {
		t.Fatalf("the diff stream: %d entries, want %d", len(entries), 3*n)
	}
	withPlant := 0
	for _, e := range entries {
		raw, _ := e.Values["d"].(string)
		if len(raw) > maxRecordLine || strings.Contains(raw, `\u003c`) || strings.Contains(raw, token) {
			t.Fatalf("diff %s: %d bytes (want at most %d, no HTML escape, no credential): %.300s", e.ID, len(raw), maxRecordLine, raw)
		}
		if strings.Contains(raw, `"plant":`) {
			withPlant++
			if !strings.Contains(raw, fmt.Sprintf(`"name_bytes":%d`, size)) || !strings.Contains(raw, fmt.Sprintf(`"tag_bytes":%d`, size)) {
				t.Fatalf("diff %s lacks the name's and tag's lengths: %.500s", e.ID, raw)
			}
		}
	}
	if withPlant != 2*n {
		t.Fatalf("%d diffs with the plant, want %d", withPlant, 2*n)
	}
	if mem, err := c.MemoryUsage(ctx, "plantgate:{shadow}:diffs").Result(); err != nil || mem > int64(3*n*maxRecordLine+64<<10) {
		t.Fatalf("the diff stream takes %d bytes of the fleet's Redis (%v)", mem, err)
	}

	admin := "http://127.0.0.1:" + adminPort
	for _, page := range []string{"/", "/console.json"} {
		status, body, _ := get(t, admin+page)
		if status != 200 || len(body) > maxConsolePage || !strings.Contains(body, "bytes") {
			t.Fatalf("console %s: %d, %d bytes (want at most %d, naming the name's length)", page, status, len(body), maxConsolePage)
		}
	}
	g.stop(t)
	// Every decision of each request is logged; the validate ones carry the plant.
	lines := waitLines(t, logPath, 4*n)
	names := 0
	for i, l := range lines {
		if len(l)+1 > maxRecordLine || strings.Contains(l, `\u003c`) || strings.Contains(l, token) {
			t.Fatalf("line %d: %d bytes (want at most %d, no HTML escape, no credential): %.300s", i, len(l)+1, maxRecordLine, l)
		}
		var m struct {
			Input struct {
				Plant *struct {
					Name      string `json:"name"`
					NameBytes int    `json:"name_bytes"`
					Tag       string `json:"tag"`
					TagBytes  int    `json:"tag_bytes"`
				} `json:"plant"`
			} `json:"input"`
		}
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("line %d: %v", i, err)
		}
		if p := m.Input.Plant; p != nil {
			names++
			if p.NameBytes != size || p.TagBytes != size || !strings.HasPrefix(name, p.Name) || !strings.HasPrefix(tag, p.Tag) ||
				len(p.Name) < 64 || len(p.Tag) < 64 {
				t.Fatalf("line %d: plant name %d bytes of %d, tag %d of %d, want a prefix and the original lengths", i, len(p.Name), p.NameBytes, len(p.Tag), p.TagBytes)
			}
		}
	}
	if names < 2*n {
		t.Fatalf("%d lines with the plant, want at least %d (plant-rules and its shadow)", names, 2*n)
	}

	if fi, err := os.Stat(logPath); err != nil || fi.Size() > int64(len(lines)*maxRecordLine) {
		t.Fatalf("decision log: %v %v", fi.Size(), err)
	}
}

// TestKeptDecisionNeverCrossesOperations: bearer-auth with a decision
// cache keyed on the credential alone (no "operation": a natural mistake)
// and a read-only token, through the real Fiber stack and a real
// redis-server. The read's allow is kept, and the same token's DELETE and
// POST that follow are still refused: the operation is always part of a
// kept decision's key.
func TestKeptDecisionNeverCrossesOperations(t *testing.T) {
	t.Parallel()
	m, base, _, token := keptDecisionGateway(t, `{"decision_cache": {"on": ["credential"], "ttl_ms": 60000}}`, time.Minute)
	writer, reader := token("writer", "plants:write", "plants:read", "plants:delete"), token("reader", "plants:read")
	if status, body := post(t, base, writer, `{"id":1,"name":"Fern"}`); status != 200 {
		t.Fatalf("create: %d %s", status, body)
	}
	do := func(method, body string) (int, string) {
		req, _ := http.NewRequest(method, base+"/plants"+map[bool]string{true: "", false: "/1"}[method == "POST"], strings.NewReader(body))
		if body != "" {
			req.Header.Set("Content-Type", "application/json")
		}
		status, b, _ := send(t, req, reader)
		return status, b
	}
	for i := range 3 {
		if status, body := do("GET", ""); status != 200 || body != `{"id":1,"name":"Fern"}` {
			t.Fatalf("read %d: %d %s", i, status, body)
		}
	}
	if keptBy(m, "bearer-auth") == 0 {
		t.Fatal("three reads with one token: no decision kept")
	}
	for _, method := range []string{"DELETE", "POST", "DELETE"} {
		body := ""
		if method == "POST" {
			body = `{"id":2,"name":"Ivy"}`
		}
		status, got := do(method, body)
		if status != 403 || !strings.HasPrefix(got, `{"error":403`) {
			t.Fatalf("%s with a read-only token after its kept read: %d %s, want 403", method, status, got)
		}
	}
	if status, body := do("GET", ""); status != 200 || body != `{"id":1,"name":"Fern"}` {
		t.Fatalf("the plant after the refused writes: %d %s", status, body)
	}
}

// TestShadowInterruptOffRefused: serve refuses to start with a shadow whose
// sidecar turns interrupt off, naming the file: a shadow on trial must
// never run a call nothing can stop.
func TestShadowInterruptOffRefused(t *testing.T) {
	t.Parallel()
	dir := pluginsDir(t, "10-bearer-auth.wasm", "20-plant-rules.wasm")
	withFixture(t, dir, "loop", "20-plant-rules.shadow.wasm", `{"limits": {"interrupt": false}}`)
	g := launchGateway(t, nil, "--plugins", dir, "--bootstrap-token", rolloutToken)
	if code := g.exit(t, 60*time.Second); code != 1 {
		t.Fatalf("exit %d, want 1\n%s", code, g.stderr)
	}
	want := `plantgate: load plugins: plugin 20-plant-rules.shadow.json: "limits.interrupt": false is refused for a shadow: a call nothing can stop would hold a CPU and stall the gateway at its next garbage collection`
	if !strings.Contains(g.stderr.String(), want) {
		t.Fatalf("stderr lacks %s:\n%s", want, g.stderr)
	}
}
