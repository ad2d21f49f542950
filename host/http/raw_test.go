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
	conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(conn, raw); err != nil && !strings.Contains(err.Error(), "reset") {
		t.Fatal(err)
	}
	resp, err := nethttp.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("read response: %v", err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}
