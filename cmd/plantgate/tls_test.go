package main

import (
	"crypto/tls"
	"crypto/x509"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/plantgate/plantgate/host/tlscert/tlstest"
)

// httpsGateway starts `plantgate serve` on TLS with args and env added,
// and waits until /readyz answers over HTTPS to a client trusting ca.
func httpsGateway(t *testing.T, client *http.Client, env []string, args ...string) (g *gateway, base string) {
	t.Helper()
	g = launchGateway(t, env, args...)
	base = strings.Replace(g.base, "http://", "https://", 1)
	deadline := time.Now().Add(time.Minute)
	for {
		select {
		case err := <-g.done:
			t.Fatalf("exited before ready: %v\n%s", err, g.stderr)
		default:
		}
		if resp, err := client.Get(base + "/readyz"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return g, base
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("not ready over HTTPS within a minute\n%s", g.stderr)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func httpsClient(roots *x509.CertPool, certs ...tls.Certificate) *http.Client {
	return &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		TLSClientConfig:   &tls.Config{RootCAs: roots, Certificates: certs},
		DisableKeepAlives: true, // every request a new handshake: a renewed certificate shows at once
	}}
}

// servedSerial handshakes with addr and returns the serial of the
// certificate it shows.
func servedSerial(t *testing.T, addr string, roots *x509.CertPool) *big.Int {
	t.Helper()
	c, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", addr, &tls.Config{RootCAs: roots, ServerName: "localhost"})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	return c.ConnectionState().PeerCertificates[0].SerialNumber
}

// waitSerial polls until addr serves want; the deadline is generous, no
// time is asserted.
func waitSerial(t *testing.T, g *gateway, addr string, roots *x509.CertPool, want *big.Int) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for servedSerial(t, addr, roots).Cmp(want) != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("serial %x not served within 30 s\n%s", want, g.stderr)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func httpsDo(t *testing.T, c *http.Client, method, url, token, body string, header ...string) (int, string, http.Header) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), resp.Header
}

// TestServeTLS runs `plantgate serve --tls-cert --tls-key` and renews its
// certificate in place the way certbot does (new files renamed over the
// old): the new one is served without a restart; a half-written pair (the
// new certificate before its key) is refused, logged, counted in
// /metrics, and the current certificate goes on being served until the
// key arrives. TLS 1.1 is refused. CORS origins come from the environment.
func TestServeTLS(t *testing.T) {
	t.Parallel()
	ca := tlstest.NewCA(t, "test CA")
	first, second, third := ca.Server(t, "gateway-1"), ca.Server(t, "gateway-2"), ca.Server(t, "gateway-3")
	dir := t.TempDir()
	certFile, keyFile := first.Write(t, dir)
	adminPort := freePort(t)
	client := httpsClient(ca.Pool())
	g, base := httpsGateway(t, client,
		[]string{"PLANTGATE_BOOTSTRAP_TOKEN=" + testToken, "PLANTGATE_TLS_CERT=" + certFile, "PLANTGATE_TLS_KEY=" + keyFile,
			"PLANTGATE_CORS_ORIGINS=https://app.example.com, http://localhost:5173"},
		"--plugins", pluginsDir(t, "10-bearer-auth.wasm", "20-plant-rules.wasm"), "--admin-listen", "127.0.0.1:"+adminPort)
	addr := strings.TrimPrefix(base, "https://")

	if status, body, _ := httpsDo(t, client, "POST", base+"/plants", testToken, `{"id":1,"name":"Monstera"}`); status != 200 || body != `{"name":"Monstera"}` {
		t.Fatalf("POST over HTTPS: %d %s", status, body)
	}
	if got := servedSerial(t, addr, ca.Pool()); got.Cmp(first.Leaf.SerialNumber) != 0 {
		t.Fatalf("serving serial %x, want the first's", got)
	}
	for _, origin := range []string{"https://app.example.com", "http://localhost:5173"} {
		status, _, h := httpsDo(t, client, "OPTIONS", base+"/plants", "", "", "Origin", origin, "Access-Control-Request-Method", "POST")
		if status != 204 || h.Get("Access-Control-Allow-Origin") != origin {
			t.Fatalf("preflight from %s: %d %v", origin, status, h)
		}
	}

	second.Write(t, dir)
	waitSerial(t, g, addr, ca.Pool(), second.Leaf.SerialNumber)
	if status, body, _ := httpsDo(t, client, "GET", base+"/plants/1", testToken, ""); status != 200 || body != `{"id":1,"name":"Monstera"}` {
		t.Fatalf("GET after the renewal: %d %s", status, body)
	}

	tlstest.WriteFile(t, certFile, third.Cert) // its key is not written yet
	waitFor(t, g, "TLS certificate files not loaded; still serving the previous certificate")
	if got := servedSerial(t, addr, ca.Pool()); got.Cmp(second.Leaf.SerialNumber) != 0 {
		t.Fatalf("a half-written pair is served: serial %x, want the second's", got)
	}
	if !strings.Contains(g.stderr.String(), "private key does not match public key") {
		t.Fatalf("the log does not say why:\n%s", g.stderr)
	}
	metrics := func() string {
		_, body, _ := httpsDo(t, &http.Client{Timeout: 10 * time.Second}, "GET", "http://127.0.0.1:"+adminPort+"/metrics", "", "")
		return body
	}
	for _, want := range []string{"plantgate_tls_certificate_stale 1", `plantgate_tls_certificate_reloads_total{outcome="applied"} 2`, `plantgate_tls_certificate_reloads_total{outcome="refused"} 1`,
		"plantgate_tls_certificate_expiry_timestamp_seconds " + itoaTime(second.Leaf.NotAfter)} {
		if m := metrics(); !strings.Contains(m, want+"\n") {
			t.Fatalf("/metrics lacks %q", want)
		}
	}
	tlstest.WriteFile(t, keyFile, third.Key)
	waitSerial(t, g, addr, ca.Pool(), third.Leaf.SerialNumber)

	_, err := tls.Dial("tcp", addr, &tls.Config{RootCAs: ca.Pool(), ServerName: "localhost", MinVersion: tls.VersionTLS11, MaxVersion: tls.VersionTLS11})
	if err == nil || !strings.Contains(err.Error(), "protocol version not supported") {
		t.Fatalf("TLS 1.1 handshake: %v", err)
	}
	if m := metrics(); !strings.Contains(m, "plantgate_tls_certificate_stale 0\n") || !strings.Contains(m, "plantgate_tls_handshake_failures_total 1\n") {
		t.Fatalf("/metrics after the key arrived and one TLS 1.1 client:\n%s", m)
	}
	g.stop(t)
}

