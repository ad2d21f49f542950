// Package pluginsig signs and verifies policy plugins with Ed25519, so a
// fleet that trusts a key runs only the modules and configs its holder
// approved: whoever can write to Redis or to a plugins directory, but does
// not hold the private key, cannot change the policy of a plugin.
//
// # The signed message
//
// A signature covers one plugin: its chain name (the file name without
// .wasm, "10-bearer-auth", so its place in the chain is signed too), the
// SHA-256 of its module and the SHA-256 of its sidecar bytes (the whole
// NN-name.json file as pushed, config and limits; no sidecar hashes as the
// empty string). The message is these ASCII lines, each ending in "\n":
//
//	plantgate-plugin-signature-v1
//	<name>
//	<hex sha256 of the module>
//	<hex sha256 of the sidecar>
//
// # The chain signature
//
// In the store, the chain as a whole is signed too, by whoever publishes a
// version (plugin push, remove, promote and rollback, each after verifying
// what it keeps): the signature covers the version and the ChainDigest of
// the plugins in order, whatever the version (0 too), so someone who can
// write to Redis cannot drop a plugin, reorder the chain or put an older
// version back:
//
//	plantgate-chain-signature-v1
//	<version, decimal>
//	<chain digest>
//
// # Signature files
//
// A plugin's signatures are text, one per line (several keys may sign, for
// rotation): "ed25519 <base64 public key> <base64 signature>". Blank lines
// and lines starting with # are ignored. In a plugins directory they live
// in NN-name.sig beside NN-name.wasm; in the store, beside the module.
//
// Keys are PEM files: PKCS #8 "PRIVATE KEY" and PKIX "PUBLIC KEY", as
// `openssl genpkey -algorithm ed25519` writes them too.
package pluginsig

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"strings"
)

// Message returns the bytes a signature covers for the plugin name
// ("10-auth") with module and sidecar (nil: none).
func Message(name string, module, sidecar []byte) []byte {
	m := sha256.Sum256(module)
	s := sha256.Sum256(sidecar)
	return []byte("plantgate-plugin-signature-v1\n" + name + "\n" + hex.EncodeToString(m[:]) + "\n" + hex.EncodeToString(s[:]) + "\n")
}

// Sign returns one signature line for the plugin, ending in "\n".
func Sign(key ed25519.PrivateKey, name string, module, sidecar []byte) []byte {
	return signLine(key, Message(name, module, sidecar))
}

// ChainEntry is one plugin of a chain as ChainDigest reads it.
type ChainEntry struct {
	File    string // "10-auth.wasm"
	Module  string // hex SHA-256 of the module
	Sidecar []byte // nil: none
}

