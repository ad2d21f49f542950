package main

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/go-jose/go-jose/v4"
)

// The access-token rows (issue 30): a gateway accepting the JWT access
// tokens of an identity provider served from this process (discovery and
// key set only; it signs the tokens itself beforehand), read with one busy
// client's token and with 1,000 clients' tokens in turn, for RS256 and
// ES256. Their ratio is to the opaque token on the same gateway in the
// same run: the cost of the credential alone.

const (
	benchAudience = "plantgate-bench"
	// rotatingClients is how many distinct tokens the rotating rows cycle.
	rotatingClients = 1000
	oidcOpaque      = "GET /plants/{id}: opaque token, OIDC gateway"
)

// benchIdP serves a discovery document and a key set.
type benchIdP struct {
	url  string
	srv  *http.Server
	keys map[jose.SignatureAlgorithm]crypto.Signer
	// Token files: one line per token, for the rotating script; and the
	// busy client's token.
	busy  map[jose.SignatureAlgorithm]string
	files map[jose.SignatureAlgorithm]string
}

func startIdP(dir string) (*benchIdP, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	rsaKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return nil, err
	}
	ecKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	i := &benchIdP{url: "http://" + ln.Addr().String(),
		keys:  map[jose.SignatureAlgorithm]crypto.Signer{jose.RS256: rsaKey, jose.ES256: ecKey},
		busy:  map[jose.SignatureAlgorithm]string{},
		files: map[jose.SignatureAlgorithm]string{}}
	set := jose.JSONWebKeySet{}
	for alg, k := range i.keys {
		set.Keys = append(set.Keys, jose.JSONWebKey{Key: k.Public(), KeyID: string(alg), Algorithm: string(alg), Use: "sig"})
	}
	jwks, _ := json.Marshal(set)
	meta, _ := json.Marshal(map[string]string{"issuer": i.url, "jwks_uri": i.url + "/keys"})
	mux := http.NewServeMux()
	mux.HandleFunc("GET /.well-known/openid-configuration", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Write(meta)
	})
	mux.HandleFunc("GET /keys", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Write(jwks)
	})
	i.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go i.srv.Serve(ln)
	for alg := range i.keys {
		var lines []string
		for n := range rotatingClients + 1 {
			tok, err := i.sign(alg, fmt.Sprintf("client-%04d", n))
			if err != nil {
				i.close()
				return nil, err
			}
			lines = append(lines, tok)
		}
		i.busy[alg] = lines[rotatingClients]
		i.files[alg] = filepath.Join(dir, "tokens-"+string(alg)+".txt")
		if err := os.WriteFile(i.files[alg], []byte(strings.Join(lines[:rotatingClients], "\n")+"\n"), 0o600); err != nil {
			i.close()
			return nil, err
		}
	}
	return i, nil
}

// sign makes an access token for sub that outlives any run.
func (i *benchIdP) sign(alg jose.SignatureAlgorithm, sub string) (string, error) {
	s, err := jose.NewSigner(jose.SigningKey{Algorithm: alg, Key: i.keys[alg]},
		(&jose.SignerOptions{}).WithType("at+jwt").WithHeader("kid", string(alg)))
	if err != nil {
		return "", err
	}
	now := time.Now()
	claims, _ := json.Marshal(map[string]any{"iss": i.url, "aud": benchAudience, "sub": sub,
		"scope": "plants:read plants:write", "iat": now.Unix(), "exp": now.Add(6 * time.Hour).Unix()})
	jws, err := s.Sign(claims)
	if err != nil {
		return "", err
	}
	return jws.CompactSerialize()
}

func (i *benchIdP) close() {
	if i != nil {
		i.srv.Close()
	}
}

// startOIDC starts the identity provider and the gateway that trusts it.
func startOIDC(ctx context.Context, cfg config, e *env, cacheDir string) error {
	idp, err := startIdP(e.dir)
	if err != nil {
		return fmt.Errorf("identity provider: %w", err)
	}
	e.idp = idp
	e.oidc, e.oidcLog, err = startReady(ctx, cfg, e, cfg.plugins, cacheDir, "oidc", "gateway with --oidc-issuer", 60*time.Second,
		"--oidc-issuer", idp.url, "--oidc-audience", benchAudience)
	return err
}

// busyRead is the read load with one client's access token.
func busyRead(alg jose.SignatureAlgorithm) workload {
	w := readLoad
	w.name = "read-busy-" + string(alg)
	w.token = func(e *env) string { return e.idp.busy[alg] }
	return w
}

// rotatingRead reads with rotatingClients tokens in turn (a file of them,
// the script's second argument), each connection starting at its own.
func rotatingRead(alg jose.SignatureAlgorithm) workload {
	return workload{name: "read-rotating-" + string(alg), token: func(e *env) string { return e.idp.files[alg] },
		script: fmt.Sprintf(`
local threads = 0
function setup(thread)
  thread:set("tid", threads)
  threads = threads + 1
end
function init(args)
  tokens = {}
  for line in io.lines(args[2]) do tokens[#tokens + 1] = "Bearer " .. line end
  i = tid * 97
end
function request()
  i = i %% #tokens + 1
  return wrk.format("GET", "/plants/%d", {["Authorization"] = tokens[i]})
end
`, seedPlantID)}
}

// oidcSpecs are the access-token rows, after their baseline.
func oidcSpecs() []loadSpec {
	target := func(e *env) *proc { return e.oidc }
	return []loadSpec{
		{oidcOpaque, target, readLoad, getCeiling},
		{"  access token RS256, one busy client", target, busyRead(jose.RS256), oidcOpaque},
		{"  access token ES256, one busy client", target, busyRead(jose.ES256), oidcOpaque},
		{"  access token RS256, 1,000 clients", target, rotatingRead(jose.RS256), oidcOpaque},
		{"  access token ES256, 1,000 clients", target, rotatingRead(jose.ES256), oidcOpaque},
	}
}

// printOIDC prints the access-token rows' CPU per request against the
// opaque token's on the same gateway (the goal for a busy client:
// at most 1.05×).
func printOIDC(med map[string]result) {
	base, ok := med[oidcOpaque]
	if !ok || base.cpuPerOp == 0 {
		return
	}
	fmt.Printf("\naccess tokens, gateway CPU per request against the opaque token on the same gateway (%.1f µs):\n", base.cpuPerOp)
	for _, ls := range oidcSpecs()[1:] {
		if r, ok := med[ls.name]; ok {
			fmt.Printf("  %-40s %6.1f µs  %.2f×\n", strings.TrimSpace(ls.name), r.cpuPerOp, r.cpuPerOp/base.cpuPerOp)
		}
	}
	fmt.Println("  a first-seen token's verification: go test -run - -bench Verify ./host/oidc/")
}
