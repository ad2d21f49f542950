package redistest_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/plantgate/plantgate/host/redis/redistest"
)

// TestCluster checks the harness itself: three primaries with a replica
// each, keys routed by slot, a stopped primary failed over to its replica,
// and the old primary back as a replica after Restart.
func TestCluster(t *testing.T) {
	t.Parallel()
	c := redistest.StartCluster(t, redistest.ClusterOptions{Replicas: 1, AppendOnly: true})
	if len(c.Nodes) != 6 {
		t.Fatalf("%d nodes, want 6", len(c.Nodes))
	}
	ps := c.Primaries(t)
	if len(ps) != 3 {
		t.Fatalf("%d primaries, want 3", len(ps))
	}
	for i, p := range ps {
		if p != c.Nodes[i] {
			t.Fatalf("primary %d is %s, want the %dth node %s", i, p.Addr(), i, c.Nodes[i].Addr())
		}
		if rs := c.ReplicasOf(t, p); len(rs) != 1 {
			t.Fatalf("primary %s has %d replicas, want 1", p.Addr(), len(rs))
		}
	}

	ctx := context.Background()
	opts, err := goredis.ParseClusterURL(c.URL())
	if err != nil {
		t.Fatal(err)
	}
	if len(opts.Addrs) != 6 {
		t.Fatalf("URL %s has %d addrs", c.URL(), len(opts.Addrs))
	}
	// go-redis learns a failover only from a MOVED reply or by reloading
	// the slot map, every minute by default.
	opts.ClusterStateReloadInterval = 200 * time.Millisecond
	cl := goredis.NewClusterClient(opts)
	t.Cleanup(func() { _ = cl.Close() })
	for i := range 30 {
		if err := cl.Set(ctx, fmt.Sprint("k", i), i, 0).Err(); err != nil {
			t.Fatal(err)
		}
	}
	// "k1" hashes to slot 12706: the third primary's.
	p := c.PrimaryFor(t, "k1")
	if p != ps[2] {
		t.Fatalf("PrimaryFor(k1) = %s, want %s", p.Addr(), ps[2].Addr())
	}
	replica := c.ReplicasOf(t, p)[0]
	// Replication is asynchronous: make sure the replica has k1 before the
	// crash, on the connection that wrote it.
	pc := goredis.NewClient(&goredis.Options{Addr: p.Addr(), PoolSize: 1})
	t.Cleanup(func() { _ = pc.Close() })
	if err := pc.Set(ctx, "k1", "1", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if n, err := pc.Wait(ctx, 1, 10*time.Second).Result(); err != nil || n != 1 {
		t.Fatalf("WAIT 1 = %d, %v", n, err)
	}

	p.Kill()
	c.AwaitPrimary(t, replica)
	if got := c.PrimaryFor(t, "k1"); got != replica {
		t.Fatalf("after failover PrimaryFor(k1) = %s, want %s", got.Addr(), replica.Addr())
	}
	// The client learns the new slot map after a failed call or two.
	eventuallyGet(t, cl, "k1", "1")

	p.Restart(t)
	c.WaitHealthy(t)
	if rs := c.ReplicasOf(t, replica); len(rs) != 1 || rs[0] != p {
		t.Fatalf("the old primary did not rejoin as the new primary's replica: %v", rs)
	}
	c.Failover(t, p)
	if got := c.PrimaryFor(t, "k1"); got != p {
		t.Fatalf("after CLUSTER FAILOVER PrimaryFor(k1) = %s, want %s", got.Addr(), p.Addr())
	}
	eventuallyGet(t, cl, "k1", "1")
}

func eventuallyGet(t *testing.T, cl *goredis.ClusterClient, key, want string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		v, err := cl.Get(context.Background(), key).Result()
		if err == nil && v == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("GET %s = %q, %v; want %q", key, v, err, want)
		}
		time.Sleep(20 * time.Millisecond) // the client refreshes its slot map on its own
	}
}
