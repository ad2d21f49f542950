package main

import (
	"context"
	"encoding/json"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// pageServer serves an empty HTML page on its own loopback port: an origin
// of its own, apart from the gateway's.
func pageServer(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{ReadHeaderTimeout: 5 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		_, _ = w.Write([]byte(`<!doctype html><html><head><title>plant app</title><link rel="icon" href="data:,"></head><body></body></html>`))
	})}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return "http://" + ln.Addr().String()
}

// pageFetch loads page in the browser and has it POST a plant to the
// gateway with fetch() and a bearer token, as a single-page app does. It
// returns what the page saw: "status body", or "error: …" when the
// browser refused the answer to the page.
func pageFetch(t *testing.T, ctx context.Context, page, gateway, body string) string {
	t.Helper()
	js := `fetch(` + jsString(gateway+"/plants") + `, {method: "POST", headers: {"Authorization": "Bearer ` + testToken + `", "Content-Type": "application/json"}, body: ` + jsString(body) + `})
		.then(r => r.text().then(b => r.status + " " + b))
		.catch(e => "error: " + e.name + ": " + e.message)`
	if err := chromedp.Do(ctx, chromedp.Navigate(page)); err != nil {
		t.Fatal(err)
	}
	got, err := chromedp.Run(ctx, chromedp.Evaluate[string](js, chromedp.EvalAwaitPromise))
	if err != nil {
		t.Fatal(err)
	}
	return got
}

func jsString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// TestCORSInChromium: a page of an allowed origin creates a plant on the
// gateway (another origin) with fetch() and a bearer token, through the
// browser's own preflight, and reads the 200 Plant; a page of an origin
// the gateway does not allow cannot (its preflight is refused, the plant
// is not created, and the browser tells the page only that it failed).
func TestCORSInChromium(t *testing.T) {
	t.Parallel()
	ctx, problems := browser(t)
	allowed, other := pageServer(t), pageServer(t)
	logs := &syncBuffer{}
	m := &Main{
		Listen: "127.0.0.1:0", PluginsDir: pluginsDir(t, "10-bearer-auth.wasm", "20-plant-rules.wasm"), BootstrapToken: testToken,
		CacheDir: sharedCache, AccessLog: true, RequestTimeout: 10 * time.Second, Logger: slog.New(slog.NewTextHandler(logs, nil)),
		Transport: Transport{CORSOrigins: []string{allowed}},
	}
	if err := m.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	gw := "http://" + m.Addr().String()

	if got := pageFetch(t, ctx, allowed+"/", gw, `{"id":1,"name":"Monstera","tag":"tropical"}`); got != `200 {"name":"Monstera","tag":"tropical"}` {
		t.Fatalf("allowed origin's fetch: %s\n%s", got, logs)
	}
	if got := pageFetch(t, ctx, other+"/", gw, `{"id":2,"name":"Fern"}`); got != "error: TypeError: Failed to fetch" {
		t.Fatalf("other origin's fetch: %s", got)
	}
	// What the gateway saw: each page's preflight, and the allowed one's POST.
	lines := accessLines(logs.String())
	want := []string{"OPTIONS /plants 204", "POST /plants 200", "OPTIONS /plants 403"}
	if strings.Join(lines, "\n") != strings.Join(want, "\n") {
		t.Fatalf("access log:\n%s\nwant:\n%s", strings.Join(lines, "\n"), strings.Join(want, "\n"))
	}
	status, body, _ := send(t, mustRequest(t, "GET", gw+"/plants/2"), testToken)
	if status != 404 {
		t.Fatalf("the other origin's plant: %d %s", status, body)
	}
	// The browser reports the refused fetch itself (a CORS error in its
	// log); anything else it reports is a problem.
	for _, p := range problems() {
		if !strings.Contains(p, "has been blocked by CORS policy") && !strings.Contains(p, "net::ERR_FAILED") {
			t.Errorf("the browser reported: %s", p)
		}
	}
}

// accessLines is "METHOD path status" of each access line in logs.
func accessLines(logs string) []string {
	var out []string
	for _, l := range strings.Split(logs, "\n") {
		if !strings.Contains(l, "msg=request ") {
			continue
		}
		f := map[string]string{}
		for _, kv := range strings.Fields(l) {
			if k, v, ok := strings.Cut(kv, "="); ok {
				f[k] = v
			}
		}
		out = append(out, f["method"]+" "+f["path"]+" "+f["status"])
	}
	return out
}
