package redis

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/plantgate/plantgate/host"
	"github.com/plantgate/plantgate/host/redis/redistest"
)

// TestWaitReplicasShort: a server without replicas cannot confirm a write
// to one: the create and the delete answer ErrReplicasBehind, yet the write
// is done (the message says it may be), and a retry is safe. Reads answer
// ErrReplicasBehind too: none can be confirmed (fence.go).
func TestWaitReplicasShort(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	ctx := context.Background()
	s, err := Open(ctx, srv.URL(), Options{KeyPrefix: "w:", WaitReplicas: 1, ReadTimeout: 500 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	if err := s.RecordEvents(ctx); err != nil {
		t.Fatal(err)
	}
	const msg = "the write reached 0 of the 1 replicas the gateway waits for (--redis-wait-replicas); it may still be stored: retrying is safe"
	for range 2 { // the retry is refused alike, and stores nothing twice
		_, err = s.CreatePlant(ctx, plant(7, "Fern"))
		wantCode(t, err, host.ErrReplicasBehind, msg)
	}
	raw := goredis.NewClient(&goredis.Options{Addr: srv.Addr()})
	t.Cleanup(func() { _ = raw.Close() })
	if got, err := raw.Get(ctx, s.shard(7).plantKey(7)).Result(); err != nil || got != `{"id":7,"name":"Fern"}` {
		t.Fatalf("after the refused create: %q, %v; want it stored", got, err)
	}
	// A read cannot be confirmed either (fence.go): its answer could come
	// from a primary failed over.
	_, err = s.Plant(ctx, 7)
	wantCode(t, err, host.ErrReplicasBehind, "the read was confirmed by 0 of the 1 replicas the gateway waits for (--redis-wait-replicas): its primary may have been failed over; retrying is safe")
	_, err = s.Plants(ctx, nil, 10)
	wantCode(t, err, host.ErrReplicasBehind, "the read was confirmed by 0 of the 1 replicas the gateway waits for (--redis-wait-replicas): its primary may have been failed over; retrying is safe")
	if n, err := raw.XLen(ctx, s.shard(7).events).Result(); err != nil || n != 1 {
		t.Fatalf("outbox holds %d events, %v; want the one create", n, err)
	}
	// Even a retry that finds the plant gone waits for the replicas.
	wantCode(t, s.DeletePlant(ctx, 7), host.ErrReplicasBehind, msg)
	wantCode(t, s.DeletePlant(ctx, 7), host.ErrReplicasBehind, msg)
	if n, err := raw.Exists(ctx, s.shard(7).plantKey(7)).Result(); err != nil || n != 0 {
		t.Fatalf("after the refused delete: exists=%d, %v; want it deleted", n, err)
	}
}

// TestWaitReplicasCluster: with one replica per primary, every create is
// on the replica of its slot by the time it is acknowledged, whichever
// primary ran it; asking for two replicas is refused.
func TestWaitReplicasCluster(t *testing.T) {
	t.Parallel()
	c := cluster.Get(t)
	ctx := context.Background()
	f := clusterFixture(c, Options{WaitReplicas: 1})(t)
	for id := range int64(Shards * 4) {
		if created, err := f.store.CreatePlant(ctx, plant(id, "Fern")); !created || err != nil {
			t.Fatalf("create %d: created=%v err=%v", id, created, err)
		}
		key := f.plantKey(id)
		replica := c.ReplicasOf(t, c.PrimaryFor(t, key))[0]
		rc := goredis.NewClient(&goredis.Options{Addr: replica.Addr(), PoolSize: 1,
			OnConnect: func(ctx context.Context, cn *goredis.Conn) error { return cn.ReadOnly(ctx).Err() }})
		v, err := rc.Get(ctx, key).Result()
		_ = rc.Close()
		if err != nil || v == "" {
			t.Fatalf("plant %d on replica %s: %q, %v; want it there on acknowledgement", id, replica.Addr(), v, err)
		}
	}

	two := clusterFixture(c, Options{WaitReplicas: 2, ReadTimeout: 500 * time.Millisecond})(t)
	_, err := two.store.CreatePlant(ctx, plant(1, "Moss"))
	wantCode(t, err, host.ErrReplicasBehind,
		"the write reached 1 of the 2 replicas the gateway waits for (--redis-wait-replicas); it may still be stored: retrying is safe")
}

// TestWaitReplicasFailover: creates run while a primary's replica crashes,
// then the primary crashes too, and the replica comes back (from its AOF)
// and takes over without the writes it missed. With WaitReplicas 1 none of
// those writes was acknowledged (they answered 50304), so every
// acknowledged create is there afterwards; without WAIT they were
// acknowledged and are lost.
func TestWaitReplicasFailover(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		wait     int
		wantLost bool
	}{{1, false}, {0, true}} {
		t.Run(fmt.Sprint("wait ", tt.wait), func(t *testing.T) {
			t.Parallel()
			lost := failoverLosses(t, tt.wait)
			if (lost > 0) != tt.wantLost {
				t.Fatalf("%d acknowledged creates lost; want lost=%v", lost, tt.wantLost)
			}
		})
	}
}

// failoverLosses counts the acknowledged creates missing after the failover
// described above.
func failoverLosses(t *testing.T, wait int) int {
	c := redistest.StartCluster(t, redistest.ClusterOptions{Replicas: 1, AppendOnly: true})
	ctx := context.Background()
	f := clusterFixture(c, Options{WaitReplicas: wait, ReadTimeout: 500 * time.Millisecond})(t)

	var (
		acked   sync.Map // id → when it was acknowledged
		nAcked  atomic.Int64
		refused atomic.Int64
	)
	stop := createLoad(f.store, 8, 2*time.Second, func(id int64, err error) {
		if err == nil {
			acked.Store(id, time.Now())
			nAcked.Add(1)
		} else {
			refused.Add(1)
		}
	})
	// When each step happened, to tell of a lost create when it was
	// acknowledged (a failure is then a place to start from).
	var steps []step
	mark := func(what string) { steps = append(steps, step{what, time.Now()}) }
	waitFor(t, func() bool { return nAcked.Load() >= 200 })
	// The victim and its replica are chosen now, on a healthy cluster: a
	// starved machine can fail a primary over on its own (1 s node
	// timeout), and a replica that just full-synced loses, when killed
	// before its AOF rewrite ends, what it acknowledged since
	// (TestWaitReplicasRewriteWindow): Redis's loss, not the one this test
	// looks for.
	c.WaitHealthy(t)
	victim := c.PrimaryFor(t, f.plantKey(0))
	replica := c.ReplicasOf(t, victim)[0]
	replica.Kill()
	mark("replica killed")
	before := nAcked.Load()
	waitFor(t, func() bool { return nAcked.Load() >= before+500 })
	victim.Kill()
	mark("primary killed")
	replica.Restart(t)
	mark("replica restarted")
	c.AwaitPrimary(t, replica)
	mark("replica promoted")
	// The old primary rejoins as the new one's replica, dropping what only
	// it had.
	victim.Restart(t)
	mark("old primary restarted")
	c.WaitHealthy(t)
	mark("cluster healthy")
	// Plant 0 is on the victim's shard (the workers start at 1): once its
	// create is acknowledged, the store has found the new primary.
	waitFor(t, func() bool {
		_, err := f.store.CreatePlant(ctx, plant(0, "p0"))
		return err == nil
	})
	stop()

	lost := 0
	lostIn := map[string]int{} // the step after which a lost create was acknowledged
	acked.Range(func(k, v any) bool {
		if _, err := f.store.Plant(ctx, k.(int64)); err != nil {
			if host.Code(err) != host.ErrPlantNotFound {
				t.Fatalf("read plant %d: %v", k, err)
			}
			lost++
			after := "load start"
			for _, st := range steps {
				if v.(time.Time).After(st.at) {
					after = st.what
				}
			}
			lostIn[after]++
		}
		return true
	})
	t.Logf("wait %d: %d creates acknowledged, %d refused, %d acknowledged then lost", wait, nAcked.Load(), refused.Load(), lost)
	if lost > 0 {
		t.Logf("wait %d: lost creates by the last step before their acknowledgement: %v; steps: %v", wait, lostIn, steps)
	}
	return lost
}

// step is one step of failoverLosses and when it was done.
type step struct {
	what string
	at   time.Time
}

func (s step) String() string { return s.what + " " + s.at.Format("15:04:05.000") }

// createLoad runs creates of fresh ids (from 1 up) from workers
// goroutines, each with its own deadline, and hands every outcome to
// record, until the returned stop is called; stop returns once they ended.
func createLoad(s *Store, workers int, deadline time.Duration, record func(id int64, err error)) (stop func()) {
	var (
		next atomic.Int64
		wg   sync.WaitGroup
		done = make(chan struct{})
	)
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-done:
					return
				default:
				}
				id := next.Add(1)
				ctx, cancel := context.WithTimeout(context.Background(), deadline)
				_, err := s.CreatePlant(ctx, plant(id, fmt.Sprint("p", id)))
				cancel()
				record(id, err)
			}
		}()
	}
	return func() { close(done); wg.Wait() }
}

