package redis

import (
	"os"
	"testing"

	"github.com/plantgate/plantgate/host/redis/redistest"
)

// cluster is the package's one Redis Cluster: three primaries with a
// replica each, started by the first test that needs it. Tests that stop
// nodes start their own.
var cluster = redistest.NewShared(redistest.ClusterOptions{Replicas: 1})

func TestMain(m *testing.M) {
	code := m.Run()
	cluster.Close()
	os.Exit(code)
}
