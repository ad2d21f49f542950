// Package tlstest makes real X.509 certificates for tests: a CA, server
// certificates for loopback and client certificates it signs, as PEM, the
// way an operator's files hold them.
package tlstest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// CA is a certificate authority made for one test.
type CA struct {
	Cert *x509.Certificate
	PEM  []byte // the CA certificate, PEM
	key  *ecdsa.PrivateKey
}

// Pair is a certificate and its key, PEM encoded.
type Pair struct {
	Cert, Key []byte
	Leaf      *x509.Certificate
}

// NewCA returns a self-signed CA named name.
func NewCA(t testing.TB, name string) *CA {
	t.Helper()
	key := newKey(t)
	tmpl := &x509.Certificate{
		SerialNumber:          randomSerial(t),
		Subject:               pkix.Name{CommonName: name, Organization: []string{"plantgate tests"}},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return &CA{Cert: cert, PEM: pemBlock("CERTIFICATE", der), key: key}
}

// SelfSigned is the CA's own certificate and key: a self-signed
// certificate named as the CA is.
func (ca *CA) SelfSigned(t testing.TB) Pair {
	t.Helper()
	kder, err := x509.MarshalPKCS8PrivateKey(ca.key)
	if err != nil {
		t.Fatal(err)
	}
	return Pair{Cert: ca.PEM, Key: pemBlock("PRIVATE KEY", kder), Leaf: ca.Cert}
}

// Pool is a pool holding the CA alone.
func (ca *CA) Pool() *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(ca.Cert)
	return p
}

// Server returns a server certificate for 127.0.0.1 and localhost named cn.
func (ca *CA) Server(t testing.TB, cn string) Pair {
	t.Helper()
	return ca.sign(t, &x509.Certificate{
		Subject:     pkix.Name{CommonName: cn},
		DNSNames:    []string{"localhost"},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	})
}

// Client returns a client certificate named cn.
func (ca *CA) Client(t testing.TB, cn string) Pair {
	t.Helper()
	return ca.sign(t, &x509.Certificate{
		Subject:     pkix.Name{CommonName: cn, Organization: []string{"plantgate tests"}},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	})
}

func (ca *CA) sign(t testing.TB, tmpl *x509.Certificate) Pair {
	t.Helper()
	key := newKey(t)
	tmpl.SerialNumber = randomSerial(t)
	tmpl.NotBefore = time.Now().Add(-time.Hour)
	tmpl.NotAfter = time.Now().Add(24 * time.Hour)
	tmpl.KeyUsage = x509.KeyUsageDigitalSignature
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return Pair{Cert: pemBlock("CERTIFICATE", der), Key: pemBlock("PRIVATE KEY", kder), Leaf: leaf}
}

// TLS is the pair as a tls.Certificate, for a client.
func (p Pair) TLS(t testing.TB) tls.Certificate {
	t.Helper()
	c, err := tls.X509KeyPair(p.Cert, p.Key)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// Write writes the pair to dir/cert.pem and dir/key.pem (replacing them
// through a rename, as a careful writer does) and returns the paths.
func (p Pair) Write(t testing.TB, dir string) (cert, key string) {
	t.Helper()
	cert, key = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	WriteFile(t, cert, p.Cert)
	WriteFile(t, key, p.Key)
	return cert, key
}

// WriteFile replaces path with b through a temporary file and a rename.
func WriteFile(t testing.TB, path string, b []byte) {
	t.Helper()
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

func newKey(t testing.TB) *ecdsa.PrivateKey {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func pemBlock(typ string, der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der})
}

// randomSerial is a random 128-bit serial number, as RFC 5280 advises.
func randomSerial(t testing.TB) *big.Int {
	t.Helper()
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 128))
	if err != nil {
		t.Fatal(err)
	}
	return n
}
