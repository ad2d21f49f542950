package main

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/plantgate/plantgate/host/redis/redistest"
	"github.com/plantgate/plantgate/host/wasm/wasmtest"
)

// TestRateLimitFleet: two gateway processes on one real redis-server share
// plugins/rate-limit's budget. Over 10 one-second windows, clients send
// about 3× the limit, alternating between the gateways; in every window
// the fleet accepts at most the limit plus 5%, and in every window the
// clients saturated it accepts most of the limit (the figures are logged).
func TestRateLimitFleet(t *testing.T) {
	const (
		limit   = 100
		windows = 10
		rate    = 3 * limit // requests a second, both gateways together
	)
	srv := redistest.Start(t)
	dir := pluginsDir(t, "10-bearer-auth.wasm")
	if err := wasmtest.Build(filepath.Join(dir, "30-rate-limit.wasm"), "./plugins/rate-limit"); err != nil {
		t.Fatal(err)
	}
	sidecar := fmt.Sprintf(`{"config": {"limit": %d, "window": "1s", "by": "token"}}`, limit)
	if err := os.WriteFile(filepath.Join(dir, "30-rate-limit.json"), []byte(sidecar), 0o644); err != nil {
		t.Fatal(err)
	}
	const token = "fleet-token-0123456789abcdef"
	env := []string{"PLANTGATE_BOOTSTRAP_TOKEN=" + token}
	gws := []*gateway{
		startGateway(t, env, "--redis-url", srv.URL(), "--plugins", dir),
		startGateway(t, env, "--redis-url", srv.URL(), "--plugins", dir),
	}

	type result struct {
		sent, recv int64 // window numbers (Unix seconds) at send and answer
		status     int
		gateway    int
	}
	var (
		mu      sync.Mutex
		results []result
	)
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}, Timeout: 10 * time.Second}
	jobs := make(chan int, rate*windows)
	var wg sync.WaitGroup
	for range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range jobs {
				req, _ := http.NewRequest(http.MethodGet, gws[i%2].base+"/plants/1", nil)
				req.Header.Set("Authorization", "Bearer "+token)
				sent := time.Now().Unix()
				resp, err := client.Do(req)
				r := result{sent: sent, recv: time.Now().Unix(), gateway: i % 2}
				if err == nil {
					r.status = resp.StatusCode
					resp.Body.Close()
				}
				mu.Lock()
				results = append(results, r)
				mu.Unlock()
			}
		}()
	}
	// Warm each gateway's connections and plugin instances first.
	for i := range 8 {
		jobs <- i
	}
	// Start on a window boundary; send evenly through 10 whole windows.
	first := time.Now().Truncate(time.Second).Add(2 * time.Second)
	time.Sleep(time.Until(first))
	start := time.Now()
	tick := time.NewTicker(time.Second / rate)
	for i := 0; time.Now().Before(first.Add(windows * time.Second)); {
		// Paced by the ticker, and never behind it: a slow tick is made up.
		for i < int(time.Since(start)*rate/time.Second) {
			jobs <- i
			i++
		}
		<-tick.C
	}
	tick.Stop()
	close(jobs)
	wg.Wait()

	// A request answered in the window it was sent in was allowed in that
	// window; one answered in the next was allowed in one of the two. So
	// each window's sure count, and each pair of neighbours with the
	// requests between them, must stay within the limit + 5%.
	w0 := first.Unix()
	offered := make([]int, windows)
	accepted := make([]int, windows+1) // sent and answered in the window (+ the one after the run)
	between := make([]int, windows)    // sent in the window, answered in the next
	for _, r := range results {
		switch r.status {
		case http.StatusNotFound, http.StatusTooManyRequests:
		default:
			t.Fatalf("a request answered %d, want 404 (allowed: no plant 1) or 429", r.status)
		}
		w := r.sent - w0
		if w < 0 || w >= windows {
			continue // the warm-up
		}
		offered[w]++
		switch {
		case r.status != http.StatusNotFound:
		case r.recv == r.sent:
			accepted[w]++
		case r.recv == r.sent+1:
			between[w]++
		default:
			t.Fatalf("a request took over a whole window: sent in %d, answered in %d", r.sent, r.recv)
		}
	}
	const most = limit * 105 / 100
	var perGateway [2]int
	for _, r := range results {
		if r.status == http.StatusNotFound && r.sent >= w0 {
			perGateway[r.gateway]++
		}
	}
	if perGateway[0] == 0 || perGateway[1] == 0 {
		t.Fatalf("accepted per gateway %v: both must take part for the limit to be the fleet's", perGateway)
	}
	t.Logf("accepted by gateway: %v", perGateway)
	total := 0
	for w := range windows {
		total += accepted[w] + between[w]
		t.Logf("window %d: offered %d, accepted %d (+%d answered in the next window), limit %d", w, offered[w], accepted[w], between[w], limit)
		if accepted[w] > most || accepted[w]+between[w]+accepted[w+1] > 2*most {
			t.Errorf("window %d: accepted %d (+%d, +%d in the next), over the limit %d + 5%%", w, accepted[w], between[w], accepted[w+1], limit)
		}
		// The requests sent in the window before and answered in this one
		// may have been counted in this one: a busy window's late answers
		// (window 5: 100 +32, window 6: 68) are not the limiter refusing
		// too much.
		spill := 0
		if w > 0 {
			spill = between[w-1]
		}
		if offered[w] >= 2*limit && (spill+accepted[w]+between[w])*100 < limit*80 {
			t.Errorf("window %d: offered %d, accepted only %d (+%d sent in the window before) of the limit %d", w, offered[w], accepted[w]+between[w], spill, limit)
		}
	}
	t.Logf("accepted %d over %d windows of %d: %.1f%% of the fleet's limit", total, windows, limit, float64(total)*100/(windows*limit))
}
