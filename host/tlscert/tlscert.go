// Package tlscert serves the API listener's TLS configuration from files
// that the operator's tooling renews in place: certbot (new files in
// archive/, symlinks in live/ swapped one by one), cert-manager (a secret
// volume whose ..data symlink is swapped atomically), or a plain rewrite.
//
// A Reloader reads the certificate, its key and (for mTLS) the client CA
// when they change, and swaps the configuration every new handshake gets.
// A pair that does not load (half-written, a key that is not the
// certificate's, unparsable PEM) never replaces the one being served: the
// Reloader keeps serving the last good one, logs why, and reports it in
// Status until the files hold a good set again.
//
//	r, err := tlscert.New(tlscert.Options{CertFile: "tls.crt", KeyFile: "tls.key"})
//	go r.Watch(ctx)
//	ln = tls.NewListener(ln, r.Config())
//
// # Notes
//
//   - Changes are seen two ways: fsnotify events on the files' directories
//     (a change is read within about a quarter second), and a read of the
//     files every Poll (default 2 s), which catches what events miss (network
//     file systems, a directory that cannot be watched). Reading three small
//     files and hashing them every two seconds costs microseconds; comparing
//     contents rather than modification times misses no rewrite.
//   - The client CA is reloaded with the pair, so a CA rotation needs no
//     restart either.
package tlscert

import (
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"
)

// Options configures a Reloader.
type Options struct {
	// CertFile holds the PEM certificate chain, leaf first (certbot's
	// fullchain.pem, cert-manager's tls.crt). Required.
	CertFile string

	// KeyFile holds the certificate's PEM private key. Required.
	KeyFile string

	// ClientCAFile, when set, holds the PEM certificates of the CAs that
	// sign client certificates: every client must then present one that
	// verifies (mTLS).
	//
	// Optional. Default: "" (no client certificate is asked for).
	ClientCAFile string

	// Poll is how often the files are read again whatever the events say.
	//
	// Optional. Default: 2s.
	Poll time.Duration

	// Logger receives a line for every certificate loaded or refused.
	//
	// Optional. Default: slog.Default().
	Logger *slog.Logger
}

// Status is what a Reloader serves and whether the files agree with it.
type Status struct {
	Subject  string    // the served leaf's subject
	NotAfter time.Time // the served leaf's expiry
	Applied  uint64    // sets loaded since start, the first included
	Refused  uint64    // sets read but refused
	// Stale is the reason the files on disk are not what is served (the
	// last set read was refused), or "" when they are.
	Stale string
}

// loaded is one good set of files and the configuration built from it.
type loaded struct {
	digest [sha256.Size]byte // of the files' contents, to tell a change
	config *tls.Config
	leaf   *x509.Certificate
}

// Reloader keeps the served TLS configuration in step with the files.
type Reloader struct {
	opts    Options
	current atomic.Pointer[loaded]
	applied atomic.Uint64
	refused atomic.Uint64

	mu      sync.Mutex        // one reload at a time; guards refusal and stale
	refusal [sha256.Size]byte // digest of the last refused set: refused once, logged once
	stale   string
}

// New reads the files once and returns a Reloader serving them, or why
// they cannot be served.
func New(o Options) (*Reloader, error) {
	if o.CertFile == "" || o.KeyFile == "" {
		return nil, errors.New("tls: a certificate file and a key file are both required")
	}
	if o.Poll <= 0 {
		o.Poll = 2 * time.Second
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	r := &Reloader{opts: o}
	files, err := r.read()
	if err != nil {
		return nil, err
	}
	l, err := r.build(files)
	if err != nil {
		return nil, err
	}
	r.current.Store(l)
	r.applied.Add(1)
	r.logLoaded("TLS certificate loaded", l)
	return r, nil
}

// Config is the listener's configuration: each handshake gets the one
// built from the last good set of files (GetConfigForClient), so a reload
// takes effect on the next connection; connections already open keep
// theirs.
func (r *Reloader) Config() *tls.Config {
	return &tls.Config{
		MinVersion: tls.VersionTLS12,
		// Read by the handshake only when GetConfigForClient gives no config;
		// set so that the listener never lacks a certificate.
		GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) {
			return &r.current.Load().config.Certificates[0], nil
		},
		GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) {
			return r.current.Load().config, nil
		},
		NextProtos: []string{"http/1.1"},
	}
}

