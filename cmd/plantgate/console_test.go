package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"

	"github.com/plantgate/plantgate/host/redis/redistest"
)

// browser starts a headless Chromium for the test, or skips (fails with
// PLANTGATE_REQUIRE_BROWSER=1) where there is none. problems collects every
// console error, warning, uncaught exception and browser log error, CSP
// violations and failed loads included.
func browser(t *testing.T) (ctx context.Context, problems func() []string) {
	t.Helper()
	path, err := exec.LookPath("chromium")
	if err != nil {
		if os.Getenv("PLANTGATE_REQUIRE_BROWSER") == "1" {
			t.Fatal("chromium not found and PLANTGATE_REQUIRE_BROWSER=1: apt-get install -y chromium")
		}
		t.Skip("chromium not found: the console's browser test needs Debian's chromium package (apt-get install -y chromium); set PLANTGATE_REQUIRE_BROWSER=1 to fail instead")
	}
	alloc, cancelAlloc := chromedp.NewExecAllocator(context.Background(),
		chromedp.ExecPath(path),
		chromedp.Headless,
		chromedp.NoSandbox, // the CI machine runs as root
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		// Without these Chromium calls home, and the closed network refuses it.
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.UserDataDir(t.TempDir()),
	)
	ctx, cancelCtx := chromedp.NewContext(alloc)
	t.Cleanup(func() { cancelCtx(); cancelAlloc() })
	// The first call starts the browser; the subscriptions below would each
	// start one if it had not.
	if err := chromedp.Do(ctx); err != nil {
		t.Fatal("start chromium: ", err)
	}

	// Subscribed before the page loads; the log domain reports what page
	// scripts cannot see: CSP violations, failed loads.
	var mu sync.Mutex
	var seen []string
	collect := func(p string) {
		mu.Lock()
		seen = append(seen, p)
		mu.Unlock()
	}
	exceptions := chromedp.Events(ctx, runtime.ExceptionThrown)
	calls := chromedp.Events(ctx, runtime.ConsoleAPICalled)
	entries := chromedp.Events(ctx, log.EntryAdded)
	go func() {
		for ev, err := range exceptions {
			if err != nil {
				return
			}
			d := ev.ExceptionDetails
			desc := ""
			if d.Exception != nil {
				desc = d.Exception.Description
			}
			collect(fmt.Sprintf("exception: %s %s at %s:%d", d.Text, desc, d.URL, d.LineNumber))
		}
	}()
	go func() {
		for ev, err := range calls {
			if err != nil {
				return
			}
			if ev.Type == runtime.ConsoleAPICalledTypeError || ev.Type == runtime.ConsoleAPICalledTypeWarning || ev.Type == runtime.ConsoleAPICalledTypeAssert {
				var args []string
				for _, a := range ev.Args {
					args = append(args, string(a.Value)+a.Description)
				}
				collect(fmt.Sprintf("console.%s: %s", ev.Type, strings.Join(args, " ")))
			}
		}
	}()
	go func() {
		for ev, err := range entries {
			if err != nil {
				return
			}
			if e := ev.Entry; e.Level == log.EntryLevelError || e.Level == log.EntryLevelWarning {
				collect(fmt.Sprintf("log %s (%s): %s %s", e.Level, e.Source, e.Text, e.URL))
			}
		}
	}()
	if _, err := chromedp.Call(ctx, log.Enable, cdp.Empty{}); err != nil {
		t.Fatal("enable the log domain: ", err)
	}
	return ctx, func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), seen...)
	}
}

