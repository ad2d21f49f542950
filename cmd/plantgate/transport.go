package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"strings"
	"time"

	"github.com/urfave/cli/v3"

	plantshttp "github.com/plantgate/plantgate/host/http"
	"github.com/plantgate/plantgate/host/tlscert"
)

// Transport is how clients reach the API listener: TLS, mTLS, and which
// browser origins may call it (docs/tls.md).
type Transport struct {
	TLSCert     string   // PEM certificate chain; "" with TLSKey "": plain HTTP
	TLSKey      string   // its PEM private key
	TLSClientCA string   // PEM CAs whose client certificates are required (mTLS); "": none asked
	CORSOrigins []string // origins whose pages may call the API; none: no CORS
}

func transportFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "tls-cert", Usage: "serve HTTPS on --listen with this PEM certificate chain (leaf first; certbot's fullchain.pem, cert-manager's tls.crt), re-read within seconds when renewed in place; needs --tls-key", Sources: env("TLS_CERT")},
		&cli.StringFlag{Name: "tls-key", Usage: "the PEM private key of --tls-cert", Sources: env("TLS_KEY")},
		&cli.StringFlag{Name: "tls-client-ca", Usage: "require every client to present a certificate signed by one of the CAs in this PEM file (mTLS); needs --tls-cert", Sources: env("TLS_CLIENT_CA")},
		&cli.StringSliceFlag{Name: "cors-origin", Usage: "let the pages of this origin (scheme://host[:port]) call the API from a browser (repeatable; the variable takes a comma-separated list); preflights are answered without a credential, requests still need theirs", Sources: env("CORS_ORIGINS")},
	}
}

// transportOptions reads and checks the transport flags.
func transportOptions(cmd *cli.Command) (Transport, error) {
	t := Transport{TLSCert: cmd.String("tls-cert"), TLSKey: cmd.String("tls-key"), TLSClientCA: cmd.String("tls-client-ca")}
	for _, o := range cmd.StringSlice("cors-origin") {
		for o := range strings.SplitSeq(o, ",") { // urfave splits the variable; a flag value may hold a list too
			if o = strings.TrimSpace(o); o == "" {
				continue
			}
			p, err := plantshttp.ParseOrigin(o)
			if err != nil {
				return t, fmt.Errorf("--cors-origin: %w", err)
			}
			t.CORSOrigins = append(t.CORSOrigins, p)
		}
	}
	return t, t.check()
}

func (t Transport) check() error {
	switch {
	case t.TLSCert != "" && t.TLSKey == "":
		return errors.New("--tls-cert needs --tls-key (PLANTGATE_TLS_KEY): the certificate's private key")
	case t.TLSKey != "" && t.TLSCert == "":
		return errors.New("--tls-key needs --tls-cert (PLANTGATE_TLS_CERT): the certificate chain")
	case t.TLSClientCA != "" && t.TLSCert == "":
		return errors.New("--tls-client-ca needs --tls-cert and --tls-key: client certificates are asked for in the TLS handshake")
	}
	return nil
}

// loadCerts reads the TLS files, when configured, and exports their state
// as metrics; it returns the hook that counts failed handshakes (nil
// without TLS).
func (m *Main) loadCerts() (handshakeFailed func(error), err error) {
	if err := m.Transport.check(); err != nil {
		return nil, err
	}
	if m.Transport.TLSCert == "" {
		return nil, nil
	}
	m.certs, err = tlscert.New(tlscert.Options{CertFile: m.Transport.TLSCert, KeyFile: m.Transport.TLSKey,
		ClientCAFile: m.Transport.TLSClientCA, Logger: m.Logger})
	if err != nil {
		return nil, err
	}
	return m.metrics.TLS(func() (time.Time, uint64, uint64, bool) {
		st := m.certs.Status()
		return st.NotAfter, st.Applied, st.Refused, st.Stale != ""
	}), nil
}

// listen opens the API listener: TLS when loadCerts loaded a certificate,
// its files then watched until Close.
func (m *Main) listen() (net.Listener, error) {
	ln, err := net.Listen("tcp", m.Listen)
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", m.Listen, err)
	}
	if m.certs == nil {
		return ln, nil
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); m.certs.Watch(ctx) }()
	m.stopCerts = func() { cancel(); <-done }
	return tls.NewListener(ln, m.certs.Config()), nil
}