// Status reports the served certificate and the reloads so far.
func (r *Reloader) Status() Status {
	l := r.current.Load()
	r.mu.Lock()
	stale := r.stale
	r.mu.Unlock()
	return Status{Subject: l.leaf.Subject.String(), NotAfter: l.leaf.NotAfter, Applied: r.applied.Load(), Refused: r.refused.Load(), Stale: stale}
}

// files is the contents of the configured files.
type files struct{ cert, key, ca []byte }

func (f files) digest() [sha256.Size]byte {
	h := sha256.New()
	for _, b := range [][]byte{f.cert, f.key, f.ca} {
		var n [8]byte
		for i := range n {
			n[i] = byte(len(b) >> (8 * i))
		}
		h.Write(n[:]) // lengths first: no two sets hash alike by shifting bytes between files
		h.Write(b)
	}
	return [sha256.Size]byte(h.Sum(nil))
}

func (r *Reloader) read() (files, error) {
	var f files
	var err error
	if f.cert, err = os.ReadFile(r.opts.CertFile); err != nil {
		return f, fmt.Errorf("tls certificate: %w", err)
	}
	if f.key, err = os.ReadFile(r.opts.KeyFile); err != nil {
		return f, fmt.Errorf("tls key: %w", err)
	}
	if r.opts.ClientCAFile != "" {
		if f.ca, err = os.ReadFile(r.opts.ClientCAFile); err != nil {
			return f, fmt.Errorf("tls client CA: %w", err)
		}
	}
	return f, nil
}

// build checks a set of files and makes the configuration that serves it.
func (r *Reloader) build(f files) (*loaded, error) {
	cert, err := tls.X509KeyPair(f.cert, f.key)
	if err != nil {
		// X509KeyPair's texts name the mismatch or the PEM problem; they
		// never quote key material.
		return nil, fmt.Errorf("tls certificate %s and key %s: %w", r.opts.CertFile, r.opts.KeyFile, err)
	}
	leaf := cert.Leaf
	if leaf == nil { // set by X509KeyPair since Go 1.23; kept for clarity
		if leaf, err = x509.ParseCertificate(cert.Certificate[0]); err != nil {
			return nil, fmt.Errorf("tls certificate %s: %w", r.opts.CertFile, err)
		}
	}
	c := &tls.Config{
		MinVersion:   tls.VersionTLS12,
		Certificates: []tls.Certificate{cert},
		NextProtos:   []string{"http/1.1"},
	}
	if r.opts.ClientCAFile != "" {
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(f.ca) {
			return nil, fmt.Errorf("tls client CA %s: no PEM certificate in it", r.opts.ClientCAFile)
		}
		c.ClientCAs, c.ClientAuth = pool, tls.RequireAndVerifyClientCert
	}
	return &loaded{digest: f.digest(), config: c, leaf: leaf}, nil
}

// Reload reads the files and serves them when they changed and load. It
// returns why a changed set was refused; the old one is then still served.
func (r *Reloader) Reload() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	f, err := r.read()
	if err != nil {
		// A file missing for a moment is what a rename-based writer leaves
		// between its steps; the next event or poll reads it again.
		return r.refuse([sha256.Size]byte{}, err)
	}
	d := f.digest()
	if d == r.current.Load().digest {
		r.refusal, r.stale = [sha256.Size]byte{}, "" // back to what is served
		return nil
	}
	if d == r.refusal {
		return errors.New(r.stale) // refused already, and logged
	}
	l, err := r.build(f)
	if err != nil {
		return r.refuse(d, err)
	}
	r.current.Store(l)
	r.applied.Add(1)
	r.refusal, r.stale = [sha256.Size]byte{}, ""
	r.logLoaded("TLS certificate reloaded", l)
	return nil
}

// refuse records a set of files that does not load.
func (r *Reloader) refuse(d [sha256.Size]byte, err error) error {
	if d != r.refusal || r.stale != err.Error() {
		r.refused.Add(1)
		r.opts.Logger.Warn("TLS certificate files not loaded; still serving the previous certificate", "err", err,
			"serving", r.current.Load().leaf.Subject.String())
	}
	r.refusal, r.stale = d, err.Error()
	return err
}

func (r *Reloader) logLoaded(msg string, l *loaded) {
	args := []any{"subject", l.leaf.Subject.String(), "not_after", l.leaf.NotAfter.UTC().Format(time.RFC3339),
		"serial", l.leaf.SerialNumber.Text(16), "client_ca", r.opts.ClientCAFile != ""}
	if time.Now().After(l.leaf.NotAfter) {
		r.opts.Logger.Warn(msg+": it has expired", args...)
		return
	}
	r.opts.Logger.Info(msg, args...)
}
