package main

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"
)

// gateway is a `plantgate serve` process the test started.
type gateway struct {
	cmd    *exec.Cmd
	done   chan error // receives Wait's result once
	stderr *syncBuffer
	stdout *syncBuffer // for processes whose output the test reads
	base   string      // http://127.0.0.1:port
}

// startGateway runs the binary's serve command on a free port with args
// (and env added to the test's environment) and waits until it is ready.
func startGateway(t testing.TB, env []string, args ...string) *gateway {
	t.Helper()
	g := launchGateway(t, env, args...)
	waitReady(t, g.base, g.done, g.stderr)
	return g
}

// launchGateway is startGateway without waiting for readiness.
func launchGateway(t testing.TB, env []string, args ...string) *gateway {
	t.Helper()
	port := freePort(t)
	cmd := exec.Command(buildBinary(t), append([]string{"serve", "--listen", "127.0.0.1:" + port}, args...)...)
	cmd.Env = append(append(os.Environ(), "PLANTGATE_CACHE_DIR="+sharedCache, "PLANTGATE_WATCH=false"), env...)
	g := &gateway{cmd: cmd, done: make(chan error, 1), stderr: &syncBuffer{}, base: "http://127.0.0.1:" + port}
	cmd.Stderr = g.stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { g.done <- cmd.Wait() }()
	t.Cleanup(func() { cmd.Process.Kill() })
	return g
}

// exit waits up to within for the process to end and returns its exit
// code; the test fails when it is still running.
func (g *gateway) exit(t *testing.T, within time.Duration) int {
	t.Helper()
	select {
	case err := <-g.done:
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return ee.ExitCode()
		}
		if err != nil {
			t.Fatal(err)
		}
		return 0
	case <-time.After(within):
		t.Fatalf("still running after %s\n%s", within, g.stderr)
		return -1
	}
}

// stop sends SIGTERM and wants a clean exit.
func (g *gateway) stop(t *testing.T) {
	t.Helper()
	if err := g.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := g.exit(t, 30*time.Second); code != 0 {
		t.Fatalf("exit code %d after SIGTERM\n%s", code, g.stderr)
	}
}

// plantgateCLI runs the binary with args to its end, as an operator's shell
// would, and returns its output and exit code.
func plantgateCLI(t *testing.T, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	cmd := exec.Command(buildBinary(t), args...)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		code = ee.ExitCode()
	case err != nil:
		t.Fatal(err)
	}
	return out.String(), errOut.String(), code
}

// waitFor waits until the process has logged want; the test fails if it
// exits first or has not within a minute.
func waitFor(t *testing.T, g *gateway, want string) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !strings.Contains(g.stderr.String(), want) {
		select {
		case err := <-g.done:
			g.done <- err // for a later exit()
			t.Fatalf("exited (%v) before logging %q:\n%s", err, want, g.stderr)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("no %q logged within a minute:\n%s", want, g.stderr)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
