package main

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// The decision log, written by the real server, has one line per plugin
// decision of each request made, with exactly the fields of that request
// and decision, never the credential; /metrics counts the lines.
func TestDecisionLogMatchesRequests(t *testing.T) {
	t.Parallel()
	const token = "dl-token-0123456789abcdef"
	dir := patientPlugins(t)
	logPath := filepath.Join(t.TempDir(), "decisions.log")
	adminPort := freePort(t)
	g := startGateway(t, nil, "--plugins", dir, "--bootstrap-token", token, "--decision-log", logPath,
		"--admin-listen", "127.0.0.1:"+adminPort)
	start := time.Now()

	do := func(method, path, reqID, tok, body string, want int) {
		t.Helper()
		req, _ := http.NewRequest(method, g.base+path, strings.NewReader(body))
		req.Header.Set("X-Request-ID", reqID)
		if body != "" {
			req.Header.Set("Content-Type", "application/json")
		}
		if status, b, _ := send(t, req, tok); status != want {
			t.Fatalf("%s %s: %d %s, want %d", method, path, status, b, want)
		}
	}
	do("POST", "/plants", "req-create", token, `{"id":7,"name":"Fern","tag":"indoor"}`, 200)
	do("POST", "/plants", "req-badtoken", "not-the-token", `{"id":8,"name":"Fern"}`, 401)
	do("POST", "/plants", "req-rule", token, `{"id":0,"name":"Fern"}`, 400)
	do("GET", "/plants/7", "req-get", token, "", 200)

	// Every line decided so far, in request order (one request at a time).
	want := []string{
		`{"labels":{"app":"plantgate","version":"` + testVersion + `"},"req_id":"req-create","requested_by":"127.0.0.1","path":"plantgate/authorize/bearer-auth","plugin":"bearer-auth","phase":"authorize","shadow":false,"input":{"method":"POST","path":"/plants","route":"POST /plants"},"result":{"decision":"allow","principal":"bootstrap"}}`,
		`{"labels":{"app":"plantgate","version":"` + testVersion + `"},"req_id":"req-create","requested_by":"127.0.0.1","path":"plantgate/validate/plant-rules","plugin":"plant-rules","phase":"validate","shadow":false,"input":{"method":"POST","path":"/plants","route":"POST /plants","plant":{"id":7,"name":"Fern","tag":"indoor"},"principal":"bootstrap"},"result":{"decision":"allow"}}`,
		`{"labels":{"app":"plantgate","version":"` + testVersion + `"},"req_id":"req-badtoken","requested_by":"127.0.0.1","path":"plantgate/authorize/bearer-auth","plugin":"bearer-auth","phase":"authorize","shadow":false,"input":{"method":"POST","path":"/plants","route":"POST /plants"},"result":{"decision":"deny","code":40151,"message":"invalid token"}}`,
		`{"labels":{"app":"plantgate","version":"` + testVersion + `"},"req_id":"req-rule","requested_by":"127.0.0.1","path":"plantgate/authorize/bearer-auth","plugin":"bearer-auth","phase":"authorize","shadow":false,"input":{"method":"POST","path":"/plants","route":"POST /plants"},"result":{"decision":"allow","principal":"bootstrap"}}`,
		`{"labels":{"app":"plantgate","version":"` + testVersion + `"},"req_id":"req-rule","requested_by":"127.0.0.1","path":"plantgate/validate/plant-rules","plugin":"plant-rules","phase":"validate","shadow":false,"input":{"method":"POST","path":"/plants","route":"POST /plants","plant":{"id":0,"name":"Fern"},"principal":"bootstrap"},"result":{"decision":"deny","code":40050,"message":"id must be at least 1, got 0"}}`,
		`{"labels":{"app":"plantgate","version":"` + testVersion + `"},"req_id":"req-get","requested_by":"127.0.0.1","path":"plantgate/authorize/bearer-auth","plugin":"bearer-auth","phase":"authorize","shadow":false,"input":{"method":"GET","path":"/plants/7","route":"GET /plants/{id}","path_id":7},"result":{"decision":"allow","principal":"bootstrap"}}`,
	}
	lines := waitLines(t, logPath, len(want))
	digests := map[string]string{}
	for _, f := range []string{"10-bearer-auth.wasm", "20-plant-rules.wasm"} {
		b, err := os.ReadFile(filepath.Join(dir, f))
		if err != nil {
			t.Fatal(err)
		}
		sum := sha256.Sum256(b)
		digests[f[3:len(f)-5]] = hex.EncodeToString(sum[:])
	}
	uuid := regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)
	ids := map[string]bool{}
	for i, line := range lines {
		if strings.Contains(line, token) || strings.Contains(line, "not-the-token") {
			t.Fatalf("line %d holds a credential: %s", i, line)
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("line %d: %v: %s", i, err, line)
		}
		id, _ := m["decision_id"].(string)
		if !uuid.MatchString(id) || ids[id] {
			t.Fatalf("line %d: decision_id %q (a fresh UUID each)", i, id)
		}
		ids[id] = true
		ts, err := time.Parse(time.RFC3339Nano, m["timestamp"].(string))
		if err != nil || ts.Before(start.Add(-time.Second)) || ts.After(time.Now()) {
			t.Fatalf("line %d: timestamp %v (%v)", i, m["timestamp"], err)
		}
		metrics, _ := m["metrics"].(map[string]any)
		if ns, _ := metrics["timer_plugin_call_ns"].(float64); ns <= 0 || len(metrics) != 1 {
			t.Fatalf("line %d: metrics %v", i, m["metrics"])
		}
		if v := m["version"]; v != digests[m["plugin"].(string)] {
			t.Fatalf("line %d: version %v, want the module's SHA-256 %s", i, v, digests[m["plugin"].(string)])
		}
		delete(m, "decision_id")
		delete(m, "timestamp")
		delete(m, "metrics")
		delete(m, "version")
		got, _ := json.Marshal(m)
		var w map[string]any
		if err := json.Unmarshal([]byte(want[i]), &w); err != nil {
			t.Fatal(err)
		}
		wantJSON, _ := json.Marshal(w)
		if string(got) != string(wantJSON) {
			t.Errorf("line %d:\n got %s\nwant %s", i, got, wantJSON)
		}
	}
	status, body, _ := send(t, mustRequest(t, "GET", "http://127.0.0.1:"+adminPort+"/metrics"), "")
	for _, want := range []string{`plantgate_decision_log_lines_total{result="written"} 6`, `plantgate_decision_log_lines_total{result="dropped"} 0`, `plantgate_decision_log_lines_total{result="error"} 0`} {
		if status != 200 || !strings.Contains(body, want+"\n") {
			t.Fatalf("/metrics (%d) lacks %q", status, want)
		}
	}
	g.stop(t)
	if again := waitLines(t, logPath, len(want)); len(again) != len(want) {
		t.Fatalf("%d lines after stop, want %d", len(again), len(want))
	}
}

