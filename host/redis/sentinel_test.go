package redis

import (
	"context"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/plantgate/plantgate/host"
	"github.com/plantgate/plantgate/host/redis/redistest"
)

// TestSentinel: a store on a Sentinel URL writes to the primary Sentinel
// names, waits for its replica with WaitReplicas, and follows a failover
// without being reopened.
func TestSentinel(t *testing.T) {
	t.Parallel()
	primary := redistest.Start(t)
	h, port, _ := strings.Cut(primary.Addr(), ":")
	replica := redistest.Start(t, redistest.WithArgs("--replicaof", h, port))
	sentinel := redistest.StartSentinel(t, "plants", primary, time.Second)
	ctx := context.Background()

	s, err := Open(ctx, "redis+sentinel://"+sentinel.Addr()+"?master_name=plants", Options{KeyPrefix: "s:", WaitReplicas: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	if s.Mode() != "sentinel (primary plants)" {
		t.Fatalf("Mode = %q", s.Mode())
	}
	// The replica syncs in the background: until it has, WAIT 1 refuses.
	waitFor(t, func() bool {
		_, err := s.CreatePlant(ctx, plant(1, "Fern"))
		return err == nil
	})

	sc := goredis.NewSentinelClient(&goredis.Options{Addr: sentinel.Addr()})
	t.Cleanup(func() { _ = sc.Close() })
	if err := sc.Failover(ctx, "plants").Err(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool {
		addr, err := sc.GetMasterAddrByName(ctx, "plants").Result()
		return err == nil && addr[1] == strings.Split(replica.Addr(), ":")[1]
	})
	// The same Store now writes to the promoted replica (once the old
	// primary follows it, WAIT 1 is met again).
	waitFor(t, func() bool {
		_, err := s.CreatePlant(ctx, plant(2, "Moss"))
		return err == nil
	})
	// Reads are fenced (fence.go): while the old primary's link to the new
	// one settles they may answer 50304, never a wrong plant.
	for id, name := range map[int64]string{1: "Fern", 2: "Moss"} {
		var p host.Plant
		waitFor(t, func() bool {
			var err error
			p, err = s.Plant(ctx, id)
			if err != nil && host.Code(err) != host.ErrReplicasBehind {
				t.Fatalf("plant %d after failover: %v", id, err)
			}
			return err == nil
		})
		if p.Name != name {
			t.Fatalf("plant %d after failover: %+v, want %s", id, p, name)
		}
	}
	rc := goredis.NewClient(&goredis.Options{Addr: replica.Addr()})
	t.Cleanup(func() { _ = rc.Close() })
	if role, err := rc.Do(ctx, "role").Slice(); err != nil || role[0] != "master" {
		t.Fatalf("ROLE of the old replica = %v, %v; want master", role, err)
	}
}
