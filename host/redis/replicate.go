package redis

import (
	"context"
	"errors"
	"fmt"
	"time"

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
// moment the store cannot serve, until the slot map is reloaded.

// runReplicated runs script on the primary of keys[0] and waits for
// s.opts.WaitReplicas replicas, within the read timeout and ctx's deadline.
func (s *Store) runReplicated(ctx context.Context, script *goredis.Script, keys, args []string) (int64, error) {
	cmd, err := s.replicated(ctx, script, keys, args, writeBehind)
	if err != nil {
		return 0, err
	}
	return cmd.Int64()
}

// Why a replicated command failed when too few replicas confirmed it: a
// format of the acknowledged count and the count waited for.
const (
	writeBehind = "the write reached %d of the %d replicas the gateway waits for (--redis-wait-replicas); it may still be stored: retrying is safe"
	readBehind  = "the read was confirmed by %d of the %d replicas the gateway waits for (--redis-wait-replicas): its primary may have been failed over; retrying is safe"
)

// replicated is runReplicated's call, with the script's reply (a nil reply
// is no error here; see cmd.Err) and behind the message of a WAIT short of
// replicas.
func (s *Store) replicated(ctx context.Context, script *goredis.Script, keys, args []string, behind string) (*goredis.Cmd, error) {
	node, err := s.primaryFor(ctx, keys[0])
	if err != nil {
		return nil, err
	}
	timeout, err := s.waitTimeout(ctx)
	if err != nil {
		return nil, err
	}
	want := s.opts.WaitReplicas
	cmd, acked, err := evalWait(ctx, node, script, keys, args, want, timeout)
	if err == nil && isNoScript(cmd.Err()) {
		// The primary does not know the script yet (first use, restart,
		// failover): load it there and run the pair again.
		if err = script.Load(ctx, node).Err(); err == nil {
			cmd, acked, err = evalWait(ctx, node, script, keys, args, want, timeout)
		}
	}
	if err != nil {
		return nil, err
	}
	if err := cmd.Err(); err != nil && !errors.Is(err, goredis.Nil) {
		return nil, err
	}
	if acked < int64(want) {
		return nil, replicasBehind(behind, acked, want)
	}
	return cmd, nil
}

// waitTimeout is how long a WAIT may wait: half of the read timeout or of
// what is left of ctx's deadline. The other half is for the reply to come
// back before the read deadline (the same bound) cuts the connection. Redis
// ends a timed-out WAIT on its next event-loop tick, up to 1/hz (100 ms by
// default) late, so the default 1 s read timeout gives WAIT 500 ms.
func (s *Store) waitTimeout(ctx context.Context) (time.Duration, error) {
	timeout := s.opts.ReadTimeout
	if d, ok := ctx.Deadline(); ok && time.Until(d) < timeout {
		timeout = time.Until(d)
	}
	timeout /= 2
	if timeout < time.Millisecond {
		return 0, context.DeadlineExceeded
	}
	return timeout, nil
}

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

// evalWait sends EVALSHA and WAIT in one pipeline on one connection. err is
// the WAIT's failure (or the pipeline's); the script's own is in cmd.
func evalWait(ctx context.Context, node goredis.Cmdable, script *goredis.Script, keys, args []string, replicas int, timeout time.Duration) (*goredis.Cmd, int64, error) {
	pipe := node.Pipeline()
	cmd := newScriptOp(ctx, script, keys, args).cmd.(*goredis.Cmd)
	_ = pipe.Process(ctx, cmd)
	wait := pipe.Do(ctx, "wait", replicas, timeout.Milliseconds())
	_, _ = pipe.Exec(ctx)
	if err := cmd.Err(); err != nil && !errors.Is(err, goredis.Nil) {
		return cmd, 0, nil
	}
	acked, err := wait.Int64()
	return cmd, acked, err
}

// primaryFor is the client that reaches the primary serving key: in a
// cluster, that slot's primary's own client; otherwise the store's client,
// whose connections all go to the one primary.
func (s *Store) primaryFor(ctx context.Context, key string) (goredis.Cmdable, error) {
	if c, ok := s.client.(*goredis.ClusterClient); ok {
		return c.MasterForKey(ctx, key)
	}
	return s.client, nil
}
