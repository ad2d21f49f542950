package http_test

import (
	"fmt"
	"runtime"
	"strings"
	"testing"

	"github.com/plantgate/plantgate/host/wasm"
)

// TestPluginFaultsEndToEnd makes a validate plugin fail in each way a guest
// can, through HTTP: the request fails closed with 500 50001 and no guest
// text, the faulted instance is discarded, nothing is stored, and the
// gateway then serves 1,000 requests normally with its pools back at their
// bound.
func TestPluginFaultsEndToEnd(t *testing.T) {
	t.Parallel()
	g := newGateway(t, gatewayOptions{extra: []string{"30-hostile.wasm=" + hostilePlugin, "40-trapid.wasm=trapid.wasm"}})
	const bound = 2 // gatewayOptions' Limits{Instances: 2}
	failed := errorBody(50001, "policy plugin failed; request denied")
	cases := []struct{ name, body string }{
		{"wasm trap (unreachable)", `{"id":13,"name":"trap"}`},
		{"Go panic in the handler", `{"id":21,"name":"panic"}`},
		{"Go panic in a goroutine: the runtime exits", `{"id":22,"name":"crash"}`},
		{"infinite loop: the deadline", `{"id":23,"name":"loop"}`},
		{"memory bomb: the page limit", `{"id":24,"name":"bomb"}`},
	}
	for _, c := range cases {
		before := g.chain.Stats()
		got := g.post(c.body)
		if got.status != 500 || got.body != failed {
			t.Fatalf("%s: %d %s, want 500 %s", c.name, got.status, got.body, failed)
		}
		after := g.chain.Stats()
		if discarded := totalDiscarded(after) - totalDiscarded(before); discarded != 1 {
			t.Errorf("%s: %d instances discarded, want 1", c.name, discarded)
		}
		id := strings.TrimPrefix(strings.SplitN(c.body, ",", 2)[0], `{"id":`)
		if s := g.stored(id); s != "" {
			t.Errorf("%s: a denied plant was stored: %s", c.name, s)
		}
	}
	for i := range 1000 {
		body := fmt.Sprintf(`{"id":%d,"name":"fern %d"}`, 100000+i, i)
		if got := g.post(body); got.status != 200 || got.body != fmt.Sprintf(`{"name":"fern %d"}`, i) {
			logs := strings.Split(g.logText(), "\n")
			t.Fatalf("request %d after the faults: %d %s\n%s", i, got.status, got.body, strings.Join(logs[max(0, len(logs)-5):], "\n"))
		}
	}
	checkPoolsBounded(t, g.chain, bound)
	// The server log names each reason (the client saw none of it). The
	// memory bomb ends at the deadline too: the guest's allocator keeps
	// collecting once memory.grow fails rather than dying at once.
	logs := g.logText()
	for _, reason := range []string{`reason="plantgate_validate trapped"`, `validate handler panicked`, `reason="plantgate_validate ran past its deadline"`} {
		if !strings.Contains(logs, reason) {
			t.Errorf("no log line names %s", reason)
		}
	}
}

// TestPluginFaultsDoNotLeak faults thousands of times (a wasm trap: each
// discards its instance and makes another) and checks that instance counts,
// guest memory and the Go heap come back to where they were. Not parallel:
// the heap is the process's, so it is measured while no other test runs
// (parallel tests wait for the sequential ones).
func TestPluginFaultsDoNotLeak(t *testing.T) {
	g := newGateway(t, gatewayOptions{extra: []string{"40-trapid.wasm=trapid.wasm"}})
	failed := errorBody(50001, "policy plugin failed; request denied")
	fault := func(n int) {
		for range n {
			if got := g.post(`{"id":13,"name":"trap"}`); got.status != 500 || got.body != failed {
				t.Fatalf("fault: %d %s", got.status, got.body)
			}
		}
	}
	fault(200) // warm up: pools, caches, the log buffer's growth
	g.logsMu.Lock()
	g.logs.Reset() // the harness keeps every log line; measure the gateway, not it
	g.logsMu.Unlock()
	heap0 := heapInUse()
	before := g.chain.Stats()
	const n = 3000
	fault(n)
	g.logsMu.Lock()
	g.logs.Reset()
	g.logsMu.Unlock()
	heap1 := heapInUse()
	after := g.chain.Stats()
	if d := totalDiscarded(after) - totalDiscarded(before); d != n {
		t.Errorf("%d instances discarded for %d faults", d, n)
	}
	checkPoolsBounded(t, g.chain, 2)
	// Each leaked instance would hold at least its 64 KiB page and wazero's
	// module state: 3,000 of them are >200 MB. 16 MiB is noise.
	if grow := int64(heap1) - int64(heap0); grow > 16<<20 {
		t.Errorf("Go heap grew %d KiB over %d faults (%d → %d)", grow>>10, n, heap0>>10, heap1>>10)
	}
	t.Logf("heap in use %d KiB → %d KiB over %d faults; stats %+v", heap0>>10, heap1>>10, n, after)
	if got := g.post(`{"id":14,"name":"fine"}`); got.status != 200 {
		t.Fatalf("after the faults: %d %s", got.status, got.body)
	}
}

func totalDiscarded(stats []wasm.Stats) (n uint64) {
	for _, s := range stats {
		n += s.Discarded
	}
	return n
}

func checkPoolsBounded(t *testing.T, chain *wasm.Chain, bound int) {
	t.Helper()
	for i, s := range chain.Stats() {
		if s.Live < 0 || s.Live > bound || s.Created != s.Discarded+uint64(s.Live) {
			t.Errorf("plugin %d: %+v, want at most %d live instances", i, s, bound)
		}
	}
}

func heapInUse() uint64 {
	var m runtime.MemStats
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&m)
	return m.HeapInuse
}
