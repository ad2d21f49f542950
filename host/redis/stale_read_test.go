package redis

import (
	"context"
	"fmt"
	"net"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/plantgate/plantgate/host"
	"github.com/plantgate/plantgate/host/redis/redistest"
)

// TestWaitReplicasStaleRead: a primary frozen past cluster-node-timeout is
// failed over; when it resumes it answers what its sockets hold from the
// state it had, before it learns it was demoted. Under
// --redis-wait-replicas a read must not be answered from that state: it is
// 503, as a write there is. Both holes, as the chaos harness met the first
// (seed 23, plant 35):
//
//   - a delete that had timed out (its answer unknown) runs on the old
//     primary as it resumes, and a read there says "absent"; the delete is
//     then lost in the resync, and the plant is back: no order of the
//     history fits;
//   - a create the new primary acknowledged is missing from a read, and
//     from a list walk, that the old primary answers.
//
// WAIT after the read is not enough for the second: the old primary's
// replica had acknowledged everything before the freeze, so WAIT returns
// at once. The read is confirmed by a fence write (fence.go).
//
// The stores here have the slot map a gateway had before the failover: a
// client made by New reloads it only on a MOVED or after 10 s, not each
// second as Open's does, so the reads reach the old primary as a gateway's
// can in the second before its reload.
func TestWaitReplicasStaleRead(t *testing.T) {
	t.Parallel()
	c := redistest.StartCluster(t, redistest.ClusterOptions{Replicas: 1, AppendOnly: true})
	ctx := context.Background()
	const prefix = "stale:"
	batch := 0 // each case runs batched (the default), then unbatched
	stale := func() *Store {
		client := goredis.NewClusterClient(&goredis.ClusterOptions{
			Addrs: c.Addrs(), ReadTimeout: 4 * time.Second, MaxRetries: -1, MaxRedirects: clusterRedirects,
		})
		s := New(client, Options{KeyPrefix: prefix, WaitReplicas: 1, ReadTimeout: 4 * time.Second, Batch: batch})
		t.Cleanup(func() { _ = s.Close() })
		if err := s.Ping(ctx); err != nil {
			t.Fatal(err)
		}
		return s
	}
	promoted := func(r *redistest.Server) {
		rc := goredis.NewClient(&goredis.Options{Addr: r.Addr()})
		defer rc.Close()
		waitFor(t, func() bool {
			role, err := rc.Do(ctx, "role").Slice()
			return err == nil && len(role) > 0 && role[0] == "master"
		})
	}
	var keys *Store // for key names only
	nodeOf := func(id int64) *redistest.Server { return c.PrimaryFor(t, keys.shard(id).plantKey(id)) }
	var id int64 // each case its own plant
	wantUnavailable := func(t *testing.T, what string, err error) {
		t.Helper()
		if code := host.Code(err); code != host.ErrStoreUnavailable && code != host.ErrReplicasBehind {
			t.Errorf("%s answered by the resumed old primary: %v (code %d); want 503 (50301 or 50304)", what, err, code)
		}
	}
	type answer struct {
		plant host.Plant
		page  host.Page
		err   error
	}

	deleteOnResume := func(t *testing.T) {
		s := stale()
		keys = s
		id++
		a := id
		if _, err := s.CreatePlant(ctx, plant(a, "Fern")); err != nil {
			t.Fatal(err)
		}
		p := nodeOf(a)
		r := c.ReplicasOf(t, p)[0]
		// A delete whose answer never comes: it stays in the old primary's
		// socket, to run when it resumes.
		conn, err := net.Dial("tcp", p.Addr())
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		p.Pause()
		key := s.shard(a).plantKey(a)
		if _, err := fmt.Fprintf(conn, "*2\r\n$3\r\nDEL\r\n$%d\r\n%s\r\n", len(key), key); err != nil {
			t.Fatal(err)
		}
		promoted(r)
		read := make(chan answer, 1)
		go func() {
			got, err := s.Plant(ctx, a)
			read <- answer{plant: got, err: err}
		}()
		time.Sleep(300 * time.Millisecond) // the read is in the old primary's socket
		p.Resume()
		got := <-read
		wantUnavailable(t, "the read", got.err)
		c.WaitHealthy(t)
		// The delete was lost with the old primary's state: "absent" was wrong.
		if got, err := stale().Plant(ctx, a); err != nil || got.Name != "Fern" {
			t.Fatalf("after the failover: %+v, %v; want plant %d Fern (the delete lost)", got, err, a)
		}
	}

	createOnNew := func(t *testing.T) {
		s := stale()
		keys = s
		id++
		b := id
		if _, err := s.Plant(ctx, b); host.Code(err) != host.ErrPlantNotFound {
			t.Fatalf("before: %v; want not found", err)
		}
		p := nodeOf(b)
		r := c.ReplicasOf(t, p)[0]
		p.Pause()
		promoted(r)
		// The new primary has no replica while the old one is frozen: this
		// store on it does not wait.
		onNew := New(goredis.NewClient(&goredis.Options{Addr: r.Addr()}), Options{KeyPrefix: prefix})
		t.Cleanup(func() { _ = onNew.Close() })
		if _, err := onNew.CreatePlant(ctx, plant(b, "Moss")); err != nil {
			t.Fatalf("create on the new primary: %v", err)
		}
		read, list := make(chan answer, 1), make(chan answer, 1)
		go func() {
			got, err := s.Plant(ctx, b)
			read <- answer{plant: got, err: err}
		}()
		go func() {
			page, err := s.Plants(ctx, nil, 100)
			list <- answer{page: page, err: err}
		}()
		time.Sleep(300 * time.Millisecond)
		p.Resume()
		got := <-read
		wantUnavailable(t, "the read", got.err)
		// The walk may have reached the old primary after it learned of
		// its demotion (a MOVED, followed to the new one): then it lists
		// plant b. It must not list without it.
		walk := <-list
		listed := false
		for _, pl := range walk.page.Plants {
			listed = listed || pl.ID == b
		}
		if walk.err == nil && !listed {
			t.Errorf("the list walk answered %+v, without plant %d: the resumed old primary's state", walk.page.Plants, b)
		} else if walk.err != nil {
			wantUnavailable(t, "the list walk", walk.err)
		}
		c.WaitHealthy(t)
		if got, err := stale().Plant(ctx, b); err != nil || got.Name != "Moss" {
			t.Fatalf("after the failover: %+v, %v; want plant %d Moss", got, err, b)
		}
	}

	for _, mode := range []struct {
		name  string
		batch int
	}{{"batched", 0}, {"unbatched", -1}} {
		batch = mode.batch
		// Each case freezes the primary of its plant, which may be one
		// an earlier case promoted.
		t.Run(mode.name+"/a delete run on resume", deleteOnResume)
		t.Run(mode.name+"/a create acknowledged by the new primary", createOnNew)
	}
}

