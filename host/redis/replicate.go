package redis

import (
	"context"
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
	node, err := s.primaryFor(ctx, keys[0])
	if err != nil {
		return 0, err
	}
	timeout := s.opts.ReadTimeout
	if d, ok := ctx.Deadline(); ok && time.Until(d) < timeout {
		timeout = time.Until(d)
	}
	// Half of what is left: the other half is for the reply to come back
	// before the read deadline (the same bound) cuts the connection. Redis
	// ends a timed-out WAIT on its next event-loop tick, up to 1/hz (100 ms
	// by default) late, so the default 1 s read timeout gives WAIT 500 ms.
	timeout /= 2
	if timeout < time.Millisecond {
		return 0, context.DeadlineExceeded
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
		return 0, err
	}
	res, err := cmd.Int64()
	if err != nil {
		return 0, err
	}
	if acked < int64(want) {
		return res, &opError{
			op: fmt.Sprintf("wait for %d replicas", want),
			public: host.Errorf(host.ErrReplicasBehind,
				"the write reached %d of the %d replicas the gateway waits for (--redis-wait-replicas); it may still be stored: retrying is safe", acked, want),
			cause: errReplicasBehind,
		}
	}
	return res, nil
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
	if cmd.Err() != nil {
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
