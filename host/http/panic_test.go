package http_test

import (
	"bufio"
	"io"
	"log/slog"
	"net"
	nethttp "net/http"
	"strings"
	"testing"
	"time"

	gatehttp "github.com/plantgate/plantgate/host/http"
)

// newDoubleServer serves the real Fiber stack over a panicky store and a
// policy that allows all, logging into a retainer.
func newDoubleServer(t *testing.T) (addr string, logs retainer) {
	t.Helper()
	srv, logs := newDoubleApp(t, nil)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.App().Shutdown() })
	return ln.Addr().String(), logs
}

// newDoubleApp is newDoubleServer's server before it serves; observe, when
// not nil, is its Observe hook.
func newDoubleApp(t *testing.T, observe func(string, int, time.Duration)) (*gatehttp.Server, retainer) {
	t.Helper()
	logs := newRetainer()
	srv, err := gatehttp.New(gatehttp.Config{Store: panickyStore{}, Policy: allowAll{}, InsecureNoAuth: true, Logger: slog.New(logs), AccessLog: true, Observe: observe})
	if err != nil {
		t.Fatal(err)
	}
	return srv, logs
}

// keepAlive sends requests one after another on one connection, each
// answered before the next is sent, so fasthttp reuses the same request
// buffers for all of them.
type keepAlive struct {
	t    *testing.T
	conn net.Conn
	br   *bufio.Reader
}

func dialKeepAlive(t *testing.T, addr string) *keepAlive {
	t.Helper()
	conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	conn.SetDeadline(time.Now().Add(10 * time.Second))
	return &keepAlive{t: t, conn: conn, br: bufio.NewReader(conn)}
}

func (k *keepAlive) send(method, path, body string) (int, string) {
	k.t.Helper()
	raw := method + " " + path + " HTTP/1.1\r\nHost: x\r\n"
	if body != "" {
		raw += "Content-Type: application/json\r\nContent-Length: " + itoa(len(body)) + "\r\n"
	}
	if _, err := io.WriteString(k.conn, raw+"\r\n"+body); err != nil {
		k.t.Fatal(err)
	}
	resp, err := nethttp.ReadResponse(k.br, nil)
	if err != nil {
		k.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestHostPanic makes the store panic on the request path, through the
// real Fiber stack: the client gets 500 50003, the panic is logged with
// its stack, and the process and the connection go on serving.
func TestHostPanic(t *testing.T) {
	t.Parallel()
	addr, logs := newDoubleServer(t)
	k := dialKeepAlive(t, addr)
	if status, body := k.send("POST", "/plants", `{"id":1,"name":"panic"}`); status != 500 || body != errorBody(50003, "internal error") {
		t.Fatalf("panic: got %d %s, want 500 %s", status, body, errorBody(50003, "internal error"))
	}
	if status, body := k.send("POST", "/plants", `{"id":2,"name":"calm"}`); status != 200 || body != `{"name":"calm"}` {
		t.Fatalf("after the panic, same connection: got %d %s", status, body)
	}
	if status, body := dialKeepAlive(t, addr).send("POST", "/plants", `{"id":3,"name":"calm"}`); status != 200 || body != `{"name":"calm"}` {
		t.Fatalf("after the panic, new connection: got %d %s", status, body)
	}
	var stack string
	for _, r := range logs.records() {
		if r["msg"] == "panic serving a request" && r["level"] == "ERROR" {
			stack = r["stack"]
			if r["panic"] != "assignment to entry in nil map" || r["path"] != "/plants" {
				t.Errorf("panic line %v", r)
			}
		}
	}
	if !strings.Contains(stack, "panickyStore.CreatePlant") {
		t.Fatalf("no stack through the store in the panic line: %q", stack)
	}
}

// TestLogAttrsOwnTheirBytes keeps every log record and reads it after
// later requests on the same connection have reused fasthttp's buffers:
// each record still names its own request's method and path.
func TestLogAttrsOwnTheirBytes(t *testing.T) {
	t.Parallel()
	addr, logs := newDoubleServer(t)
	k := dialKeepAlive(t, addr)
	sent := []struct {
		method, path, body string
		status             int
	}{
		{"DELETE", "/aaaaaaaaaaaaa", "", 404},
		{"POST", "/plants", `{"id":1,"name":"panic"}`, 500}, // also logs "request failed" and the panic
		{"GET", "/bbbbbbbbbbbbb", "", 404},
		{"PATCH", "/plants", "", 405},
		{"PUT", "/ccccccccccccc", "", 404},
		{"GET", "/dddddddddddd/ddddddd", "", 404},
	}
	for _, s := range sent {
		if status, body := k.send(s.method, s.path, s.body); status != s.status {
			t.Fatalf("%s %s: %d %s", s.method, s.path, status, body)
		}
	}
	var access []map[string]string
	for _, r := range logs.records() {
		switch r["msg"] {
		case "request":
			access = append(access, r)
		case "request failed", "panic serving a request":
			if r["method"] != "POST" || r["path"] != "/plants" {
				t.Errorf("%q line names %s %s, want POST /plants", r["msg"], r["method"], r["path"])
			}
		}
	}
	if len(access) != len(sent) {
		t.Fatalf("%d access lines for %d requests", len(access), len(sent))
	}
	for i, s := range sent {
		if a := access[i]; a["method"] != s.method || a["path"] != s.path {
			t.Errorf("access line %d names %q %q, want %s %s", i, a["method"], a["path"], s.method, s.path)
		}
	}
}
