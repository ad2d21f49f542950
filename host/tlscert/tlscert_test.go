package tlscert_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"log/slog"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/plantgate/plantgate/host/tlscert"
	"github.com/plantgate/plantgate/host/tlscert/tlstest"
)

// served handshakes with a listener on r's Config and returns the serial of
// the certificate it was shown.
func served(t *testing.T, r *tlscert.Reloader, ca *tlstest.CA) *big.Int {
	t.Helper()
	ln, err := tls.Listen("tcp", "127.0.0.1:0", r.Config())
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		c, err := ln.Accept()
		if err == nil {
			_ = c.(*tls.Conn).Handshake()
			c.Close()
		}
	}()
	c, err := tls.Dial("tcp", ln.Addr().String(), &tls.Config{RootCAs: ca.Pool(), ServerName: "localhost"})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	return c.ConnectionState().PeerCertificates[0].SerialNumber
}

type logs struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logs) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logs) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func newReloader(t *testing.T, o tlscert.Options) (*tlscert.Reloader, *logs) {
	t.Helper()
	l := &logs{}
	o.Logger = slog.New(slog.NewTextHandler(l, nil))
	r, err := tlscert.New(o)
	if err != nil {
		t.Fatal(err)
	}
	return r, l
}

// waitServed polls until the listener shows want's certificate; the
// deadline is generous, the poll is what is measured.
func waitServed(t *testing.T, r *tlscert.Reloader, ca *tlstest.CA, want tlstest.Pair) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for served(t, r, ca).Cmp(want.Leaf.SerialNumber) != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("new certificate not served within 20 s; status %+v", r.Status())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestHalfWrittenPairKeepsServing: a certificate whose key has not been
// written yet, a key that is not the certificate's, and garbage are each
// refused (once, logged once) and the good pair goes on being served; the
// complete new pair then replaces it.
func TestHalfWrittenPairKeepsServing(t *testing.T) {
	t.Parallel()
	ca := tlstest.NewCA(t, "test CA")
	first, second := ca.Server(t, "first"), ca.Server(t, "second")
	certFile, keyFile := first.Write(t, t.TempDir())
	r, log := newReloader(t, tlscert.Options{CertFile: certFile, KeyFile: keyFile})

	tlstest.WriteFile(t, certFile, second.Cert) // the key is still first's
	err := r.Reload()
	if err == nil || !strings.Contains(err.Error(), "private key does not match public key") {
		t.Fatalf("Reload of a mismatched pair: %v", err)
	}
	if got := served(t, r, ca); got.Cmp(first.Leaf.SerialNumber) != 0 {
		t.Fatalf("served serial %x after a refused pair, want the first's %x", got, first.Leaf.SerialNumber)
	}
	_ = r.Reload() // the same files again: no second refusal, no second line
	st := r.Status()
	if st.Applied != 1 || st.Refused != 1 || !strings.Contains(st.Stale, "private key does not match public key") || st.Subject != "CN=first" {
		t.Fatalf("status %+v", st)
	}
	if n := strings.Count(log.String(), "TLS certificate files not loaded"); n != 1 {
		t.Fatalf("%d refusal lines, want 1:\n%s", n, log)
	}

	// Back to the served pair, then the same refused pair again: stale
	// clears, and is set (and logged) again.
	tlstest.WriteFile(t, certFile, first.Cert)
	if err := r.Reload(); err != nil || r.Status().Stale != "" {
		t.Fatalf("back to the served pair: %v, status %+v", err, r.Status())
	}
	tlstest.WriteFile(t, certFile, second.Cert)
	if err := r.Reload(); err == nil || !strings.Contains(r.Status().Stale, "private key does not match public key") {
		t.Fatalf("the refused pair again: %v, status %+v", err, r.Status())
	}

	tlstest.WriteFile(t, certFile, []byte("-----BEGIN CERTIFICATE-----\nnot base64\n"))
	if err := r.Reload(); err == nil || !strings.Contains(err.Error(), "failed to find any PEM data in certificate input") {
		t.Fatalf("Reload of garbage: %v", err)
	}
	if err := os.Remove(keyFile); err != nil {
		t.Fatal(err)
	}
	if err := r.Reload(); err == nil || !strings.Contains(err.Error(), "tls key: open") {
		t.Fatalf("Reload without a key file: %v", err)
	}
	if got := served(t, r, ca); got.Cmp(first.Leaf.SerialNumber) != 0 {
		t.Fatalf("served serial %x, want the first's %x", got, first.Leaf.SerialNumber)
	}

	second.Write(t, filepath.Dir(certFile))
	if err := r.Reload(); err != nil {
		t.Fatal(err)
	}
	if got := served(t, r, ca); got.Cmp(second.Leaf.SerialNumber) != 0 {
		t.Fatalf("served serial %x, want the second's %x", got, second.Leaf.SerialNumber)
	}
	if st := r.Status(); st.Applied != 2 || st.Refused != 4 || st.Stale != "" || st.Subject != "CN=second" {
		t.Fatalf("status %+v", st)
	}
}

