package redistest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
)

// ClusterOptions shape a Redis Cluster. The zero value is three primaries
// without replicas.
type ClusterOptions struct {
	// Primaries is how many nodes hold slots. Default 3: the store's shard
	// tags are chosen for the slot ranges redis-cli gives three primaries.
	Primaries int
	// Replicas is how many replicas each primary gets. Default 0.
	Replicas int
	// NodeTimeout is cluster-node-timeout: how long a silent node takes to
	// be marked failed and, with replicas, failed over. Default 1s.
	NodeTimeout time.Duration
	// AppendOnly turns on the AOF with appendfsync always on every node, so
	// that a stopped primary restarts with every write it acknowledged.
	AppendOnly bool
}

func (o ClusterOptions) withDefaults() ClusterOptions {
	if o.Primaries == 0 {
		o.Primaries = 3
	}
	if o.NodeTimeout == 0 {
		o.NodeTimeout = time.Second
	}
	return o
}

// Cluster is a Redis Cluster of redis-server processes on loopback ports,
// made by `redis-cli --cluster create`. Nodes keep their port and directory
// over Stop/Kill and Restart, so a restarted node rejoins with its
// nodes.conf (and AOF).
//
// Every node runs with cluster-require-full-coverage no: while one primary
// is down the others keep serving their slots, which is what a gateway in
// front of the cluster is expected to take advantage of.
type Cluster struct {
	Nodes []*Server // in creation order: the first Primaries were made primaries
	opts  ClusterOptions
	dir   string // removed by Close when Launch made it
}

// ErrNoServer is returned by LaunchCluster when redis-server or redis-cli
// is not on PATH.
var ErrNoServer = errors.New("redis-server or redis-cli not found on PATH")

// StartCluster starts a cluster for one test and kills it when the test
// ends. Without redis-server or redis-cli the test is skipped (failed under
// RequireEnv=1).
func StartCluster(t testing.TB, o ClusterOptions) *Cluster {
	t.Helper()
	lookServer(t)
	look(t, "redis-cli")
	c, err := launchCluster(t.TempDir(), o)
	if err != nil {
		t.Fatalf("redistest: %v", err)
	}
	t.Cleanup(c.kill)
	return c
}

// LaunchCluster starts a cluster outside any test, for TestMain (see
// Shared); the caller must Close it.
func LaunchCluster(o ClusterOptions) (*Cluster, error) {
	dir, err := os.MkdirTemp("", "redistest-cluster-")
	if err != nil {
		return nil, err
	}
	c, err := launchCluster(dir, o)
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	c.dir = dir
	return c, nil
}

func launchCluster(dir string, o ClusterOptions) (*Cluster, error) {
	o = o.withDefaults()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		return nil, ErrNoServer
	}
	cli, err := exec.LookPath("redis-cli")
	if err != nil {
		return nil, ErrNoServer
	}
	c := &Cluster{opts: o}
	n := o.Primaries * (1 + o.Replicas)
	for i := range n {
		busPort, err := FreePort()
		if err != nil {
			c.kill()
			return nil, err
		}
		nodeDir := filepath.Join(dir, "node"+strconv.Itoa(i))
		if err := os.MkdirAll(nodeDir, 0o755); err != nil {
			c.kill()
			return nil, err
		}
		opts := []Option{WithArgs(
			"--cluster-enabled", "yes",
			"--cluster-config-file", "nodes.conf",
			// An explicit bus port: the default, port+10000, may be taken
			// or past 65535 for a kernel-chosen port.
			"--cluster-port", strconv.Itoa(busPort),
			"--cluster-node-timeout", strconv.FormatInt(o.NodeTimeout.Milliseconds(), 10),
			"--cluster-require-full-coverage", "no",
			"--cluster-allow-replica-migration", "no",
			// A replica always may take over, however long it was cut off.
			"--cluster-replica-validity-factor", "0",
		)}
		if o.AppendOnly {
			opts = append(opts, WithAppendOnly())
		}
		s, err := launch(bin, nodeDir, opts...)
		if err != nil {
			c.kill()
			return nil, err
		}
		c.Nodes = append(c.Nodes, s)
	}
	args := append([]string{"--cluster", "create"}, c.Addrs()...)
	args = append(args, "--cluster-replicas", strconv.Itoa(o.Replicas), "--cluster-yes")
	if out, err := exec.Command(cli, args...).CombinedOutput(); err != nil {
		c.kill()
		return nil, fmt.Errorf("redis-cli --cluster create: %v\n%s", err, out)
	}
	if err := c.waitHealthy(60 * time.Second); err != nil {
		c.kill()
		return nil, err
	}
	return c, nil
}

