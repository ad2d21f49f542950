package wasmtest

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// RequireOPAEnv names the environment switch that turns a missing opa
// (the Rego tests need it to build policies) from a skip into a failure.
// CI sets it (.ci/run).
const RequireOPAEnv = "PLANTGATE_REQUIRE_OPA"

// OPAVersion is the opa the Rego tests and the guide use.
const OPAVersion = "v1.22.3"

// OPAInstall says how to get opa.
const OPAInstall = "go install github.com/open-policy-agent/opa@" + OPAVersion

// OPA returns the path of the opa binary: $OPA, else opa on PATH, else the
// one go install puts in $GOBIN or $(go env GOPATH)/bin.
func OPA() (string, error) {
	if p := os.Getenv("OPA"); p != "" {
		return p, nil
	}
	if p, err := exec.LookPath("opa"); err == nil {
		return p, nil
	}
	var dirs []string
	if d := os.Getenv("GOBIN"); d != "" {
		dirs = append(dirs, d)
	}
	if out, err := exec.Command("go", "env", "GOPATH").Output(); err == nil {
		dirs = append(dirs, filepath.Join(string(bytes.TrimSpace(out)), "bin"))
	}
	for _, d := range dirs {
		p := filepath.Join(d, "opa")
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
	}
	return "", fmt.Errorf("opa is not on PATH nor in $GOBIN: %s", OPAInstall)
}

// NeedOPA returns opa's path, or skips t when there is none (fails it when
// RequireOPAEnv is set).
func NeedOPA(t testing.TB) string {
	t.Helper()
	p, err := OPA()
	if err != nil {
		if os.Getenv(RequireOPAEnv) == "1" {
			t.Fatalf("%v, and %s=1", err, RequireOPAEnv)
		}
		t.Skipf("%v; set %s=1 to fail instead", err, RequireOPAEnv)
	}
	return p
}

// BuildRego compiles the Rego files (or directories) srcs with opa build
// -t wasm and the given entrypoints, and writes the bundle's /policy.wasm
// to out.
func BuildRego(opa, out string, entrypoints []string, srcs ...string) error {
	tmp, err := os.MkdirTemp("", "plantgate-rego-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	bundle := filepath.Join(tmp, "bundle.tar.gz")
	args := []string{"build", "-t", "wasm", "-o", bundle}
	for _, e := range entrypoints {
		args = append(args, "-e", e)
	}
	if b, err := exec.Command(opa, append(args, srcs...)...).CombinedOutput(); err != nil {
		return fmt.Errorf("opa build %v: %v\n%s", srcs, err, b)
	}
	wasm, err := PolicyFromBundle(bundle)
	if err != nil {
		return err
	}
	return os.WriteFile(out, wasm, 0o644)
}

// PolicyFromBundle reads /policy.wasm out of an OPA bundle.
func PolicyFromBundle(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	gz, err := gzip.NewReader(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	tr := tar.NewReader(gz)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("%s holds no /policy.wasm (was it built with -t wasm?)", path)
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		if h.Name == "/policy.wasm" || h.Name == "policy.wasm" {
			return io.ReadAll(tr)
		}
	}
}