// TestNewRefusesBadFiles: serve refuses to start on files that do not
// load, with a message naming them.
func TestNewRefusesBadFiles(t *testing.T) {
	t.Parallel()
	ca := tlstest.NewCA(t, "test CA")
	a, b := ca.Server(t, "a"), ca.Server(t, "b")
	dir := t.TempDir()
	certFile, _ := a.Write(t, dir)
	keyFile := filepath.Join(dir, "b.key")
	tlstest.WriteFile(t, keyFile, b.Key)
	caFile := filepath.Join(dir, "ca.pem")
	tlstest.WriteFile(t, caFile, []byte("no PEM here"))
	for _, tc := range []struct {
		name string
		o    tlscert.Options
		want string
	}{
		{"mismatch", tlscert.Options{CertFile: certFile, KeyFile: keyFile}, "tls certificate " + certFile + " and key " + keyFile + ": tls: private key does not match public key"},
		{"no key", tlscert.Options{CertFile: certFile}, "tls: a certificate file and a key file are both required"},
		{"missing", tlscert.Options{CertFile: certFile, KeyFile: filepath.Join(dir, "nope")}, "tls key: open " + filepath.Join(dir, "nope") + ": no such file or directory"},
		{"bad CA", tlscert.Options{CertFile: certFile, KeyFile: filepath.Join(dir, "key.pem"), ClientCAFile: caFile}, "tls client CA " + caFile + ": no PEM certificate in it"},
	} {
		_, err := tlscert.New(tc.o)
		if err == nil || err.Error() != tc.want {
			t.Errorf("%s: err %v, want %q", tc.name, err, tc.want)
		}
	}
}

