package http_test

import (
	"bufio"
	"io"
	"net"
	nethttp "net/http"
	"strconv"
	"strings"
	"testing"
	"time"
)

// serve serves g on a real loopback listener until the test ends and
// returns its address, for requests only a raw socket can send.
func (g *gateway) serve(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go g.srv.Serve(ln)
	t.Cleanup(func() { g.srv.App().Shutdown() })
	return ln.Addr().String()
}

func itoa(n int) string { return strconv.Itoa(n) }

func chunk(s string) string { return strconv.FormatInt(int64(len(s)), 16) + "\r\n" + s + "\r\n" }

// rawRequest writes raw bytes to the server and reads one response, so tests
// can send what net/http's client never would.
func rawRequest(t *testing.T, addr, raw string) (int, string) {
	t.Helper()
	r := rawExchange(t, addr, raw)
	return r.status, r.body
}

// rawResponse is the answer to a raw request, and what became of the
// connection after it.
type rawResponse struct {
	status int
	header nethttp.Header
	body   string
	// after is "closed" when the server closed the connection after the
	// answer: a follow-up GET /healthz, and anything pipelined behind the
	// request, was not answered. Otherwise it is the status and body of
	// the next response on the connection.
	after string
}

// healthy is after for a connection still serving.
const healthy = `200 {"status":"ok"}`

// rawExchange writes raw on a new connection, reads one response, then sends
// GET /healthz on the same connection and reads what comes next. No sleep:
// a closed connection reads EOF (or a reset) at once.
func rawExchange(t *testing.T, addr, raw string) rawResponse {
	t.Helper()
	conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(conn, raw); err != nil && !strings.Contains(err.Error(), "reset") {
		t.Fatal(err)
	}
	br := bufio.NewReader(conn)
	resp, err := nethttp.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("read response: %v", err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	r := rawResponse{status: resp.StatusCode, header: resp.Header, body: string(b), after: "closed"}
	if _, err := io.WriteString(conn, "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
		return r
	}
	next, err := nethttp.ReadResponse(br, nil)
	if err != nil {
		if err != io.EOF && err != io.ErrUnexpectedEOF && !strings.Contains(err.Error(), "reset") {
			t.Fatalf("read after the response: %v", err)
		}
		return r
	}
	b, _ = io.ReadAll(next.Body)
	next.Body.Close()
	r.after = itoa(next.StatusCode) + " " + string(b)
	return r
}
