package main

import (
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// shutDownListener shuts down the process's listening socket on port from
// outside, as a failing network stack or a stray close would: it takes a
// duplicate of each of the process's descriptors (pidfd_getfd, allowed for
// a child of ours) and shuts down the one bound to port. accept then fails
// for good.
func shutDownListener(t *testing.T, pid, port int) {
	t.Helper()
	pidfd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		t.Skipf("pidfd_open: %v", err)
	}
	defer unix.Close(pidfd)
	entries, err := os.ReadDir("/proc/" + strconv.Itoa(pid) + "/fd")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		fd, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		dup, err := unix.PidfdGetfd(pidfd, fd, 0)
		if err != nil {
			t.Skipf("pidfd_getfd: %v (not allowed to take the child's descriptors here)", err)
		}
		sa, err := unix.Getsockname(dup)
		if in4, ok := sa.(*unix.SockaddrInet4); err == nil && ok && in4.Port == port {
			if acc, err := unix.GetsockoptInt(dup, unix.SOL_SOCKET, unix.SO_ACCEPTCONN); err == nil && acc == 1 {
				err := unix.Shutdown(dup, unix.SHUT_RDWR)
				unix.Close(dup)
				if err != nil {
					t.Fatal(err)
				}
				return
			}
		}
		unix.Close(dup)
	}
	t.Fatalf("no listening socket on port %d in process %d", port, pid)
}

// TestListenerDeathExits: when the HTTP (or the admin) listener stops
// accepting for good, the process does not stay half-alive (running,
// serving one listener and not the other): it logs why and exits 1.
func TestListenerDeathExits(t *testing.T) {
	t.Parallel()
	for _, which := range []string{"http", "admin"} {
		t.Run(which, func(t *testing.T) {
			t.Parallel()
			adminPort := freePort(t)
			g := startGateway(t, nil, "--insecure-no-auth", "--plugins", pluginsDir(t, "20-plant-rules.wasm"), "--admin-listen", "127.0.0.1:"+adminPort)
			if status, body := post(t, g.base, "", `{"id":1,"name":"Fern"}`); status != 200 {
				t.Fatalf("create: %d %s", status, body)
			}
			port := g.base[strings.LastIndexByte(g.base, ':')+1:]
			if which == "admin" {
				port = adminPort
			}
			n, err := strconv.Atoi(port)
			if err != nil {
				t.Fatal(err)
			}
			shutDownListener(t, g.cmd.Process.Pid, n)
			code := g.exit(t, 20*time.Second)
			logs := g.stderr.String()
			if code != 1 {
				t.Fatalf("exit code %d, want 1\n%s", code, logs)
			}
			for _, want := range []string{
				`level=ERROR msg="a listener stopped by itself: shutting down, exit 1" err="` + which + ` listener on 127.0.0.1:` + port + ` stopped: `,
				"\nplantgate: " + which + " listener on 127.0.0.1:" + port + " stopped: ",
			} {
				if !strings.Contains(logs, want) {
					t.Errorf("the log lacks %q:\n%s", want, logs)
				}
			}
		})
	}
}
