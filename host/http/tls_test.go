package http_test

import (
	"crypto/tls"
	"io"
	"log/slog"
	"net"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/plantgate/plantgate/host"
	"github.com/plantgate/plantgate/host/tlscert"
	"github.com/plantgate/plantgate/host/tlscert/tlstest"
)

// serveTLS serves g on a TLS listener (mTLS when clientCA is set) and
// returns its address.
func (g *gateway) serveTLS(t *testing.T, server tlstest.Pair, clientCA []byte) string {
	t.Helper()
	dir := t.TempDir()
	certFile, keyFile := server.Write(t, dir)
	o := tlscert.Options{CertFile: certFile, KeyFile: keyFile, Logger: slog.New(slog.NewTextHandler(lockedWriter{g.logsMu, g.logs}, nil))}
	if clientCA != nil {
		o.ClientCAFile = filepath.Join(dir, "ca.pem")
		tlstest.WriteFile(t, o.ClientCAFile, clientCA)
	}
	r, err := tlscert.New(o)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go g.srv.Serve(tls.NewListener(ln, r.Config()))
	t.Cleanup(func() { g.srv.App().Shutdown() })
	return ln.Addr().String()
}

// reloaderConfig is the listener configuration of a Reloader on the files.
func reloaderConfig(tb testing.TB, certFile, keyFile string) *tls.Config {
	tb.Helper()
	r, err := tlscert.New(tlscert.Options{CertFile: certFile, KeyFile: keyFile, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		tb.Fatal(err)
	}
	return r.Config()
}

// tlsExchange writes raw over a TLS connection and reads to the end (the
// request asks for Connection: close).
func tlsExchange(t *testing.T, addr string, cfg *tls.Config, raw string) (string, error) {
	t.Helper()
	c, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", addr, cfg)
	if err != nil {
		return "", err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(c, raw); err != nil {
		return "", err
	}
	b, err := io.ReadAll(c)
	return string(b), err
}

// TestTLSListener serves the real stack over TLS: a request, the framing
// checks (a smuggling attempt is refused and closed as on plain HTTP),
// plain HTTP sent to the HTTPS port (told so, in the Error body), and a
// TLS 1.1 client (closed unanswered, counted, no access line).
func TestTLSListener(t *testing.T) {
	t.Parallel()
	var failed atomic.Int32
	g := newGateway(t, gatewayOptions{handshakeFailed: func(error) { failed.Add(1) }})
	ca := tlstest.NewCA(t, "test CA")
	addr := g.serveTLS(t, ca.Server(t, "gateway"), nil)
	client := &tls.Config{RootCAs: ca.Pool(), ServerName: "localhost"}

	got, err := tlsExchange(t, addr, client, "GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
	if err != nil || !strings.HasPrefix(got, "HTTP/1.1 200 OK\r\n") || !strings.HasSuffix(got, "\r\n\r\n"+`{"status":"ok"}`) {
		t.Fatalf("healthz over TLS: %v %q", err, got)
	}
	got, err = tlsExchange(t, addr, client, "POST /plants HTTP/1.1\r\nHost: x\r\nContent-Length: 7\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\nGET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
	want := errorBody(host.ErrFraming, "Content-Length and Transfer-Encoding together")
	if err != nil || !strings.HasPrefix(got, "HTTP/1.1 400 Bad Request\r\n") || !strings.HasSuffix(got, "\r\n\r\n"+want) {
		t.Fatalf("smuggling over TLS: %v %q (want one 400 %s, then the connection closed)", err, got, want)
	}

	plain, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	_ = plain.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(plain, "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(plain)
	plain.Close()
	body := errorBody(host.ErrBadRequest, "this listener speaks HTTPS: use an https:// URL")
	if want := "HTTP/1.1 400 Bad Request\r\nContent-Type: application/json\r\nConnection: close\r\nContent-Length: " + itoa(len(body)) + "\r\n\r\n" + body; string(b) != want {
		t.Fatalf("plain HTTP to the HTTPS port: %q, want %q", b, want)
	}

	old := &tls.Config{RootCAs: ca.Pool(), ServerName: "localhost", MinVersion: tls.VersionTLS11, MaxVersion: tls.VersionTLS11}
	if _, err := tlsExchange(t, addr, old, "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"); err == nil || !strings.Contains(err.Error(), "protocol version not supported") {
		t.Fatalf("TLS 1.1: %v", err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for failed.Load() != 2 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if n := failed.Load(); n != 2 {
		t.Fatalf("%d failed handshakes reported, want 2 (plain HTTP, TLS 1.1)", n)
	}
	if n := strings.Count(g.logText(), `msg=request `); n != 2 {
		t.Fatalf("%d access lines, want 2 (healthz, the smuggling refusal):\n%s", n, g.logText())
	}
}

// TestMutualTLS: with a client CA, a request needs a client certificate
// that CA signed; the access log names its subject. Without one, or with
// a self-signed one, the handshake fails and nothing is answered.
func TestMutualTLS(t *testing.T) {
	t.Parallel()
	var failed atomic.Int32
	g := newGateway(t, gatewayOptions{handshakeFailed: func(error) { failed.Add(1) }})
	ca, clients, stranger := tlstest.NewCA(t, "server CA"), tlstest.NewCA(t, "client CA"), tlstest.NewCA(t, "client CA")
	addr := g.serveTLS(t, ca.Server(t, "gateway"), clients.PEM)
	get := "GET /plants/1 HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + readerToken + "\r\nConnection: close\r\n\r\n"

	good := clients.Client(t, "reporting-job").TLS(t)
	got, err := tlsExchange(t, addr, &tls.Config{RootCAs: ca.Pool(), ServerName: "localhost", Certificates: []tls.Certificate{good}}, get)
	if want := errorBody(host.ErrPlantNotFound, "no plant with id 1"); err != nil || !strings.HasPrefix(got, "HTTP/1.1 404 Not Found\r\n") || !strings.HasSuffix(got, want) {
		t.Fatalf("good client certificate: %v %q", err, got)
	}
	if !strings.Contains(g.logText(), `principal=reader tls_client="CN=reporting-job,O=plantgate tests"`) {
		t.Fatalf("access line without the client's subject:\n%s", g.logText())
	}

	for name, certs := range map[string][]tls.Certificate{
		"none":         nil,
		"another CA's": {stranger.Client(t, "reporting-job").TLS(t)}, // same names, other key
		"self-signed":  {tlstest.NewCA(t, "reporting-job").SelfSigned(t).TLS(t)},
	} {
		got, err := tlsExchange(t, addr, &tls.Config{RootCAs: ca.Pool(), ServerName: "localhost", Certificates: certs}, get)
		// In TLS 1.3 the client learns of the refusal on its first read.
		if err == nil || got != "" || !strings.Contains(err.Error(), "remote error: tls: certificate required") && !strings.Contains(err.Error(), "remote error: tls: unknown certificate authority") && !strings.Contains(err.Error(), "remote error: tls: bad certificate") {
			t.Errorf("%s: %v %q", name, err, got)
		}
	}
	deadline := time.Now().Add(10 * time.Second)
	for failed.Load() != 3 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if n := failed.Load(); n != 3 {
		t.Fatalf("%d failed handshakes reported, want 3", n)
	}
}

// TestTLSHandshakeTimeout: a connection that never sends its ClientHello
// is closed after the read timeout, unanswered, as an idle plain one is;
// the failed handshake is counted.
func TestTLSHandshakeTimeout(t *testing.T) {
	t.Parallel()
	var failed atomic.Int32
	g := newGateway(t, gatewayOptions{readTimeout: 300 * time.Millisecond, handshakeFailed: func(error) { failed.Add(1) }})
	ca := tlstest.NewCA(t, "test CA")
	addr := g.serveTLS(t, ca.Server(t, "gateway"), nil)
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(20 * time.Second)) // generous: the close is what is asserted
	b, err := io.ReadAll(c)
	if err != nil || len(b) != 0 {
		t.Fatalf("silent connection: read %q, %v; want closed without a byte", b, err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for failed.Load() != 1 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if n := failed.Load(); n != 1 {
		t.Fatalf("%d failed handshakes reported, want 1", n)
	}
	if strings.Contains(g.logText(), "msg=request ") {
		t.Fatalf("an access line for a connection that sent nothing:\n%s", g.logText())
	}
}
