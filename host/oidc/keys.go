package oidc

import (
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rsa"
	"encoding/json"
	"errors"

	"github.com/go-jose/go-jose/v4"
)

// Accepted is every signature algorithm an access token may use (RFC 8725
// §3.1: an allow-list, never "none", never an HMAC, which a public key
// would key).
var Accepted = []jose.SignatureAlgorithm{jose.RS256, jose.PS256, jose.ES256, jose.EdDSA}

// minRSABits refuses RSA keys too short to trust.
const minRSABits = 2048

// parseKeySet reads a JWKS, keeping the public signing keys of a type this
// gateway accepts, by kid. A key it cannot use (an encryption key, an
// unknown type, a short RSA key, a private key) is skipped and counted,
// not an error: one exotic key must not cost the provider every other one.
func parseKeySet(body []byte) (map[string][]jose.JSONWebKey, int, error) {
	var set struct {
		Keys []json.RawMessage `json:"keys"`
	}
	if err := json.Unmarshal(body, &set); err != nil {
		return nil, 0, err
	}
	if set.Keys == nil {
		return nil, 0, errors.New(`no "keys" array`)
	}
	keys := map[string][]jose.JSONWebKey{}
	skipped := 0
	for _, raw := range set.Keys {
		var k jose.JSONWebKey
		if err := k.UnmarshalJSON(raw); err != nil || !usable(k) {
			skipped++
			continue
		}
		keys[k.KeyID] = append(keys[k.KeyID], k)
	}
	return keys, skipped, nil
}

// usable reports whether k is a public signing key of an accepted type.
func usable(k jose.JSONWebKey) bool {
	if !k.IsPublic() || (k.Use != "" && k.Use != "sig") {
		return false
	}
	if k.Algorithm != "" && !accepted(k.Algorithm) {
		return false
	}
	switch pub := k.Key.(type) {
	case *rsa.PublicKey:
		return pub.N.BitLen() >= minRSABits
	case *ecdsa.PublicKey:
		return pub.Curve == elliptic.P256()
	case ed25519.PublicKey:
		return true
	}
	return false
}

func accepted(alg string) bool {
	for _, a := range Accepted {
		if string(a) == alg {
			return true
		}
	}
	return false
}

// fits reports whether a token signed with alg may be checked with k: the
// algorithm's key type, and the key's own alg when it names one (RFC 8725
// §3.1: the key decides the algorithm, never the token alone).
func fits(k jose.JSONWebKey, alg string) bool {
	if k.Algorithm != "" && k.Algorithm != alg {
		return false
	}
	switch k.Key.(type) {
	case *rsa.PublicKey:
		return alg == string(jose.RS256) || alg == string(jose.PS256)
	case *ecdsa.PublicKey:
		return alg == string(jose.ES256)
	case ed25519.PublicKey:
		return alg == string(jose.EdDSA)
	}
	return false
}
