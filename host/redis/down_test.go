package redis

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/plantgate/plantgate/host"
	"github.com/plantgate/plantgate/host/redis/redistest"
)

// TestClusterPrimaryDown: while one primary of three is down, crashed
// (connections refused) or frozen (silent), the creates whose shard lives
// there fail with 503 within their deadline and the others keep
// succeeding, batched together as they are; once it is back the same
// Store serves its shards again, without a restart.
func TestClusterPrimaryDown(t *testing.T) {
	t.Parallel()
	for _, how := range []string{"killed", "frozen"} {
		t.Run(how, func(t *testing.T) {
			t.Parallel()
			c := redistest.StartCluster(t, redistest.ClusterOptions{AppendOnly: true, NodeTimeout: 5 * time.Second})
			f := clusterFixture(c, Options{})(t)
			victim := c.PrimaryFor(t, f.plantKey(0))
			onVictim := func(id int64) bool { return c.PrimaryFor(t, f.plantKey(id)) == victim }
			down := map[int]bool{}
			for sh := range Shards {
				down[sh] = false
			}
			for id := int64(0); id < 4*Shards; id++ {
				down[shardOf(id)] = onVictim(id)
			}

			ctx := context.Background()
			type tally struct{ ok, unavailable, other atomic.Int64 }
			var healthy, dead tally
			var firstOther atomic.Value
			stop := createLoad(f.store, 16, time.Second, func(id int64, err error) {
				tl := &healthy
				if down[shardOf(id)] {
					tl = &dead
				}
				switch {
				case err == nil:
					tl.ok.Add(1)
				case host.Code(err) == host.ErrStoreUnavailable:
					tl.unavailable.Add(1)
				default:
					tl.other.Add(1)
					firstOther.CompareAndSwap(nil, err)
				}
			})
			waitFor(t, func() bool { return healthy.ok.Load() > 500 })
			switch how {
			case "killed":
				victim.Kill()
			case "frozen":
				victim.Pause()
			}
			// Measure the down period from the first refusals on.
			waitFor(t, func() bool { return dead.unavailable.Load() > 0 })
			hOK, hBad := healthy.ok.Load(), healthy.unavailable.Load()+healthy.other.Load()
			dOK := dead.ok.Load()
			waitFor(t, func() bool { return dead.unavailable.Load() > 50 && healthy.ok.Load() > hOK+1000 })
			hOK, hBad = healthy.ok.Load()-hOK, healthy.unavailable.Load()+healthy.other.Load()-hBad
			dOK = dead.ok.Load() - dOK
			switch how {
			case "killed":
				victim.Restart(t)
			case "frozen":
				victim.Resume()
			}
			c.WaitHealthy(t)
			// Back without a restart: a create on the victim's shard succeeds.
			waitFor(t, func() bool {
				_, err := f.store.CreatePlant(ctx, plant(0, "p0"))
				return err == nil
			})
			stop()
			if v := firstOther.Load(); v != nil {
				t.Fatalf("a create failed with neither success nor 503: %v", v.(error))
			}
			t.Logf("while down: healthy shards %d ok, %d failed; dead shards %d refused, %d ok (in flight)", hOK, hBad, dead.unavailable.Load(), dOK)
			// The healthy shards were not held hostage: at most a few of
			// their creates failed, those batched with the dead shard's at
			// the moment it went down.
			if hBad*100 > hOK {
				t.Fatalf("healthy shards: %d failed against %d ok while one primary was down", hBad, hOK)
			}
		})
	}
}