// Close kills every node and removes the directories LaunchCluster made.
func (c *Cluster) Close() {
	c.kill()
	if c.dir != "" {
		_ = os.RemoveAll(c.dir)
	}
}

func (c *Cluster) kill() {
	for _, s := range c.Nodes {
		s.Kill()
	}
}

// Addrs are the nodes' host:port, in creation order.
func (c *Cluster) Addrs() []string {
	addrs := make([]string, len(c.Nodes))
	for i, s := range c.Nodes {
		addrs[i] = s.Addr()
	}
	return addrs
}

// URL is the cluster in go-redis's cluster URL form:
// redis://first?addr=second&addr=third…
func (c *Cluster) URL() string {
	addrs := c.Addrs()
	u := "redis://" + addrs[0]
	for i, a := range addrs[1:] {
		sep := "&"
		if i == 0 {
			sep = "?"
		}
		u += sep + "addr=" + a
	}
	return u
}

// Node is the server at addr, or nil.
func (c *Cluster) Node(addr string) *Server {
	for _, s := range c.Nodes {
		if s.Addr() == addr {
			return s
		}
	}
	return nil
}

// clusterNode is one line of CLUSTER NODES.
type clusterNode struct {
	id, addr, primaryID string
	primary, failed     bool
	firstSlot           int // -1 without slots
}

// nodes reads CLUSTER NODES from the server at addr.
func nodes(ctx context.Context, addr string) ([]clusterNode, error) {
	out, err := query(ctx, addr, "cluster", "nodes")
	if err != nil {
		return nil, err
	}
	var ns []clusterNode
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		f := strings.Fields(line)
		if len(f) < 8 {
			continue
		}
		addr, _, _ := strings.Cut(f[1], "@")
		flags := strings.Split(f[2], ",")
		n := clusterNode{id: f[0], addr: addr, primaryID: f[3], firstSlot: -1,
			primary: slices.Contains(flags, "master"),
			failed:  slices.Contains(flags, "fail") || slices.Contains(flags, "fail?")}
		if len(f) > 8 {
			lo, _, _ := strings.Cut(f[8], "-")
			if v, err := strconv.Atoi(lo); err == nil {
				n.firstSlot = v
			}
		}
		ns = append(ns, n)
	}
	return ns, nil
}

// query runs one command on the node at addr with its own short-lived
// connection and returns the reply as text.
func query(ctx context.Context, addr string, args ...any) (string, error) {
	cl := goredis.NewClient(&goredis.Options{Addr: addr, MaxRetries: -1, DialTimeout: time.Second,
		ReadTimeout: 2 * time.Second, PoolSize: 1})
	defer cl.Close()
	v, err := cl.Do(ctx, args...).Result()
	if err != nil {
		return "", err
	}
	return fmt.Sprint(v), nil
}

// view is the cluster as one running node sees it.
func (c *Cluster) view(ctx context.Context) ([]clusterNode, error) {
	var last error
	for _, s := range c.Nodes {
		if !s.Running() {
			continue
		}
		ns, err := nodes(ctx, s.Addr())
		if err == nil {
			return ns, nil
		}
		last = err
	}
	if last == nil {
		last = errors.New("no node is running")
	}
	return nil, last
}

