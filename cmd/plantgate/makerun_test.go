package main

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestMakeRunPrintsLinesToPaste runs `make run`'s recipe (on the binary
// and plugins the tests built: -o build skips the build) and pastes the
// lines it prints into a shell, as the README's Quickstart says to (issue
// 33: it printed "dev token: …" while the README said to paste TOKEN=…).
func TestMakeRunPrintsLinesToPaste(t *testing.T) {
	t.Parallel()
	bin := t.TempDir()
	if err := os.Symlink(buildBinary(t), filepath.Join(bin, "plantgate")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(bundledDir, filepath.Join(bin, "plugins")); err != nil {
		t.Fatal(err)
	}
	listen, admin := "127.0.0.1:"+freePort(t), "127.0.0.1:"+freePort(t)
	mk := exec.Command("make", "-s", "-o", "build", "run", "BIN="+bin, "LISTEN="+listen, "ADMIN="+admin)
	mk.Dir = filepath.Join("..", "..")
	mk.Env = append(os.Environ(), "PLANTGATE_CACHE_DIR="+sharedCache)
	mk.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} // make, its shell and serve: stopped together
	stdout, err := mk.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	logs := &syncBuffer{}
	mk.Stderr = logs
	if err := mk.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- mk.Wait() }()
	t.Cleanup(func() {
		syscall.Kill(-mk.Process.Pid, syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			syscall.Kill(-mk.Process.Pid, syscall.SIGKILL)
		}
	})

	// The lines come before serve logs anything to stderr; collect stdout
	// until the console line (the last), or give up after a minute.
	lines := make(chan string)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	var printed []string
	deadline := time.After(time.Minute)
collect:
	for {
		select {
		case l, ok := <-lines:
			if !ok {
				break collect
			}
			printed = append(printed, l)
			if strings.HasPrefix(l, "console: ") {
				break collect
			}
		case <-deadline:
			break collect
		}
	}
	go func() { // keep draining, so serve never blocks on a full pipe
		for range lines {
		}
	}()
	var paste []string
	for _, l := range printed {
		if strings.HasPrefix(l, "TOKEN=") || strings.HasPrefix(l, "curl ") {
			paste = append(paste, l)
		}
	}
	if len(paste) != 2 || !strings.HasPrefix(paste[0], "TOKEN=") {
		t.Fatalf("make run printed\n%s\nwant a TOKEN=… line, then a curl line using $TOKEN", strings.Join(printed, "\n"))
	}
	waitReady(t, "http://"+listen, done, logs)
	sh := exec.Command("bash", "-c", strings.Join(paste, "\n"))
	sh.Env = []string{"PATH=" + os.Getenv("PATH")} // a fresh shell: no TOKEN of the test's
	out, err := sh.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "HTTP/1.1 200 OK") || !strings.HasSuffix(string(out), `{"name":"Monstera","tag":"tropical"}`) {
		t.Fatalf("pasted\n%s\ngot %v\n%s", strings.Join(paste, "\n"), err, out)
	}
}
