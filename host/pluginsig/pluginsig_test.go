package pluginsig_test

import (
	"crypto/ed25519"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/plantgate/plantgate/host/pluginsig"
)

func TestKeygenSignVerifyRoundTrip(t *testing.T) {
	prefix := filepath.Join(t.TempDir(), "ops")
	pubFile, keyFile, err := pluginsig.GenerateKey(prefix)
	if err != nil {
		t.Fatal(err)
	}
	if st, err := os.Stat(keyFile); err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("private key mode: %v %v", st, err)
	}
	if _, _, err := pluginsig.GenerateKey(prefix); err == nil {
		t.Fatal("a second keygen over an existing private key succeeded")
	}
	priv, err := pluginsig.ReadPrivateKey(keyFile)
	if err != nil {
		t.Fatal(err)
	}
	ring, err := pluginsig.ReadKeyring([]string{pubFile})
	if err != nil {
		t.Fatal(err)
	}
	mod, side := []byte("\x00asm module"), []byte(`{"config":{"a":1}}`)
	sig := pluginsig.Sign(priv, "10-auth", mod, side)
	if err := ring.Verify("10-auth", mod, side, sig); err != nil {
		t.Fatalf("valid signature refused: %v", err)
	}
	for name, tc := range map[string]struct {
		name      string
		mod, side []byte
		want      error
	}{
		"module changed":  {"10-auth", []byte("\x00asm other"), side, pluginsig.ErrBadSignature},
		"sidecar changed": {"10-auth", mod, []byte(`{"config":{"a":2}}`), pluginsig.ErrBadSignature},
		"sidecar dropped": {"10-auth", mod, nil, pluginsig.ErrBadSignature},
		"renamed":         {"05-auth", mod, side, pluginsig.ErrBadSignature},
	} {
		if err := ring.Verify(tc.name, tc.mod, tc.side, sig); !errors.Is(err, tc.want) {
			t.Errorf("%s: got %v, want %v", name, err, tc.want)
		}
	}
	if err := ring.Verify("10-auth", mod, side, nil); !errors.Is(err, pluginsig.ErrUnsigned) {
		t.Errorf("unsigned: got %v", err)
	}
	_, other, _ := pluginsig.GenerateKey(filepath.Join(t.TempDir(), "other"))
	otherPriv, _ := pluginsig.ReadPrivateKey(other)
	if err := ring.Verify("10-auth", mod, side, pluginsig.Sign(otherPriv, "10-auth", mod, side)); !errors.Is(err, pluginsig.ErrUnsigned) {
		t.Errorf("untrusted key: got %v", err)
	}
}

func TestChainSignature(t *testing.T) {
	_, keyFile, err := pluginsig.GenerateKey(filepath.Join(t.TempDir(), "ops"))
	if err != nil {
		t.Fatal(err)
	}
	priv, _ := pluginsig.ReadPrivateKey(keyFile)
	ring := pluginsig.NewKeyring(priv.Public().(ed25519.PublicKey))
	chain := []pluginsig.ChainEntry{{File: "10-a.wasm", Module: "aa"}, {File: "20-b.wasm", Module: "bb", Sidecar: []byte(`{}`)}}
	d := pluginsig.ChainDigest(chain)
	sig := pluginsig.SignChain(priv, 7, d)
	if err := ring.VerifyChain(7, d, sig); err != nil {
		t.Fatalf("valid chain signature refused: %v", err)
	}
	for name, tc := range map[string]struct {
		version uint64
		chain   []pluginsig.ChainEntry
	}{
		"other version":   {8, chain},
		"plugin dropped":  {7, chain[:1]},
		"reordered":       {7, []pluginsig.ChainEntry{chain[1], chain[0]}},
		"sidecar removed": {7, []pluginsig.ChainEntry{chain[0], {File: "20-b.wasm", Module: "bb"}}},
	} {
		if err := ring.VerifyChain(tc.version, pluginsig.ChainDigest(tc.chain), sig); err == nil || !strings.Contains(err.Error(), "chain signature does not match") {
			t.Errorf("%s: got %v", name, err)
		}
	}
}
