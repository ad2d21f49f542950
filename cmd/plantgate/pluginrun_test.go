package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// startPluginRun runs `plantgate plugin run` on testdata/abi/loop.wasm (its
// validate export never returns) with interruption off and timeout_ms.
func startPluginRun(t *testing.T, timeoutMS string) *gateway {
	t.Helper()
	dir := t.TempDir()
	wasmFile := filepath.Join(dir, "10-loop.wasm")
	if err := os.WriteFile(wasmFile, fixtureFile(t, "loop.wasm"), 0o644); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(dir, "10-loop.json"), `{"limits":{"timeout_ms":`+timeoutMS+`,"interrupt":false}}`)
	input := writeFile(t, filepath.Join(dir, "in.json"), `{"id":1,"name":"Fern"}`)
	cmd := exec.Command(buildBinary(t), "plugin", "run", wasmFile, "--phase", "validate", "--input", input)
	g := &gateway{cmd: cmd, done: make(chan error, 1), stderr: &syncBuffer{}}
	cmd.Stderr = g.stderr
	stdout := &syncBuffer{}
	cmd.Stdout = stdout
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { g.done <- cmd.Wait() }()
	t.Cleanup(func() { cmd.Process.Kill() })
	g.stdout = stdout
	return g
}

// TestPluginRunNeverReturns: a guest that never returns, with interruption
// off, cannot hang `plugin run`: it answers the fault the gateway would
// (exit 3) at its deadline, and SIGTERM ends it during a call (exit 1),
// with a message saying why either way.
func TestPluginRunNeverReturns(t *testing.T) {
	t.Parallel()
	t.Run("deadline", func(t *testing.T) {
		t.Parallel()
		g := startPluginRun(t, "300")
		code := g.exit(t, 30*time.Second)
		if want := `{"decision":"fault","status":500,"error":50001,"message":"policy plugin failed; request denied"}` + "\n"; code != exitFault || g.stdout.String() != want {
			t.Fatalf("exit %d, stdout %q; want %d, %q\n%s", code, g.stdout, exitFault, want, g.stderr)
		}
		if !strings.Contains(g.stderr.String(), "ran past its deadline") {
			t.Fatalf("no reason on standard error:\n%s", g.stderr)
		}
	})
	t.Run("SIGTERM", func(t *testing.T) {
		t.Parallel()
		g := startPluginRun(t, "60000")
		waitFor(t, g, `msg="calling the plugin"`)
		if err := g.cmd.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		code := g.exit(t, 30*time.Second)
		want := "plantgate: interrupted during plugin loop's validate call, which cannot be stopped (limits.interrupt is off)\n"
		if code != 1 || g.stdout.String() != "" || !strings.HasSuffix(g.stderr.String(), want) {
			t.Fatalf("exit %d, stdout %q; want exit 1 and %q on stderr:\n%s", code, g.stdout, want, g.stderr)
		}
	})
}
