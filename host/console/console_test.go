package console

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/plantgate/plantgate/host/metrics"
	"github.com/plantgate/plantgate/host/wasm"
)

// clock is a Now the test moves.
type clock struct{ t time.Time }

func (c *clock) now() time.Time { return c.t }

func fetch(t *testing.T, method, url string) (int, http.Header, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return res.StatusCode, res.Header, string(b)
}

func wantIn(t *testing.T, body string, wants ...string) {
	t.Helper()
	for _, w := range wants {
		if !strings.Contains(body, w) {
			t.Errorf("the page lacks %q", w)
		}
	}
	if t.Failed() {
		t.Fatalf("page:\n%s", body)
	}
}

// TestConsolePage serves known metrics and a known chain through a real
// HTTP server and finds the exact numbers in the page, with JavaScript
// nowhere involved.
func TestConsolePage(t *testing.T) {
	t.Parallel()
	m := metrics.New()
	for range 3 {
		m.Request("/plants", 201, time.Millisecond)
	}
	m.Request("/plants", 401, 3*time.Millisecond)
	m.PluginCall("bearer-auth", "authorize", "allow", 20*time.Microsecond)
	m.PluginCall("bearer-auth", "authorize", "deny", 20*time.Microsecond)
	m.PluginCall("plant-rules", "validate", "fault", 40*time.Microsecond)
	m.TokenCache(func() (uint64, uint64) { return 3, 1 })
	since := time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC)
	w := m.Webhooks(func(context.Context) (int64, time.Time, error) { return 7, time.Time{}, nil })
	w.WebhookDelivery("failed")
	w.WebhookDelivery("failed")
	w.WebhookAttempt("5xx", time.Millisecond)

	clk := &clock{since.Add(time.Hour)}
	c := New(Config{Gatherer: m.Registry(), Now: clk.now, Chain: func() (wasm.ReloadStatus, []wasm.PluginState) {
		return wasm.ReloadStatus{Generation: 3, Since: since, LastReload: since.Add(time.Minute), LastOutcome: wasm.ReloadRefused,
				Refusal: "plugin 30-bad.wasm: not a module", RefusedAt: since.Add(time.Minute)},
			[]wasm.PluginState{{
				Info: wasm.PluginInfo{Name: "bearer-auth", File: "10-bearer-auth.wasm", Phases: []string{"authorize"}, ABIVersion: 1,
					SHA256: [32]byte{0xab, 0xcd}, Limits: wasm.Limits{MemoryMiB: 16, Timeout: 50 * time.Millisecond, Instances: 2, MaxCalls: 1000, Interrupt: wasm.InterruptOn}},
				Stats:  wasm.Stats{Live: 2, Calls: 2},
				Config: []byte(`{"issuer":"plantgate","signing_key":"hunter2"}`),
			}}
	}})
	srv := httptest.NewServer(c)
	defer srv.Close()

	status, h, body := fetch(t, "GET", srv.URL+"/")
	if status != 200 || h.Get("Content-Type") != "text/html; charset=utf-8" || h.Get("Content-Security-Policy") != csp {
		t.Fatalf("GET /: %d %v", status, h)
	}
	wantIn(t, body,
		`<strong id="requests-total">4</strong>`,
		`<strong id="requests-rate">—</strong>`, // one sample so far
		`<tr><td>/plants</td><td>201</td><td>3</td><td>—</td></tr>`,
		`<tr><td>/plants</td><td>401</td><td>1</td><td>—</td></tr>`,
		`<tr><td>/plants</td><td>4</td><td>1.5</td><td>4.9</td></tr>`, // mean 1.5 ms; p99 interpolated in the 2.5–5 ms bucket
		`<tr><td>bearer-auth</td><td>authorize</td><td>1</td><td>1</td><td>0</td><td>0</td>`,
		`<tr><td>plant-rules</td><td>validate</td><td>0</td><td>0</td><td>1</td><td>0</td>`,
		`<strong id="generation">3</strong>, in force since 2026-11-23 10:00:00 UTC`,
		"The last reload was refused; the chain below stays in force.\n2026-11-23 10:01:00 UTC: plugin 30-bad.wasm: not a module",
		`<td class="plugin-name">bearer-auth<br><small>10-bearer-auth.wasm, 0 bytes</small></td><td>authorize</td><td>1</td>`,
		`<code class="sha">abcd000000000000000000000000000000000000000000000000000000000000</code>`,
		`memory 16 MiB, timeout 50ms, 2 instances, recycled after 1000 calls, interrupt on`,
		"&#34;signing_key&#34;: &#34;•••&#34;",
		`<strong id="token-hit-rate">75%</strong> hits (3 hits, 1 misses)`,
		`Backlog: <strong id="webhook-backlog">7</strong>`,
		`failed <strong id="webhook-failed">2</strong>`,
		`Attempts: 5xx 1;`,
		`This gateway does not follow the store's chain (serve --plugins-from-store).`,
	)
	if strings.Contains(body, "hunter2") {
		t.Fatal("the page shows a secret")
	}

	// 10 s later, 5 more requests: 0.5/s overall, 0.5/s for /plants 201.
	for range 5 {
		m.Request("/plants", 201, time.Millisecond)
	}
	clk.t = clk.t.Add(10 * time.Second)
	status, _, body = fetch(t, "GET", srv.URL+"/console.json")
	if status != 200 {
		t.Fatalf("GET /console.json: %d", status)
	}
	var v struct {
		Requests    float64 `json:"requests"`
		RequestRate float64 `json:"request_rate_per_second"`
		Routes      []RouteRow
		Chain       Chain
	}
	if err := json.Unmarshal([]byte(body), &v); err != nil {
		t.Fatal(err)
	}
	if v.Requests != 9 || v.RequestRate != 0.5 || len(v.Routes) != 2 || *v.Routes[0].Rate != 0.5 || *v.Routes[1].Rate != 0 ||
		v.Chain.Plugins[0].Config != "{\n  \"issuer\": \"plantgate\",\n  \"signing_key\": \"•••\"\n}" {
		t.Fatalf("console.json: %s", body)
	}

	for _, tt := range []struct {
		method, path string
		status       int
		contentType  string
	}{
		{"GET", "/console.js", 200, "text/javascript; charset=utf-8"},
		{"GET", "/console.css", 200, "text/css; charset=utf-8"},
		{"GET", "/favicon.ico", 204, ""},
		{"GET", "/page.html", 404, "text/plain; charset=utf-8"},
		{"GET", "/assets/page.html", 404, "text/plain; charset=utf-8"},
		{"POST", "/", 405, "text/plain; charset=utf-8"},
	} {
		if status, h, _ := fetch(t, tt.method, srv.URL+tt.path); status != tt.status || h.Get("Content-Type") != tt.contentType {
			t.Errorf("%s %s: %d %s", tt.method, tt.path, status, h.Get("Content-Type"))
		}
	}
}

// TestConsoleWithoutChain: a gateway without a plugins directory or
// webhooks says so instead of showing empty tables.
func TestConsoleWithoutChain(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(New(Config{Gatherer: metrics.New().Registry()}))
	defer srv.Close()
	status, _, body := fetch(t, "GET", srv.URL+"/")
	if status != 200 {
		t.Fatal(status)
	}
	wantIn(t, body, `<strong id="requests-total">0</strong>`, "No plugins directory: the chain is empty.",
		"Token cache: off.", "Webhooks are off (no durable store).", "No request yet.")
}