// TestWatchSymlinkSwaps renews the way cert-manager (an atomic swap of the
// ..data symlink of a secret volume) and certbot (new archive files, then
// live/ symlinks replaced one at a time, the key first) do, with the poll
// set to an hour: the directory events alone bring the new pair in.
func TestWatchSymlinkSwaps(t *testing.T) {
	t.Parallel()
	ca := tlstest.NewCA(t, "test CA")
	link := func(target, name string) {
		t.Helper()
		tmp := name + ".tmp"
		if err := os.Symlink(target, tmp); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, name); err != nil {
			t.Fatal(err)
		}
	}
	t.Run("cert-manager", func(t *testing.T) {
		t.Parallel()
		mount := t.TempDir()
		version := func(n string, p tlstest.Pair) {
			t.Helper()
			d := filepath.Join(mount, "..2026_11_27_"+n)
			if err := os.Mkdir(d, 0o755); err != nil {
				t.Fatal(err)
			}
			tlstest.WriteFile(t, filepath.Join(d, "tls.crt"), p.Cert)
			tlstest.WriteFile(t, filepath.Join(d, "tls.key"), p.Key)
			link(filepath.Base(d), filepath.Join(mount, "..data"))
		}
		first, second := ca.Server(t, "first"), ca.Server(t, "second")
		version("1", first)
		link("..data/tls.crt", filepath.Join(mount, "tls.crt"))
		link("..data/tls.key", filepath.Join(mount, "tls.key"))
		r, _ := newReloader(t, tlscert.Options{CertFile: filepath.Join(mount, "tls.crt"), KeyFile: filepath.Join(mount, "tls.key"), Poll: time.Hour})
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		go r.Watch(ctx)
		time.Sleep(100 * time.Millisecond) // the watch is in place (no event is lost to the test's race)
		version("2", second)
		waitServed(t, r, ca, second)
	})
	t.Run("certbot", func(t *testing.T) {
		t.Parallel()
		root := t.TempDir()
		archive, live := filepath.Join(root, "archive"), filepath.Join(root, "live")
		for _, d := range []string{archive, live} {
			if err := os.Mkdir(d, 0o755); err != nil {
				t.Fatal(err)
			}
		}
		write := func(n string, p tlstest.Pair) {
			tlstest.WriteFile(t, filepath.Join(archive, "fullchain"+n+".pem"), p.Cert)
			tlstest.WriteFile(t, filepath.Join(archive, "privkey"+n+".pem"), p.Key)
		}
		relink := func(n string) {
			for _, f := range []string{"privkey", "fullchain"} {
				name := filepath.Join(live, f+".pem")
				_ = os.Remove(name) // certbot unlinks, then links: a moment without the file
				if err := os.Symlink("../archive/"+f+n+".pem", name); err != nil {
					t.Fatal(err)
				}
			}
		}
		first, second := ca.Server(t, "first"), ca.Server(t, "second")
		write("1", first)
		relink("1")
		r, _ := newReloader(t, tlscert.Options{CertFile: filepath.Join(live, "fullchain.pem"), KeyFile: filepath.Join(live, "privkey.pem"), Poll: time.Hour})
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		go r.Watch(ctx)
		time.Sleep(100 * time.Millisecond)
		write("2", second)
		relink("2")
		waitServed(t, r, ca, second)
		if st := r.Status(); st.Stale != "" {
			t.Fatalf("status %+v", st)
		}
	})
}

// TestPollNoticesInPlaceWrite: a file rewritten in place (no event the
// watcher looks for is needed) is noticed by the poll.
func TestPollNoticesInPlaceWrite(t *testing.T) {
	t.Parallel()
	ca := tlstest.NewCA(t, "test CA")
	first, second := ca.Server(t, "first"), ca.Server(t, "second")
	certFile, keyFile := first.Write(t, t.TempDir())
	r, _ := newReloader(t, tlscert.Options{CertFile: certFile, KeyFile: keyFile, Poll: 50 * time.Millisecond})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go r.Watch(ctx)
	if err := os.WriteFile(keyFile, second.Key, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(certFile, second.Cert, 0o600); err != nil {
		t.Fatal(err)
	}
	waitServed(t, r, ca, second)
}

// TestMinimumVersion: TLS 1.1 is refused, 1.2 and 1.3 are served.
func TestMinimumVersion(t *testing.T) {
	t.Parallel()
	ca := tlstest.NewCA(t, "test CA")
	certFile, keyFile := ca.Server(t, "s").Write(t, t.TempDir())
	r, _ := newReloader(t, tlscert.Options{CertFile: certFile, KeyFile: keyFile})
	ln, err := tls.Listen("tcp", "127.0.0.1:0", r.Config())
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			_ = c.(*tls.Conn).Handshake()
			c.Close()
		}
	}()
	for _, v := range []uint16{tls.VersionTLS10, tls.VersionTLS11, tls.VersionTLS12, tls.VersionTLS13} {
		c, err := tls.Dial("tcp", ln.Addr().String(), &tls.Config{RootCAs: ca.Pool(), ServerName: "localhost", MinVersion: v, MaxVersion: v})
		ok := v >= tls.VersionTLS12
		if ok != (err == nil) || !ok && !strings.Contains(err.Error(), "remote error: tls: protocol version not supported") {
			t.Errorf("%s: err %v", tls.VersionName(v), err)
		}
		if err == nil {
			if got := c.ConnectionState().NegotiatedProtocol; got != "" && got != "http/1.1" {
				t.Errorf("%s: ALPN %q", tls.VersionName(v), got)
			}
			c.Close()
		}
	}
}