// TestWaitReplicasScriptFlushed: a fenced create on a primary that lost its
// scripts (a restart, a failover, SCRIPT FLUSH) loads the script there and
// is sent again, fenced again, batched or not.
func TestWaitReplicasScriptFlushed(t *testing.T) {
	t.Parallel()
	primary, _, rc := primaryWithReplica(t)
	ctx := context.Background()
	pc := goredis.NewClient(&goredis.Options{Addr: primary.Addr()})
	t.Cleanup(func() { _ = pc.Close() })
	for i, batch := range []int{0, -1} {
		s, err := Open(ctx, primary.URL(), Options{KeyPrefix: fmt.Sprintf("flush%d:", i), WaitReplicas: 1, Batch: batch})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = s.Close() })
		if _, err := s.CreatePlant(ctx, plant(1, "Fern")); err != nil {
			t.Fatalf("batch %d: create 1: %v", batch, err)
		}
		if err := pc.ScriptFlush(ctx).Err(); err != nil {
			t.Fatal(err)
		}
		if created, err := s.CreatePlant(ctx, plant(2, "Moss")); !created || err != nil {
			t.Fatalf("batch %d: create after SCRIPT FLUSH: created=%v, %v; want true, nil", batch, created, err)
		}
		if got, err := rc.Get(ctx, s.shard(2).plantKey(2)).Result(); err != nil || got != `{"id":2,"name":"Moss"}` {
			t.Fatalf("batch %d: the replica has %q, %v; want plant 2", batch, got, err)
		}
		if got, err := s.Plant(ctx, 2); err != nil || got.Name != "Moss" {
			t.Fatalf("batch %d: read: %+v, %v", batch, got, err)
		}
	}
}
