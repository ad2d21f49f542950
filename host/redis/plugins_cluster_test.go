package redis

import (
	"testing"

	goredis "github.com/redis/go-redis/v9"

	"github.com/plantgate/plantgate/host/redis/redistest"
)

// TestPluginChainCluster: the plugin chain's script and the heartbeats'
// MULTI stay within one slot each ({plugins}, {fleet}), so they run on a
// real 3-primary Redis Cluster through go-redis's cluster client.
func TestPluginChainCluster(t *testing.T) {
	t.Parallel()
	c := redistest.StartCluster(t, redistest.ClusterOptions{})
	newF := func(t *testing.T) fixture {
		opts, err := goredis.ParseClusterURL(c.URL())
		if err != nil {
			t.Fatal(err)
		}
		raw := goredis.NewClusterClient(opts)
		t.Cleanup(func() { _ = raw.Close() })
		prefix := "plantgate:"
		st := New(goredis.NewClusterClient(opts), Options{KeyPrefix: prefix})
		t.Cleanup(func() { _ = st.Close() })
		return fixture{store: st, raw: raw, prefix: prefix}
	}
	t.Run("PluginChain", func(t *testing.T) { testPluginChain(t, newF) })
	t.Run("Fleet", func(t *testing.T) { testFleet(t, newF) })
}