// TestConsoleInChromium loads the console in a real headless Chromium from
// a real gateway: no console error or exception, the bundled plugins by
// name, and the request counter rising by itself after requests are sent.
func TestConsoleInChromium(t *testing.T) {
	t.Parallel()
	ctx, problems := browser(t)
	m := startMain(t, pluginsDir(t, "10-bearer-auth.wasm", "20-plant-rules.wasm"), nil)
	base, admin := "http://"+m.Addr().String(), "http://"+m.AdminAddr().String()

	if err := chromedp.Do(ctx, chromedp.Navigate(admin+"/")); err != nil {
		t.Fatal(err)
	}
	before, err := chromedp.Run(ctx, chromedp.TextContent(chromedp.CSS("#requests-total")))
	if err != nil {
		t.Fatal(err)
	}
	plugins, err := chromedp.Run(ctx, chromedp.TextContent(chromedp.CSS("#plugins")))
	if err != nil {
		t.Fatal(err)
	}
	if before != "0" || !strings.Contains(plugins, "bearer-auth") || !strings.Contains(plugins, "plant-rules") {
		t.Fatalf("at load: %q requests, plugins %q", before, plugins)
	}

	for i := range 3 {
		if status, body := post(t, base, testToken, fmt.Sprintf(`{"id":%d,"name":"Fern"}`, i+1)); status != 200 {
			t.Fatalf("create plant: %d %s", status, body)
		}
	}
	// The page's own script must bring the new count in: wait for the DOM
	// to change rather than for a time.
	after, err := chromedp.Run(ctx,
		chromedp.Poll[string](`document.getElementById("requests-total").textContent === "3" && document.getElementById("live").textContent`,
			chromedp.WithPollingMutation(), chromedp.WithPollingTimeout(30*time.Second)))
	if err != nil {
		t.Fatalf("the request counter did not rise to 3: %v", err)
	}
	if !strings.HasPrefix(after, "Live, updated every 2 s") {
		t.Fatalf("status line: %q", after)
	}
	if p := problems(); len(p) > 0 {
		t.Fatalf("the browser reported:\n%s", strings.Join(p, "\n"))
	}
}

// TestConsoleWithoutJavaScript: a plain GET, as a browser with JavaScript
// off makes it, carries the numbers as of that moment.
func TestConsoleWithoutJavaScript(t *testing.T) {
	t.Parallel()
	m := startMain(t, pluginsDir(t, "10-bearer-auth.wasm", "20-plant-rules.wasm"), nil)
	base, admin := "http://"+m.Addr().String(), "http://"+m.AdminAddr().String()
	for _, r := range []struct {
		body   string
		status int
	}{{`{"id":1,"name":"Monstera"}`, 200}, {`{"id":2,"name":"Fern"}`, 200}, {`{"id":3,"name":""}`, 400}} {
		if status, body := post(t, base, testToken, r.body); status != r.status {
			t.Fatalf("%s: %d %s", r.body, status, body)
		}
	}
	status, body, _ := get(t, admin+"/")
	if status != 200 {
		t.Fatalf("GET /: %d", status)
	}
	for _, want := range []string{
		`<strong id="requests-total">3</strong>`,
		`<tr><td>/plants</td><td>200</td><td>2</td>`,
		`<tr><td>/plants</td><td>400</td><td>1</td>`,
		`<td class="plugin-name">bearer-auth<br><small>10-bearer-auth.wasm,`,
		`<td class="plugin-name">plant-rules<br><small>20-plant-rules.wasm,`,
		`<tr><td>bearer-auth</td><td>authorize</td><td>3</td><td>0</td><td>0</td><td>0</td>`,
		`<tr><td>plant-rules</td><td>validate</td><td>2</td><td>1</td><td>0</td><td>0</td>`,
		`<strong id="generation">1</strong>`,
		`Last reload: never.`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("the page lacks %q", want)
		}
	}
	if t.Failed() {
		t.Log(body)
	}
}