// waitFor polls cond until it holds, failing after a minute.
// primaryWithReplica starts a redis-server and a replica of it, waits until
// the replica's link is up, and returns both and a client on the replica.
func primaryWithReplica(t *testing.T) (primary, replica *redistest.Server, rc *goredis.Client) {
	t.Helper()
	primary = redistest.Start(t)
	_, port, _ := strings.Cut(primary.Addr(), ":")
	replica = redistest.Start(t, redistest.WithArgs("--replicaof", "127.0.0.1", port))
	rc = goredis.NewClient(&goredis.Options{Addr: replica.Addr()})
	t.Cleanup(func() { _ = rc.Close() })
	waitFor(t, func() bool {
		info, err := rc.Info(context.Background(), "replication").Result()
		return err == nil && strings.Contains(info, "master_link_status:up")
	})
	return primary, replica, rc
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within a minute")
		}
		time.Sleep(10 * time.Millisecond) // polling counters of running goroutines
	}
}

// TestWaitReplicasRetryAfterLag: a create and a delete whose first attempt
// reached the primary while its replica was frozen answer 50304; their
// retries through another store (another gateway, a fresh connection) must
// too, as long as the replica still lacks the write, and answer as usual
// once it has it. The retries' scripts write nothing: this holds because
// Redis (7.0) gives WAIT the server's replication offset after the
// connection's last command, written or not. Were WAIT to wait only for the
// connection's own writes, a retry on a fresh connection would answer 200
// for a plant the replica lacks (and 404 for a delete it lacks), which a
// failover would undo (issue 23 looked for this; it is not the cause).
func TestWaitReplicasRetryAfterLag(t *testing.T) {
	t.Parallel()
	primary, replica, _ := primaryWithReplica(t)
	ctx := context.Background()
	open := func() *Store {
		s, err := Open(ctx, primary.URL(), Options{KeyPrefix: "lag:", WaitReplicas: 1, ReadTimeout: 400 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = s.Close() })
		return s
	}
	first, retry := open(), open()
	if _, err := first.CreatePlant(ctx, plant(1, "Fern")); err != nil {
		t.Fatalf("create 1 with the replica up: %v", err)
	}
	// The retrying store writes once, so its connection's last write is
	// older than the ones about to be refused.
	if _, err := retry.CreatePlant(ctx, plant(2, "Moss")); err != nil {
		t.Fatalf("create 2 with the replica up: %v", err)
	}

	replica.Pause()
	const behind = "the write reached 0 of the 1 replicas the gateway waits for (--redis-wait-replicas); it may still be stored: retrying is safe"
	_, err := first.CreatePlant(ctx, plant(3, "Ivy"))
	wantCode(t, err, host.ErrReplicasBehind, behind)
	wantCode(t, first.DeletePlant(ctx, 1), host.ErrReplicasBehind, behind)
	// The retries: the same content, other content, the same delete.
	_, err = retry.CreatePlant(ctx, plant(3, "Ivy"))
	wantCode(t, err, host.ErrReplicasBehind, behind)
	_, err = retry.CreatePlant(ctx, plant(3, "Oak"))
	wantCode(t, err, host.ErrReplicasBehind, behind)
	wantCode(t, retry.DeletePlant(ctx, 1), host.ErrReplicasBehind, behind)

	replica.Resume()
	if created, err := retry.CreatePlant(ctx, plant(3, "Ivy")); created || err != nil {
		t.Fatalf("retried create once the replica has it: created=%v, %v; want false, nil", created, err)
	}
	_, err = retry.CreatePlant(ctx, plant(3, "Oak"))
	wantCode(t, err, host.ErrConflict, "plant 3 already exists with other content")
	wantCode(t, retry.DeletePlant(ctx, 1), host.ErrPlantNotFound, "no plant with id 1")
}