// itoaTime is t as the Prometheus text format writes a Unix time.
func itoaTime(t time.Time) string { return strconv.FormatFloat(float64(t.Unix()), 'e', -1, 64) }

// TestServeMutualTLS runs serve with --tls-client-ca: a client with a
// certificate the CA signed is served (the access log names it); one with
// none, or a self-signed one, fails its handshake and gets no answer.
func TestServeMutualTLS(t *testing.T) {
	t.Parallel()
	ca, clients := tlstest.NewCA(t, "server CA"), tlstest.NewCA(t, "client CA")
	dir := t.TempDir()
	certFile, keyFile := ca.Server(t, "gateway").Write(t, dir)
	caFile := filepath.Join(dir, "clients.pem")
	if err := os.WriteFile(caFile, clients.PEM, 0o600); err != nil {
		t.Fatal(err)
	}
	good := httpsClient(ca.Pool(), clients.Client(t, "inventory-sync").TLS(t))
	g, base := httpsGateway(t, good, []string{"PLANTGATE_BOOTSTRAP_TOKEN=" + testToken},
		"--plugins", pluginsDir(t, "10-bearer-auth.wasm"), "--tls-cert", certFile, "--tls-key", keyFile, "--tls-client-ca", caFile)

	if status, body, _ := httpsDo(t, good, "POST", base+"/plants", testToken, `{"id":2,"name":"Fern"}`); status != 200 || body != `{"name":"Fern"}` {
		t.Fatalf("good client certificate: %d %s", status, body)
	}
	waitFor(t, g, `principal=bootstrap tls_client="CN=inventory-sync,O=plantgate tests"`)
	for name, c := range map[string]*http.Client{
		"no certificate": httpsClient(ca.Pool()),
		"self-signed":    httpsClient(ca.Pool(), tlstest.NewCA(t, "inventory-sync").SelfSigned(t).TLS(t)),
	} {
		req, _ := http.NewRequest("GET", base+"/healthz", nil)
		resp, err := c.Do(req)
		if err == nil {
			resp.Body.Close()
			t.Errorf("%s: answered %d", name, resp.StatusCode)
			continue
		}
		if !strings.Contains(err.Error(), "certificate required") && !strings.Contains(err.Error(), "unknown certificate authority") && !strings.Contains(err.Error(), "bad certificate") {
			t.Errorf("%s: %v", name, err)
		}
	}
	g.stop(t)
}

// TestServeTransportFlagsChecked: the TLS flags come in pairs and origins
// are checked before anything starts.
func TestServeTransportFlagsChecked(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--tls-cert", "cert.pem"}, "--tls-cert needs --tls-key (PLANTGATE_TLS_KEY): the certificate's private key"},
		{[]string{"--tls-key", "key.pem"}, "--tls-key needs --tls-cert (PLANTGATE_TLS_CERT): the certificate chain"},
		{[]string{"--tls-client-ca", "ca.pem"}, "--tls-client-ca needs --tls-cert and --tls-key: client certificates are asked for in the TLS handshake"},
		{[]string{"--tls-cert", "/nonexistent/cert.pem", "--tls-key", "/nonexistent/key.pem", "--insecure-no-auth"}, "tls certificate: open /nonexistent/cert.pem: no such file or directory"},
		{[]string{"--cors-origin", "*"}, `--cors-origin: origin "*": a wildcard is not accepted`},
		{[]string{"--cors-origin", "https://app.example.com/"}, `--cors-origin: origin "https://app.example.com/": an origin has no path`},
	} {
		_, stderr, code := plantgateCLI(t, append([]string{"serve", "--listen", "127.0.0.1:0"}, tc.args...)...)
		if code == 0 || !strings.Contains(stderr, tc.want) {
			t.Errorf("%v: exit %d, stderr %q, want %q", tc.args, code, stderr, tc.want)
		}
	}
}