// Primaries are the running primaries that hold slots, ordered by their
// first slot (for a fresh 3-primary cluster: slots 0, 5461, 10923).
func (c *Cluster) Primaries(t testing.TB) []*Server {
	t.Helper()
	ps, err := c.PrimariesNow(context.Background())
	if err != nil {
		t.Fatalf("redistest: %v", err)
	}
	return ps
}

// PrimariesNow is Primaries for code outside a test (the chaos harness).
func (c *Cluster) PrimariesNow(ctx context.Context) ([]*Server, error) {
	ns, err := c.view(ctx)
	if err != nil {
		return nil, fmt.Errorf("cluster nodes: %w", err)
	}
	slices.SortFunc(ns, func(a, b clusterNode) int { return a.firstSlot - b.firstSlot })
	var ps []*Server
	for _, n := range ns {
		if n.primary && !n.failed && n.firstSlot >= 0 {
			if s := c.Node(n.addr); s != nil {
				ps = append(ps, s)
			}
		}
	}
	return ps, nil
}

// PrimaryFor is the primary serving key's slot now.
func (c *Cluster) PrimaryFor(t testing.TB, key string) *Server {
	t.Helper()
	ctx := context.Background()
	for _, s := range c.Nodes {
		if !s.Running() {
			continue
		}
		cl := goredis.NewClient(&goredis.Options{Addr: s.Addr(), MaxRetries: -1})
		defer cl.Close()
		slots, err := cl.ClusterSlots(ctx).Result()
		if err != nil {
			continue
		}
		slot, err := cl.ClusterKeySlot(ctx, key).Result()
		if err != nil {
			t.Fatalf("redistest: cluster keyslot: %v", err)
		}
		for _, r := range slots {
			if int64(r.Start) <= slot && slot <= int64(r.End) && len(r.Nodes) > 0 {
				if n := c.Node(r.Nodes[0].Addr); n != nil {
					return n
				}
			}
		}
	}
	t.Fatalf("redistest: no primary for %q", key)
	return nil
}

// ReplicasOf are the nodes that replicate primary, running or not.
func (c *Cluster) ReplicasOf(t testing.TB, primary *Server) []*Server {
	t.Helper()
	rs, err := c.ReplicasOfNow(context.Background(), primary)
	if err != nil {
		t.Fatalf("redistest: %v", err)
	}
	return rs
}

// ReplicasOfNow is ReplicasOf for code outside a test.
func (c *Cluster) ReplicasOfNow(ctx context.Context, primary *Server) ([]*Server, error) {
	ns, err := c.view(ctx)
	if err != nil {
		return nil, fmt.Errorf("cluster nodes: %w", err)
	}
	id := ""
	for _, n := range ns {
		if n.addr == primary.Addr() {
			id = n.id
		}
	}
	var rs []*Server
	for _, n := range ns {
		if !n.primary && n.primaryID == id {
			if s := c.Node(n.addr); s != nil {
				rs = append(rs, s)
			}
		}
	}
	return rs, nil
}

// WaitHealthy waits until every running node reports cluster_state:ok with
// all slots assigned, sees every running node as healthy, every running
// replica's link to its primary is up, and no node is rewriting its AOF.
// Nodes that are stopped are left out.
//
// The last condition matters to what a replica's acknowledgement is worth:
// after a full sync a replica rewrites its AOF, and until that rewrite ends
// a restart loses what it received since the sync, though WAIT counted it
// (TestWaitReplicasRewriteWindow in host/redis).
func (c *Cluster) WaitHealthy(t testing.TB) {
	t.Helper()
	if err := c.WaitHealthyWithin(60 * time.Second); err != nil {
		t.Fatalf("redistest: %v", err)
	}
}

// WaitHealthyWithin is WaitHealthy for code outside a test: it gives up,
// saying why, after within.
func (c *Cluster) WaitHealthyWithin(within time.Duration) error { return c.waitHealthy(within) }

