package redis

import (
	"context"
	"fmt"

	goredis "github.com/redis/go-redis/v9"

	"github.com/plantgate/plantgate/host"
)

// With Options.WaitReplicas, a create or delete is acknowledged only once
// WAIT reports that many replicas have it. WAIT counts the writes of the
// connection it is sent on, on the server it is sent to, so the script and
// the WAIT go together in one pipeline on one connection to the primary of
// the keys' slot: in a cluster, ClusterClient.MasterForKey gives that
// primary's client (a cluster pipeline would route the keyless WAIT to any
// node). A primary that lost its slot answers MOVED, which is 503 like any
// moment the store cannot serve, until the slot map is reloaded. The
// pipeline also holds a fence, so that the same WAIT confirms reads: see
// fence.go, which sends them.

// Why a replicated command failed when too few replicas confirmed it: a
// format of the acknowledged count and the count waited for.
const (
	writeBehind = "the write reached %d of the %d replicas the gateway waits for (--redis-wait-replicas); it may still be stored: retrying is safe"
	readBehind  = "the read was confirmed by %d of the %d replicas the gateway waits for (--redis-wait-replicas): its primary may have been failed over; retrying is safe"
)

// replicasBehind is the error of a WAIT that counted acked replicas, fewer
// than the want waited for; behind is writeBehind or readBehind.
func replicasBehind(behind string, acked int64, want int) error {
	return &opError{
		op:     fmt.Sprintf("wait for %d replicas", want),
		public: host.Errorf(host.ErrReplicasBehind, behind, acked, want),
		cause:  errReplicasBehind,
	}
}

// errReplicasBehind is the cause behind ErrReplicasBehind, for the logs.
var errReplicasBehind = fmt.Errorf("WAIT timed out before enough replicas acknowledged")

// primaryFor is the client that reaches the primary serving key: in a
// cluster, that slot's primary's own client; otherwise the store's client,
// whose connections all go to the one primary.
func (s *Store) primaryFor(ctx context.Context, key string) (goredis.Cmdable, error) {
	if c, ok := s.client.(*goredis.ClusterClient); ok {
		return c.MasterForKey(ctx, key)
	}
	return s.client, nil
}
