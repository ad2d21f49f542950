package redistest

import (
	"sync"
	"testing"
)

// Shared is one cluster for all the tests of a package, started by the
// first test that asks for it and killed by Close, which TestMain calls
// after m.Run:
//
//	var cluster = redistest.NewShared(redistest.ClusterOptions{})
//
//	func TestMain(m *testing.M) { code := m.Run(); cluster.Close(); os.Exit(code) }
//
//	func TestX(t *testing.T) { c := cluster.Get(t); … }
//
// Tests that stop nodes should start their own with StartCluster, or leave
// the shared one healthy (Restart, then WaitHealthy) before they end.
type Shared struct {
	opts ClusterOptions
	once sync.Once
	c    *Cluster
	err  error
}

// NewShared returns a Shared cluster of these options, not started yet.
func NewShared(o ClusterOptions) *Shared { return &Shared{opts: o} }

// Get starts the cluster on first use and returns it. Without redis-server
// or redis-cli the test is skipped (failed under RequireEnv=1); a cluster
// that failed to start fails every test that asks for it.
func (s *Shared) Get(t testing.TB) *Cluster {
	t.Helper()
	lookServer(t)
	look(t, "redis-cli")
	s.once.Do(func() { s.c, s.err = LaunchCluster(s.opts) })
	if s.err != nil {
		t.Fatalf("redistest: shared cluster: %v", s.err)
	}
	return s.c
}

// Close kills the cluster if it was started.
func (s *Shared) Close() {
	s.once.Do(func() {}) // a Get after Close starts nothing
	if s.c != nil {
		s.c.Close()
	}
}