func (c *Cluster) waitHealthy(within time.Duration) error {
	deadline := time.Now().Add(within)
	for {
		err := c.healthy(context.Background())
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("cluster not healthy within %v: %v", within, err)
		}
		time.Sleep(50 * time.Millisecond) // polling an external process's state
	}
}

func (c *Cluster) healthy(ctx context.Context) error {
	for _, s := range c.Nodes {
		if !s.Running() {
			continue
		}
		info, err := query(ctx, s.Addr(), "cluster", "info")
		if err != nil {
			return err
		}
		if !strings.Contains(info, "cluster_state:ok") || !strings.Contains(info, "cluster_slots_assigned:16384") {
			return fmt.Errorf("%s: cluster info:\n%s", s.Addr(), info)
		}
		ns, err := nodes(ctx, s.Addr())
		if err != nil {
			return err
		}
		if len(ns) != len(c.Nodes) {
			return fmt.Errorf("%s knows %d nodes of %d", s.Addr(), len(ns), len(c.Nodes))
		}
		for _, n := range ns {
			if o := c.Node(n.addr); o != nil && o.Running() && n.failed {
				return fmt.Errorf("%s sees %s failed", s.Addr(), n.addr)
			}
			if n.primary && n.addr == s.Addr() {
				continue
			}
			if !n.primary && n.addr == s.Addr() {
				repl, err := query(ctx, s.Addr(), "info", "replication")
				if err != nil {
					return err
				}
				if !strings.Contains(repl, "master_link_status:up") {
					return fmt.Errorf("replica %s: link to its primary is not up", s.Addr())
				}
			}
		}
		pers, err := query(ctx, s.Addr(), "info", "persistence")
		if err != nil {
			return err
		}
		if strings.Contains(pers, "aof_rewrite_in_progress:1") || strings.Contains(pers, "aof_rewrite_scheduled:1") {
			return fmt.Errorf("%s is rewriting its AOF", s.Addr())
		}
	}
	return nil
}

// Failover makes replica its primary's primary with CLUSTER FAILOVER (a
// coordinated hand-over: no acknowledged write is lost) and waits until the
// cluster is healthy with it serving.
func (c *Cluster) Failover(t testing.TB, replica *Server) {
	t.Helper()
	if _, err := query(context.Background(), replica.Addr(), "cluster", "failover"); err != nil {
		t.Fatalf("redistest: cluster failover on %s: %v", replica.Addr(), err)
	}
	c.AwaitPrimary(t, replica)
}

// AwaitPrimary waits until every running node sees s as a primary holding
// slots, for example after its primary was killed and the cluster failed
// over, and the cluster is healthy.
func (c *Cluster) AwaitPrimary(t testing.TB, s *Server) {
	t.Helper()
	if err := c.AwaitPrimaryWithin(s, 60*time.Second); err != nil {
		t.Fatalf("redistest: %v", err)
	}
}

// AwaitPrimaryWithin is AwaitPrimary for code outside a test.
func (c *Cluster) AwaitPrimaryWithin(s *Server, within time.Duration) error {
	deadline := time.Now().Add(within)
	for {
		if c.allSeePrimary(context.Background(), s.Addr()) && c.healthy(context.Background()) == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s did not become a serving primary within %v", s.Addr(), within)
		}
		time.Sleep(50 * time.Millisecond) // polling an external process's state
	}
}

func (c *Cluster) allSeePrimary(ctx context.Context, addr string) bool {
	for _, o := range c.Nodes {
		if !o.Running() {
			continue
		}
		ns, err := nodes(ctx, o.Addr())
		if err != nil {
			return false
		}
		ok := false
		for _, n := range ns {
			if n.addr == addr && n.primary && n.firstSlot >= 0 {
				ok = true
			}
		}
		if !ok {
			return false
		}
	}
	return true
}
