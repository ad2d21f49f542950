package wasmtest

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// RequireToolchainsEnv names the environment switch that turns a missing
// guest-kit toolchain (clang, wasm-ld, wasi-libc, a rustc with the wasm32
// std) from a skip into a failure. CI sets it (.ci/run), so that a test of
// the Rust or C kit never passes there by not running.
const RequireToolchainsEnv = "PLANTGATE_REQUIRE_TOOLCHAINS"

// Kits are the guest kits with a plant-rules example: each language's
// directory under sdk/, built by its own Makefile.
var Kits = []string{"rust", "c"}

// KitToolchain reports what is missing to build lang's kit ("rust" or
// "c"), or nil when everything is there.
func KitToolchain(lang string) error {
	switch lang {
	case "c":
		for _, tool := range []string{"clang", "wasm-ld", "make", "cc"} {
			if _, err := exec.LookPath(tool); err != nil {
				return fmt.Errorf("%s is not on PATH (Debian: apt-get install clang lld wasi-libc)", tool)
			}
		}
		lib := "/usr/lib/wasm32-wasi/libc.a"
		if root := os.Getenv("WASI_SYSROOT"); root != "" {
			lib = filepath.Join(root, "lib", "wasm32-wasi", "libc.a")
		}
		if _, err := os.Stat(lib); err != nil {
			return fmt.Errorf("wasi-libc is missing: no %s (Debian: apt-get install wasi-libc)", lib)
		}
		return nil
	case "rust":
		rustc := Rustc()
		out, err := exec.Command(rustc, "--print", "sysroot").Output()
		if err != nil {
			return fmt.Errorf("%s does not run (Debian: apt-get install rustc libstd-rust-dev-wasm32): %v", rustc, err)
		}
		root := filepath.Join(strings.TrimSpace(string(out)), "lib", "rustlib")
		for _, target := range []string{"wasm32-wasi", "wasm32-wasip1"} {
			if _, err := os.Stat(filepath.Join(root, target, "lib")); err == nil {
				return nil
			}
		}
		return fmt.Errorf("%s has no wasm32-wasi std under %s (Debian: apt-get install libstd-rust-dev-wasm32)", rustc, root)
	case "rego":
		_, err := OPA()
		return err
	case "assemblyscript":
		// The compiler itself comes from npm (the kit's package-lock.json).
		for _, tool := range []string{"node", "npm"} {
			if _, err := exec.LookPath(tool); err != nil {
				return fmt.Errorf("%s is not on PATH (install Node.js 20+ with npm; Debian: apt-get install nodejs npm)", tool)
			}
		}
		return nil
	}
	return fmt.Errorf("no kit for %q", lang)
}

// Rustc is the rustc the kits build with, as sdk/rust/Makefile picks it:
// $RUSTC, else Debian's /usr/bin/rustc when present, else rustc on PATH.
func Rustc() string {
	if r := os.Getenv("RUSTC"); r != "" {
		return r
	}
	if _, err := os.Stat("/usr/bin/rustc"); err == nil {
		return "/usr/bin/rustc"
	}
	return "rustc"
}

// NeedKitToolchain skips t when lang's toolchain is missing, or fails it
// when RequireToolchainsEnv is set.
//
// For "rego" the switch is RequireOPAEnv.
func NeedKitToolchain(t testing.TB, lang string) {
	t.Helper()
	if lang == "rego" {
		NeedOPA(t)
		return
	}
	if err := KitToolchain(lang); err != nil {
		if os.Getenv(RequireToolchainsEnv) != "" {
			t.Fatalf("%s kit: %v (%s is set)", lang, err, RequireToolchainsEnv)
		}
		t.Skipf("%s kit: %v; set %s=1 to fail instead", lang, err, RequireToolchainsEnv)
	}
}

// BuildKit builds lang's example (a directory of sdk/<lang>/examples, like
// "plant-rules") with the kit's Makefile, as `make kits` does, into out, a
// .wasm file; its intermediate files go to a directory beside out.
func BuildKit(lang, example, out string) error {
	root, err := ModuleRoot()
	if err != nil {
		return err
	}
	if !strings.HasSuffix(out, ".wasm") {
		return errors.New("BuildKit: out must be a .wasm file")
	}
	abs, err := filepath.Abs(out)
	if err != nil {
		return err
	}
	args := []string{"-s", "-C", filepath.Join(root, "sdk", lang),
		"EXAMPLE=" + example, "OUT=" + filepath.Dir(abs), "NAME=" + filepath.Base(abs), "BUILD=" + strings.TrimSuffix(abs, ".wasm") + ".build"}
	if lang == "rego" {
		opa, err := OPA()
		if err != nil {
			return err
		}
		args = append(args, "OPA="+opa)
	}
	cmd := exec.Command("make", args...)
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("build the %s kit's %s: %v\n%s", lang, example, err, b)
	}
	return nil
}
