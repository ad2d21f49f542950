package redistest

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// StartSentinel runs a Redis Sentinel that monitors primary under the name
// master (quorum 1, down after downAfter), killed when the test ends. Give
// it a primary with a replica (WithArgs("--replicaof", host, port)) for
// failovers.
func StartSentinel(t testing.TB, master string, primary *Server, downAfter time.Duration) *Server {
	t.Helper()
	bin := lookServer(t)
	dir := t.TempDir()
	conf := filepath.Join(dir, "sentinel.conf") // Sentinel rewrites it: it must be its own
	ms := downAfter.Milliseconds()
	text := fmt.Sprintf("sentinel monitor %s 127.0.0.1 %d 1\nsentinel down-after-milliseconds %s %d\nsentinel failover-timeout %s %d\n",
		master, primary.port, master, ms, master, 4*ms)
	if err := os.WriteFile(conf, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	s, err := launch(bin, dir, func(c *config) { c.conf = conf }, WithArgs("--sentinel"))
	if err != nil {
		t.Fatalf("redistest: sentinel: %v", err)
	}
	t.Cleanup(s.Kill)
	return s
}