func mustRequest(t *testing.T, method, url string) *http.Request {
	t.Helper()
	req, err := http.NewRequest(method, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	return req
}

// waitLines waits until path holds at least n lines and returns them all.
func waitLines(t *testing.T, path string, n int) []string {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		var lines []string
		if f, err := os.Open(path); err == nil {
			sc := bufio.NewScanner(f)
			for sc.Scan() {
				lines = append(lines, sc.Text())
			}
			f.Close()
		}
		if len(lines) >= n {
			return lines
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %d lines after 20s, want %d:\n%s", path, len(lines), n, strings.Join(lines, "\n"))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// A shadow plugin's decisions reach the decision log beside the live ones,
// marked "shadow": true, under the request's id, never enforced: a
// deny-everything shadow of plant-rules changes no answer, and its two
// denies (it serves both phases) are logged with the live chain's allows.
func TestDecisionLogShadow(t *testing.T) {
	t.Parallel()
	const token = "dl-shadow-token-0123456789"
	dir := patientPlugins(t)
	withFixture(t, dir, "deny", "20-plant-rules.shadow.wasm", `{"limits":{"timeout_ms":1000}}`)
	logPath := filepath.Join(t.TempDir(), "decisions.log")
	g := startGateway(t, nil, "--plugins", dir, "--bootstrap-token", token, "--decision-log", logPath)
	req, _ := http.NewRequest("POST", g.base+"/plants", strings.NewReader(`{"id":9,"name":"Fern"}`))
	req.Header.Set("X-Request-ID", "req-shadow")
	req.Header.Set("Content-Type", "application/json")
	if status, b, _ := send(t, req, token); status != 200 {
		t.Fatalf("create: %d %s, want 200: a shadow is never enforced", status, b)
	}
	type seen struct {
		Phase, Decision string
		Shadow          bool
		Code            float64
	}
	got := map[seen]int{}
	for _, line := range waitLines(t, logPath, 4) {
		var m struct {
			ReqID  string `json:"req_id"`
			Plugin string
			Phase  string
			Shadow bool
			Result struct {
				Decision string
				Code     float64
			}
		}
		if err := json.Unmarshal([]byte(line), &m); err != nil || strings.Contains(line, token) {
			t.Fatalf("line %s: %v (or it holds the credential)", line, err)
		}
		if m.ReqID != "req-shadow" || m.Plugin == "" {
			t.Fatalf("line %s: want req_id req-shadow and a plugin", line)
		}
		got[seen{m.Phase, m.Result.Decision, m.Shadow, m.Result.Code}]++
	}
	want := map[seen]int{
		{"authorize", "allow", false, 0}:   1,
		{"validate", "allow", false, 0}:    1,
		{"authorize", "deny", true, 40355}: 1,
		{"validate", "deny", true, 40355}:  1,
	}
	if len(got) != len(want) {
		t.Fatalf("decisions %v, want %v", got, want)
	}
	for k, n := range want {
		if got[k] != n {
			t.Fatalf("decisions %v, want %v", got, want)
		}
	}
}
