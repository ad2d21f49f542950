package http_test

import (
	"io"
	"net"
	"testing"
	"time"
)

// TestSpareConnectionClosedQuietly: a connection on which no byte arrives
// within the read timeout is closed without an answer. HTTP clients open
// spare connections and keep them idle (net/http does when a dial loses
// the race to a freed connection); a 400 40013 written there is an answer
// to nothing, which net/http logged as "Unsolicited response received on
// idle HTTP channel" in plantgate-chaos, and which a client sending its
// first request on it at that moment would take for that request's answer.
func TestSpareConnectionClosedQuietly(t *testing.T) {
	t.Parallel()
	g := newGateway(t, gatewayOptions{readTimeout: 300 * time.Millisecond})
	addr := g.serve(t)
	conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
	got, err := io.ReadAll(conn)
	if err != nil || len(got) != 0 {
		t.Fatalf("idle connection: read %q, %v; want it closed with nothing written", got, err)
	}
	// A request that started and stalled is still answered (TestHostileRaw).
	if r := rawExchange(t, addr, "GET /healthz HTTP/1.1\r\nHost: x\r\n"); r.status != 400 || r.body != errorBody(40013, "request was not received in time") {
		t.Fatalf("stalled request: %d %s", r.status, r.body)
	}
}