// TestConsoleFleetInChromium: a gateway following the store shows the
// fleet in its console, and the page follows a push by itself.
func TestConsoleFleetInChromium(t *testing.T) {
	t.Parallel()
	ctx, problems := browser(t)
	srv := redistest.Start(t)
	url := srv.URL()
	for _, f := range []string{"10-bearer-auth.wasm", "20-plant-rules.wasm"} {
		fleetCLI(t, 0, "plugin", "push", filepath.Join(bundledDir, f), "--redis-url", url, "--cache-dir", sharedCache)
	}
	admin := "127.0.0.1:" + freePort(t)
	g := startGateway(t, nil, "--redis-url", url, "--plugins-from-store", "--admin-listen", admin)
	if err := chromedp.Do(ctx, chromedp.Navigate("http://"+admin+"/")); err != nil {
		t.Fatal(err)
	}
	waitPage := func(what, js string) {
		t.Helper()
		if _, err := chromedp.Run(ctx, chromedp.Poll[bool](js, chromedp.WithPollingMutation(), chromedp.WithPollingTimeout(30*time.Second))); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	// The first beat may land after the page loaded: the page's refresh
	// brings it in.
	waitPage("converged on version 2", `document.getElementById("fleet-version")?.textContent === "2" &&
		document.getElementById("fleet-converged")?.textContent === "converged"`)
	rows, err := chromedp.Run(ctx, chromedp.TextContent(chromedp.CSS("#fleet-gateways tbody")))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(rows, "(this one)") || !strings.Contains(rows, strings.TrimPrefix(g.base, "http://")) {
		t.Fatalf("fleet rows: %q", rows)
	}
	fleetCLI(t, 0, "plugin", "push", fixtureAs(t, "deny", "30-deny.wasm"), "--redis-url", url)
	waitPage("converged on version 3", `document.getElementById("fleet-version")?.textContent === "3" &&
		document.getElementById("fleet-converged")?.textContent === "converged"`)
	if p := problems(); len(p) > 0 {
		t.Fatalf("the browser reported:\n%s", strings.Join(p, "\n"))
	}
}

// TestConsoleShadowInChromium: the console shows a shadow's agreement
// counts and the fleet's latest disagreements, and follows new ones by
// itself.
func TestConsoleShadowInChromium(t *testing.T) {
	t.Parallel()
	ctx, problems := browser(t)
	dir := pluginsDir(t, "10-bearer-auth.wasm", "20-plant-rules.wasm")
	withFixture(t, dir, "deny", "20-plant-rules.shadow.wasm", "")
	m := startMain(t, dir, nil)
	base, admin := "http://"+m.Addr().String(), "http://"+m.AdminAddr().String()
	if err := chromedp.Do(ctx, chromedp.Navigate(admin+"/")); err != nil {
		t.Fatal(err)
	}
	empty, err := chromedp.Run(ctx, chromedp.TextContent(chromedp.CSS("#shadow-diffs tbody")))
	if err != nil || !strings.Contains(empty, "No disagreement logged.") {
		t.Fatalf("at load: %q %v", empty, err)
	}
	for _, r := range []struct {
		body   string
		status int
	}{{`{"id":1,"name":"Monstera"}`, 200}, {`{"id":2,"name":""}`, 400}} {
		if status, body := post(t, base, testToken, r.body); status != r.status {
			t.Fatalf("%s: %d %s", r.body, status, body)
		}
	}
	// Authorize: 2 would_deny; validate: Monstera would_deny, the empty
	// name denied by both (agree).
	if _, err := chromedp.Run(ctx, chromedp.Poll[bool](`(() => {
		const row = document.querySelector("#shadow-counts tbody tr");
		const cells = row ? [...row.cells].map(c => c.textContent) : [];
		return cells.join("|") === "plant-rules|1|3|0|0|0|25%" &&
			document.querySelectorAll("#shadow-diffs tbody tr td.outcome").length === 3;
	})()`, chromedp.WithPollingMutation(), chromedp.WithPollingTimeout(30*time.Second))); err != nil {
		counts, _ := chromedp.Run(ctx, chromedp.TextContent(chromedp.CSS("#shadows")))
		t.Fatalf("the shadow section never showed the counts and diffs: %v\n%s", err, counts)
	}
	diffs, err := chromedp.Run(ctx, chromedp.TextContent(chromedp.CSS("#shadow-diffs tbody")))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(diffs, `plant 1 "Monstera"`) || !strings.Contains(diffs, "POST /plants") || !strings.Contains(diffs, "deny 40355") ||
		strings.Contains(diffs, testToken) {
		t.Fatalf("diff rows: %q", diffs)
	}
	if p := problems(); len(p) > 0 {
		t.Fatalf("the browser reported:\n%s", strings.Join(p, "\n"))
	}
}
