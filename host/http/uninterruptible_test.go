package http_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestUninterruptibleGuestAnswersAtDeadline: a validate plugin run with
// limits.interrupt off whose call does not return (it spins forever) still
// answers the client 500 50001 at the deadline, and the next request is
// served by another instance of its one-instance pool.
func TestUninterruptibleGuestAnswersAtDeadline(t *testing.T) {
	t.Parallel()
	side := filepath.Join(t.TempDir(), "30-hang.json")
	if err := os.WriteFile(side, []byte(`{"limits": {"interrupt": false, "timeout_ms": 100, "instances": 1}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	g := newGateway(t, gatewayOptions{extra: []string{"30-hang.wasm=hang.wasm", "30-hang.json=" + side}})
	answered := make(chan response, 1)
	go func() { answered <- g.post(`{"id":23,"name":"spins"}`) }()
	select {
	case got := <-answered:
		if want := errorBody(50001, "policy plugin failed; request denied"); got.status != 500 || got.body != want {
			t.Fatalf("%d %s, want 500 %s", got.status, got.body, want)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("no answer: the request waits for a call that never returns")
	}
	if got := g.post(`{"id":24,"name":"fine"}`); got.status != 200 || got.body != `{"name":"fine"}` {
		t.Fatalf("the request after: %d %s", got.status, got.body)
	}
	if s := g.stored("23"); s != "" {
		t.Errorf("a plant whose validate call never returned was stored: %s", s)
	}
	// Written off at the deadline, or ended at its next host call if that
	// came first: the log names the deadline either way.
	if logs := g.logText(); !strings.Contains(logs, `plugin=hang phase=validate code=50001 reason="plantgate_validate ran past its deadline`) {
		t.Errorf("no log line names the write-off:\n%s", logs)
	}
}
