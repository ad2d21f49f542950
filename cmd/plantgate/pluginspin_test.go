package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/metrics"
	"testing"
	"time"

	"github.com/plantgate/plantgate/host"
	"github.com/plantgate/plantgate/host/wasm"
)

// spinChildEnv names the plugin file TestPluginRunNoCollectionDuringSpin's
// child process (this test binary, started again) calls.
const spinChildEnv = "PLANTGATE_TEST_SPIN_CHILD"

// TestPluginRunNoCollectionDuringSpin: while `plugin run` waits on a guest
// that spins with limits.interrupt off, the rest of the process keeps
// running however much it allocates. Go cannot preempt the guest, so a
// garbage collection would stop every goroutine until the guest returned,
// that is for ever: the deadline and SIGTERM could not end the process
// (TestPluginRunNeverReturns/SIGTERM hung so, once, in CI). The child
// makes awaitDecision's call of testdata/abi/loop.wasm and then allocates
// 256 MiB, which at the default GOGC starts several collections; it must
// finish, and must have run none of them during the spin.
func TestPluginRunNoCollectionDuringSpin(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "10-loop.wasm")
	if err := os.WriteFile(file, fixtureFile(t, "loop.wasm"), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), spinChildEnv+"="+file, "GOGC=100")
	g := &gateway{cmd: cmd, done: make(chan error, 1), stderr: &syncBuffer{}, stdout: &syncBuffer{}}
	cmd.Stdout, cmd.Stderr = g.stdout, g.stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { g.done <- cmd.Wait() }()
	t.Cleanup(func() { cmd.Process.Kill() })
	if code := g.exit(t, 60*time.Second); code != 0 || g.stdout.String() != "allocated 256 MiB beside the spinning call; collections during it: 0\n" {
		t.Fatalf("exit %d, stdout %q\n%s", code, g.stdout, g.stderr)
	}
}

// spinChild is the child: it never returns.
func spinChild(file string) {
	ctx := context.Background()
	limits := wasm.Limits{Timeout: time.Minute, Interrupt: wasm.InterruptOff, Instances: 1}.Or(wasm.DefaultLimits())
	p, err := wasm.LoadPlugin(ctx, file, nil, wasm.Options{Limits: limits})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	go awaitDecision(ctx, "loop", "validate", limits, func() decisionJSON {
		return decisionOf("", p.Validate(ctx, host.Plant{ID: 1, Name: "Fern"}, ""))
	})
	time.Sleep(300 * time.Millisecond) // the guest is spinning by now
	// runtime/metrics, not ReadMemStats: that stops the world itself.
	cycles := func() uint64 {
		s := []metrics.Sample{{Name: "/gc/cycles/total:gc-cycles"}}
		metrics.Read(s)
		return s[0].Value.Uint64()
	}
	before := cycles()
	var keep [][]byte
	for i := 0; i < 256*1024; i++ {
		keep = append(keep, make([]byte, 1024))
		if len(keep) == 1024 { // keep 1 MiB live at a time, the rest garbage
			keep = keep[:0]
		}
	}
	runtime.KeepAlive(keep)
	fmt.Printf("allocated 256 MiB beside the spinning call; collections during it: %d\n", cycles()-before)
	os.Exit(0)
}