// TestWaitReplicasPrimaryDemoted: a primary that turns into a replica while
// a create waits for its replicas (a failover after it was cut off, as the
// chaos harness's paused primary) ends that WAIT with an UNBLOCKED error.
// The write may be kept or not: that is 503 like any moment the store
// cannot serve, not 500 "plant store error" as it was (found by
// plantgate-chaos, seed 23).
func TestWaitReplicasPrimaryDemoted(t *testing.T) {
	t.Parallel()
	primary, replica, _ := primaryWithReplica(t)
	ctx := context.Background()
	s, err := Open(ctx, primary.URL(), Options{KeyPrefix: "demote:", WaitReplicas: 1, ReadTimeout: 4 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })

	replica.Pause() // the create's WAIT now waits its whole 2 s
	done := make(chan error, 1)
	go func() {
		_, err := s.CreatePlant(ctx, plant(1, "Fern"))
		done <- err
	}()
	pc := goredis.NewClient(&goredis.Options{Addr: primary.Addr()})
	t.Cleanup(func() { _ = pc.Close() })
	waitFor(t, func() bool {
		info, err := pc.Info(ctx, "clients").Result()
		return err == nil && strings.Contains(info, "blocked_clients:1")
	})
	_, rport, _ := strings.Cut(replica.Addr(), ":")
	if err := pc.Do(ctx, "replicaof", "127.0.0.1", rport).Err(); err != nil {
		t.Fatal(err)
	}
	wantCode(t, <-done, host.ErrStoreUnavailable, "plant store unavailable")
	replica.Resume()
}
