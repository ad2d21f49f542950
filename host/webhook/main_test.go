package webhook_test

import (
	"os"
	"testing"

	"github.com/plantgate/plantgate/host/redis/redistest"
)

// cluster is the package's Redis Cluster (three primaries), started by the
// first test that runs against it.
var cluster = redistest.NewShared(redistest.ClusterOptions{})

func TestMain(m *testing.M) {
	code := m.Run()
	cluster.Close()
	os.Exit(code)
}
