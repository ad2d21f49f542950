// Package redistest runs a real redis-server for tests: on a free loopback
// port, in the test's temporary directory, killed when the test ends.
//
//	srv := redistest.Start(t, redistest.WithAppendOnly())
//	store, err := redis.Open(ctx, srv.URL(), redis.Options{})
//	...
//	srv.Kill()       // the server dies as in a crash
//	srv.Restart(t)   // same port and directory: AOF data comes back
//
// When redis-server is not on PATH the test is skipped, unless the
// environment sets PLANTGATE_REQUIRE_REDIS=1 (as CI should), which makes a
// missing server a failure instead of a silent skip.
package redistest

import (
	"bufio"
	"bytes"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// RequireEnv names the environment variable that turns a missing
// redis-server from a skip into a failure.
const RequireEnv = "PLANTGATE_REQUIRE_REDIS"

// startTimeout bounds how long a server may take to answer PING.
const startTimeout = 10 * time.Second

// Option changes how Start runs the server.
type Option func(*config)

type config struct {
	appendOnly bool
	args       []string
	conf       string // a config file, given first (sentinel mode needs one)
}

// WithAppendOnly turns on the append-only file with appendfsync always, so
// that every acknowledged write survives Kill and comes back on Restart.
func WithAppendOnly() Option {
	return func(c *config) { c.appendOnly = true }
}

// WithArgs passes extra command-line arguments, for example
// WithArgs("--maxmemory", "1mb"). Later ones override earlier ones.
func WithArgs(args ...string) Option {
	return func(c *config) { c.args = append(c.args, args...) }
}

// Server is one redis-server process. Its methods are safe for concurrent use.
type Server struct {
	bin  string
	dir  string
	port int
	conf string
	args []string

	mu     sync.Mutex
	cmd    *exec.Cmd     // nil while stopped
	exited chan struct{} // closed once cmd has exited and been reaped
}

// Start runs redis-server and returns once it answers PING. The server is
// killed when the test ends. Snapshots are off (--save ""), so only the AOF,
// if WithAppendOnly, persists anything.
func Start(t testing.TB, opts ...Option) *Server {
	t.Helper()
	bin := lookServer(t)
	s, err := launch(bin, t.TempDir(), opts...)
	if err != nil {
		t.Fatalf("redistest: %v", err)
	}
	t.Cleanup(s.Kill)
	return s
}

// lookServer finds redis-server, or skips t (fails it when RequireEnv=1).
func lookServer(t testing.TB) string {
	t.Helper()
	return look(t, "redis-server")
}

// look finds the program name, or skips t (fails it when RequireEnv=1).
func look(t testing.TB, name string) string {
	t.Helper()
	bin, err := exec.LookPath(name)
	if err != nil {
		if os.Getenv(RequireEnv) == "1" {
			t.Fatalf("%s not found on PATH and %s=1: %v", name, RequireEnv, err)
		}
		t.Skipf("%s not found on PATH; install it or set %s=1 to make this a failure", name, RequireEnv)
	}
	return bin
}

// launch runs bin in dir on a free port; the caller kills it.
func launch(bin, dir string, opts ...Option) (*Server, error) {
	var c config
	for _, o := range opts {
		o(&c)
	}
	s := &Server{bin: bin, dir: dir, conf: c.conf}
	s.args = []string{"--bind", "127.0.0.1", "--save", "", "--dir", s.dir, "--daemonize", "no"}
	if c.appendOnly {
		s.args = append(s.args, "--appendonly", "yes", "--appendfsync", "always")
	} else {
		s.args = append(s.args, "--appendonly", "no")
	}
	s.args = append(s.args, c.args...)

	// A free port can be taken between choosing and binding it: try again.
	for attempt := 1; ; attempt++ {
		port, err := FreePort()
		if err != nil {
			return nil, err
		}
		s.port = port
		if err = s.start(); err == nil {
			return s, nil
		}
		if attempt == 3 {
			return nil, err
		}
	}
}

// handedOut are the ports FreePort has returned: the kernel may give a
// port that was just listened on and closed to the next bind of port 0, so
// two tests asking at once could be handed the same one (a gateway once met
// another test's admin listener on its port in a full run).
var handedOut = struct {
	sync.Mutex
	ports map[int]bool
}{ports: map[int]bool{}}

// FreePort returns a loopback TCP port that was free a moment ago and that
// no other caller in this process has been handed: for the redis-servers
// started here and for the tests' own processes alike.
func FreePort() (int, error) {
	handedOut.Lock()
	defer handedOut.Unlock()
	for {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return 0, fmt.Errorf("find a free port: %w", err)
		}
		port := l.Addr().(*net.TCPAddr).Port
		l.Close()
		if !handedOut.ports[port] {
			handedOut.ports[port] = true
			return port, nil
		}
	}
}