// ChainDigest is the hex SHA-256 naming a chain's content: one line per
// plugin, in order, "<file name> <hex sha256 of module> <hex sha256 of
// sidecar>\n" (an absent sidecar hashes as empty). Signatures are not part
// of it: the same plugins signed by another key are the same chain.
func ChainDigest(entries []ChainEntry) string {
	h := sha256.New()
	for _, e := range entries {
		s := sha256.Sum256(e.Sidecar)
		fmt.Fprintf(h, "%s %s %x\n", e.File, e.Module, s)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// ChainMessage returns the bytes a chain signature covers: the store's
// chain at version, with ChainDigest digest. Lines, each ending in "\n":
//
//	plantgate-chain-signature-v1
//	<version, decimal>
//	<chain digest>
func ChainMessage(version uint64, digest string) []byte {
	return []byte(fmt.Sprintf("plantgate-chain-signature-v1\n%d\n%s\n", version, digest))
}

// SignChain returns one signature line for the chain.
func SignChain(key ed25519.PrivateKey, version uint64, digest string) []byte {
	return signLine(key, ChainMessage(version, digest))
}

// VerifyChain accepts the chain when one line of sigs is a valid signature
// by a trusted key over ChainMessage(version, digest).
func (k *Keyring) VerifyChain(version uint64, digest string, sigs []byte) error {
	err := k.verify(ChainMessage(version, digest), sigs)
	if errors.Is(err, ErrBadSignature) {
		return errBadChain
	}
	return err
}

var errBadChain = errors.New("chain signature does not match the chain (plugins added, removed, reordered or changed, or another version)")

func signLine(key ed25519.PrivateKey, msg []byte) []byte {
	sig := ed25519.Sign(key, msg)
	pub := key.Public().(ed25519.PublicKey)
	return []byte("ed25519 " + base64.StdEncoding.EncodeToString(pub) + " " + base64.StdEncoding.EncodeToString(sig) + "\n")
}

// Keyring is the set of trusted public keys. The zero Keyring trusts none.
type Keyring struct {
	keys []ed25519.PublicKey
}

// NewKeyring trusts keys.
func NewKeyring(keys ...ed25519.PublicKey) *Keyring { return &Keyring{keys: keys} }

// Len is how many keys are trusted.
func (k *Keyring) Len() int { return len(k.keys) }

// ErrUnsigned and ErrBadSignature are wrapped by Verify's refusals.
var (
	ErrUnsigned     = errors.New("not signed by a trusted key")
	ErrBadSignature = errors.New("signature does not match the module and sidecar (tampered, or signed for another name)")
)

// Verify accepts the plugin when one line of sigs is a valid signature by a
// trusted key over Message(name, module, sidecar).
func (k *Keyring) Verify(name string, module, sidecar, sigs []byte) error {
	return k.verify(Message(name, module, sidecar), sigs)
}

func (k *Keyring) verify(msg, sigs []byte) error {
	if len(bytes.TrimSpace(sigs)) == 0 {
		return fmt.Errorf("%w: no signature", ErrUnsigned)
	}
	trustedKeyFound := false
	for i, line := range strings.Split(string(sigs), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		f := strings.Fields(line)
		if len(f) != 3 || f[0] != "ed25519" {
			return fmt.Errorf("signature line %d: want \"ed25519 <base64 public key> <base64 signature>\"", i+1)
		}
		pub, err1 := base64.StdEncoding.DecodeString(f[1])
		sig, err2 := base64.StdEncoding.DecodeString(f[2])
		if err1 != nil || err2 != nil || len(pub) != ed25519.PublicKeySize {
			return fmt.Errorf("signature line %d: bad base64 or key size", i+1)
		}
		if !k.trusts(pub) {
			continue
		}
		trustedKeyFound = true
		if ed25519.Verify(pub, msg, sig) {
			return nil
		}
	}
	if trustedKeyFound {
		return ErrBadSignature
	}
	return fmt.Errorf("%w: signed only by untrusted keys", ErrUnsigned)
}

func (k *Keyring) trusts(pub []byte) bool {
	for _, t := range k.keys {
		if bytes.Equal(t, pub) {
			return true
		}
	}
	return false
}

// GenerateKey writes a new key pair: prefix+".key" (the private key, mode
// 0600, refused when it exists) and prefix+".pub".
func GenerateKey(prefix string) (pubFile, keyFile string, err error) {
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return "", "", err
	}
	der, err := x509.MarshalPKCS8PrivateKey(priv)
	if err != nil {
		return "", "", err
	}
	pubDER, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		return "", "", err
	}
	keyFile, pubFile = prefix+".key", prefix+".pub"
	f, err := os.OpenFile(keyFile, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return "", "", err
	}
	if err := pem.Encode(f, &pem.Block{Type: "PRIVATE KEY", Bytes: der}); err != nil {
		f.Close()
		return "", "", err
	}
	if err := f.Close(); err != nil {
		return "", "", err
	}
	if err := os.WriteFile(pubFile, pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pubDER}), 0o644); err != nil {
		return "", "", err
	}
	return pubFile, keyFile, nil
}

// ReadPrivateKey reads a PEM PKCS #8 Ed25519 private key.
func ReadPrivateKey(file string) (ed25519.PrivateKey, error) {
	return readKey[ed25519.PrivateKey](file, "PRIVATE KEY", x509.ParsePKCS8PrivateKey)
}

// ReadPublicKey reads a PEM PKIX Ed25519 public key.
func ReadPublicKey(file string) (ed25519.PublicKey, error) {
	return readKey[ed25519.PublicKey](file, "PUBLIC KEY", x509.ParsePKIXPublicKey)
}

func readKey[K any](file, typ string, parse func([]byte) (any, error)) (K, error) {
	var zero K
	data, err := os.ReadFile(file)
	if err != nil {
		return zero, err
	}
	b, _ := pem.Decode(data)
	if b == nil || b.Type != typ {
		return zero, fmt.Errorf("%s: want a PEM %q block", file, typ)
	}
	k, err := parse(b.Bytes)
	if err != nil {
		return zero, fmt.Errorf("%s: %w", file, err)
	}
	key, ok := k.(K)
	if !ok {
		return zero, fmt.Errorf("%s: not an Ed25519 key", file)
	}
	return key, nil
}

// ReadKeyring reads every public key file.
func ReadKeyring(files []string) (*Keyring, error) {
	k := &Keyring{}
	for _, f := range files {
		pub, err := ReadPublicKey(f)
		if err != nil {
			return nil, err
		}
		k.keys = append(k.keys, pub)
	}
	return k, nil
}
