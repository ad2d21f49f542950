package main

import (
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/plantgate/plantgate/host/redis/redistest"
)

// guideBlock returns the first ```sh block after heading in a guide.
func guideBlock(t *testing.T, guide, heading string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", guide))
	if err != nil {
		t.Fatal(err)
	}
	_, s, ok := strings.Cut(string(b), "\n"+heading+"\n")
	if !ok {
		t.Fatalf("%s has no %q", guide, heading)
	}
	_, s, _ = strings.Cut(s, "```sh\n")
	s, _, _ = strings.Cut(s, "```")
	return s
}

// TestOperatingRedisQuickstart pastes docs/operating.md's "Against a real
// Redis" block into a shell at a repository whose make build is done (the
// test's binary and bundled plugins), against a real redis-server on its
// own port: the create answers 200, and the plant and the token outlive
// the serve the block stops.
func TestOperatingRedisQuickstart(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t, redistest.WithAppendOnly())
	block := guideBlock(t, "docs/operating.md", "## Against a real Redis")
	if !strings.HasPrefix(block, "make build\n") || !strings.Contains(block, "127.0.0.1:6379") || !strings.Contains(block, "127.0.0.1:8081") {
		t.Fatalf("the block no longer starts with make build on 127.0.0.1:6379 and 8081:\n%s", block)
	}
	root := t.TempDir()
	if err := os.Mkdir(filepath.Join(root, "bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(buildBinary(t), filepath.Join(root, "bin", "plantgate")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(bundledDir, filepath.Join(root, "bin", "plugins")); err != nil {
		t.Fatal(err)
	}
	port := freePort(t)
	script := strings.TrimPrefix(block, "make build\n") // done: the test's binary and plugins
	script = strings.ReplaceAll(script, "127.0.0.1:6379", srv.Addr())
	script = strings.ReplaceAll(script, "127.0.0.1:8081", "127.0.0.1:"+port)
	sh := exec.Command("bash", "-e", "-c", script+"\nwait\n") // wait: serve has stopped when the shell ends
	sh.Dir = root
	sh.Env = []string{"PATH=" + os.Getenv("PATH"), "PLANTGATE_CACHE_DIR=" + sharedCache}
	sh.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	t.Cleanup(func() {
		if sh.Process != nil {
			syscall.Kill(-sh.Process.Pid, syscall.SIGKILL)
		}
	})
	out, err := sh.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "HTTP/1.1 200 OK") || !strings.Contains(string(out), "\r\n\r\n"+`{"name":"Monstera","tag":"tropical"}`) {
		t.Fatalf("the block: %v\n%s", err, out)
	}
	// The plant and the token stay in Redis: a token of its own reads it
	// through another gateway on the same store.
	g := startGateway(t, []string{"PLANTGATE_REDIS_URL=" + srv.URL(), "PLANTGATE_BOOTSTRAP_TOKEN=quickstart-check-0123456789abcdef"}, "--plugins", bundledDir)
	req, _ := http.NewRequest("GET", g.base+"/plants/1", nil)
	if status, body, _ := send(t, req, "quickstart-check-0123456789abcdef"); status != 200 || body != `{"id":1,"name":"Monstera","tag":"tropical"}` {
		t.Fatalf("GET /plants/1 after the block: %d %s", status, body)
	}
	list, _, code := plantgateCLI(t, "token", "list", "--redis-url", srv.URL())
	if code != 0 || !strings.Contains(list, "quickstart") {
		t.Fatalf("token list after the block: exit %d\n%s", code, list)
	}
}