// start runs the process and waits, boundedly, until it answers PING.
func (s *Server) start() error {
	args := append([]string{"--port", strconv.Itoa(s.port)}, s.args...)
	if s.conf != "" {
		args = append([]string{s.conf}, args...)
	}
	cmd := exec.Command(s.bin, args...)
	cmd.Dir = s.dir
	out := &syncBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start redis-server: %w", err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()

	deadline := time.Now().Add(startTimeout)
	for {
		if ping(s.Addr()) == nil {
			select {
			case <-exited: // PONG came from someone else on the port
				return fmt.Errorf("redis-server on port %d exited at start-up:\n%s", s.port, out.tail())
			default:
			}
			s.mu.Lock()
			s.cmd, s.exited = cmd, exited
			s.mu.Unlock()
			return nil
		}
		select {
		case <-exited:
			return fmt.Errorf("redis-server on port %d exited at start-up:\n%s", s.port, out.tail())
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			_ = cmd.Process.Kill()
			<-exited
			return fmt.Errorf("redis-server on port %d did not answer PING within %v:\n%s", s.port, startTimeout, out.tail())
		}
	}
}

// ping sends an inline PING and expects +PONG, without any client library.
func ping(addr string) error {
	conn, err := net.DialTimeout("tcp", addr, 200*time.Millisecond)
	if err != nil {
		return err
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(500 * time.Millisecond))
	if _, err := conn.Write([]byte("PING\r\n")); err != nil {
		return err
	}
	line, err := bufio.NewReader(conn).ReadString('\n')
	if err != nil {
		return err
	}
	if line != "+PONG\r\n" {
		return fmt.Errorf("PING answered %q", line)
	}
	return nil
}

// Addr is the server's host:port.
func (s *Server) Addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(s.port)) }

// URL is a redis:// URL for the server's database 0.
func (s *Server) URL() string { return "redis://" + s.Addr() + "/0" }

// Dir is the server's working directory, where its AOF lives.
func (s *Server) Dir() string { return s.dir }

// Kill ends the server with SIGKILL, as a crash would, and waits for it to
// exit. Killing a stopped server does nothing.
func (s *Server) Kill() { s.signal(syscall.SIGKILL) }

// Stop ends the server with SIGTERM (it flushes and closes its files) and
// waits for it, falling back to SIGKILL after a few seconds.
func (s *Server) Stop() { s.signal(syscall.SIGTERM) }

func (s *Server) signal(sig syscall.Signal) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		return
	}
	_ = s.cmd.Process.Signal(syscall.SIGCONT) // a paused process cannot handle SIGTERM
	_ = s.cmd.Process.Signal(sig)
	select {
	case <-s.exited:
	case <-time.After(5 * time.Second):
		_ = s.cmd.Process.Kill()
		<-s.exited
	}
	s.cmd, s.exited = nil, nil
}

// Restart stops the server if it runs (SIGTERM) and starts it again on the
// same port in the same directory, so an AOF written before is loaded.
func (s *Server) Restart(t testing.TB) {
	t.Helper()
	if err := s.Relaunch(); err != nil {
		t.Fatalf("redistest: %v", err)
	}
}

// Relaunch is Restart for code outside a test.
func (s *Server) Relaunch() error {
	s.Stop()
	if err := s.start(); err != nil {
		return fmt.Errorf("restart: %w", err)
	}
	return nil
}

// syncBuffer collects a server's stdout and stderr, written concurrently.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// tail returns the end of the output, for a failure message.
func (b *syncBuffer) tail() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := b.buf.Bytes()
	if len(out) > 2000 {
		out = out[len(out)-2000:]
	}
	if len(out) == 0 {
		return "(no output)"
	}
	return string(out)
}

// Running reports whether the process runs (it was not stopped or killed
// through this Server).
func (s *Server) Running() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cmd != nil
}

// PID is the process id of the running server, or 0 when it is stopped.
func (s *Server) PID() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		return 0
	}
	return s.cmd.Process.Pid
}

// Children are the process ids of the server's child processes now: an
// RDB save or an AOF rewrite in progress (on Linux; nil elsewhere or when
// stopped).
func (s *Server) Children() []int {
	pid := s.PID()
	if pid == 0 {
		return nil
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", pid, pid))
	if err != nil {
		return nil
	}
	var kids []int
	for _, f := range strings.Fields(string(b)) {
		if k, err := strconv.Atoi(f); err == nil {
			kids = append(kids, k)
		}
	}
	return kids
}

// Pause freezes the process (SIGSTOP), as a server stuck or cut off from
// the network would be: connections stay open and nothing is answered.
// Resume undoes it.
func (s *Server) Pause() { s.sendSignal(syscall.SIGSTOP) }

// Resume continues a paused process (SIGCONT).
func (s *Server) Resume() { s.sendSignal(syscall.SIGCONT) }

func (s *Server) sendSignal(sig syscall.Signal) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd != nil {
		_ = s.cmd.Process.Signal(sig)
	}
}
