package redis

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
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
// moment the store cannot serve, until the slot map is reloaded. The
// pipeline also holds a fence, so that the same WAIT confirms reads (below).

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

// Reads under Options.WaitReplicas are fenced.
//
// A primary frozen (or cut off) past cluster-node-timeout is failed over.
// When it resumes, it runs what its sockets hold and answers from the state
// it had until it learns, a moment later, that it was demoted; then it
// resyncs from the new primary and that state is gone. A read it answers
// in that moment can say "absent" for a plant whose delete (one that had
// timed out, its outcome unknown) it had just run and is about to lose, or
// miss a plant the new primary has acknowledged. The chaos harness found
// the first (issue 23, seed 23, plant 35): no order of the history fits.
//
// WAIT after the read is not enough: WAIT returns at once when the replicas
// have acknowledged the offset of the connection's last command, and a
// frozen primary's replica acknowledged everything before the freeze. So
// the read is followed, on the same connection with nothing between them,
// by a write, and WAIT waits for that: a counter per shard, bumped with
// redis.set_repl(REPL_REPLICA) so that it costs the primary no AOF write.
// A primary that lost its replica to a failover cannot have the write
// acknowledged: the WAIT times out (503 50304) or ends when the primary
// learns it was demoted (503 50301). A read that is answered was answered
// by a primary that WaitReplicas replicas still followed.
//
// Every command the store sends for a create, a delete or a plant read goes
// in a pipeline to its primary's connection, then the fence, then WAIT:
// batched, many commands share one fence and WAIT (batch.go); unbatched,
// each has its own. A write is acknowledged by the same WAIT that confirms a
// read. A list walk sends, per primary and per round trip, its reads then
// the fence then WAIT. Token lookups (see Store.Token), plugin chain reads
// and the fleet's KV are not fenced: see docs/reliability.md.

// fenceLua is the fence: it bumps KEYS[1], the counter of a shard the
// server serves, and propagates that to the replicas only, not to this
// server's AOF: it is there to be waited for, not kept. It is sent with
// EVAL, whole, so that a server that does not know it yet (a restart, a
// failover) needs no second round trip; it is 69 bytes against the 40 of
// its SHA.
const fenceLua = "redis.set_repl(redis.REPL_REPLICA) return redis.call('INCR', KEYS[1])"

// fencer sends commands fenced: in one pipeline on one primary's
// connection, then the fence and WAIT wait, within readTimeout and the
// callers' deadlines. The batcher has one; an unbatched store uses its
// options' (Store.fenced).
type fencer struct {
	wait        int
	readTimeout time.Duration
}

// fencer is the fencer of a store with these options.
func (o Options) fencer() fencer {
	return fencer{wait: o.WaitReplicas, readTimeout: o.ReadTimeout}
}

// fenced runs o, for ctx, fenced on the primary of o.key, unbatched.
func (s *Store) fenced(ctx context.Context, o *op) {
	o.ctx = ctx
	node, err := primaryOf(ctx, s.client, o.key)
	if err != nil {
		o.cmd.SetErr(err)
		return
	}
	s.opts.fencer().send(node, []*op{o})
}

// readPipelined sends the commands of ops at once and returns the first
// error among their replies (a nil reply, goredis.Nil, is none). Without
// WaitReplicas that is one pipeline on the store's client. With it, each
// primary gets its ops fenced (fencer.send), the primaries in parallel, so
// that a walk over every shard costs one round trip per step, as unfenced.
func (s *Store) readPipelined(ctx context.Context, ops []op) error {
	if s.opts.WaitReplicas == 0 {
		pipe := s.client.Pipeline()
		for i := range ops {
			_ = pipe.Process(ctx, ops[i].cmd)
		}
		if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, goredis.Nil) {
			return err
		}
		return nil
	}
	batch := make([]*op, len(ops))
	for i := range ops {
		ops[i].ctx = ctx
		batch[i] = &ops[i]
	}
	f := s.opts.fencer()
	var wg sync.WaitGroup
	for node, group := range byPrimary(s.client, batch) {
		wg.Go(func() { f.send(node, group) })
	}
	wg.Wait()
	for i := range ops {
		if err := ops[i].cmd.Err(); err != nil && !errors.Is(err, goredis.Nil) {
			return err
		}
	}
	return nil
}

// send runs a batch of ops (batch.go) in one pipeline on node, their
// primary, ended by a fence and WAIT: the batcher's sendPipeline under
// WaitReplicas, an unbatched store's every command, a list walk's step.
// The one WAIT acknowledges its writes and confirms its reads: it counts
// replicas that have everything the connection sent before it. When too
// few confirm, each op without an error of its own gets the WAIT's (a
// write's or a read's message). A script the primary does not know is
// loaded there and its ops sent again, fenced again. A nil node (no primary
// known for the slot) answers every op errNoPrimary.
func (f fencer) send(node goredis.Cmdable, batch []*op) {
	defer func() {
		for _, o := range batch {
			if o.done != nil {
				close(o.done)
			}
		}
	}()
	if node == nil {
		for _, o := range batch {
			o.cmd.SetErr(errNoPrimary)
		}
		return
	}
	live := make([]*op, 0, len(batch))
	for _, o := range batch {
		if err := o.ctx.Err(); err != nil {
			o.cmd.SetErr(err)
			continue
		}
		live = append(live, o)
	}
	for try := 0; len(live) > 0; try++ {
		f.pipeline(node, live)
		if try == 1 {
			return
		}
		// NOSCRIPT: load the scripts, send those ops again.
		again := live[:0:0]
		loaded := map[*goredis.Script]error{}
		for _, o := range live {
			if o.script == nil || !isNoScript(o.cmd.Err()) || o.ctx.Err() != nil {
				continue
			}
			err, ok := loaded[o.script]
			if !ok {
				err = o.script.Load(o.ctx, node).Err()
				loaded[o.script] = err
			}
			if err != nil {
				o.cmd.SetErr(err) // the server's state, not NOSCRIPT
				continue
			}
			again = append(again, o)
		}
		live = again
	}
}

// pipeline sends ops, a fence and WAIT on node, and leaves each op's
// answer, or the fence's failure, in its command.
func (f fencer) pipeline(node goredis.Cmdable, ops []*op) {
	var deadline callersDeadline
	for _, o := range ops {
		deadline.add(o.ctx)
	}
	ctx, cancel := deadline.context()
	defer cancel()
	timeout := f.readTimeout
	if left := time.Until(deadline.last); !deadline.unbounded && left < timeout {
		timeout = left
	}
	// WAIT gets half of the read timeout or of what is left of the latest
	// deadline; the other half is for the reply to come back before the
	// read deadline (the same bound) cuts the connection. Redis ends a
	// timed-out WAIT on its next event-loop tick, up to 1/hz (100 ms by
	// default) late, so the default 1 s read timeout gives WAIT 500 ms.
	timeout /= 2
	if timeout < time.Millisecond {
		for _, o := range ops {
			o.cmd.SetErr(context.DeadlineExceeded)
		}
		return
	}
	pipe := node.Pipeline()
	for _, o := range ops {
		o.cmd.SetErr(nil) // a command sent again
		_ = pipe.Process(ctx, o.cmd)
	}
	fence := pipe.Eval(ctx, fenceLua, []string{fenceKeyOf(ops[0].key)})
	wait := pipe.Do(ctx, "wait", f.wait, timeout.Milliseconds())
	_, _ = pipe.Exec(ctx)
	var failed error
	acked, err := wait.Int64()
	switch {
	case fence.Err() != nil:
		failed = fence.Err()
	case err != nil:
		failed = err
	}
	for _, o := range ops {
		if err := o.cmd.Err(); err != nil && !errors.Is(err, goredis.Nil) {
			continue // its own failure (a NOSCRIPT is sent again)
		}
		switch {
		case failed != nil:
			o.cmd.SetErr(failed)
		case acked < int64(f.wait):
			behind := readBehind
			if o.script != nil {
				behind = writeBehind
			}
			o.cmd.SetErr(replicasBehind(behind, acked, f.wait))
		}
	}
}

// fenceKeyOf is the fence counter in key's hash slot: the key's prefix and
// hash tag, then ":fence" (prefix{p07}:fence for shard p07's keys). Every
// key the store fences has a tag.
func fenceKeyOf(key string) string {
	end := strings.IndexByte(key, '}')
	return key[:end+1] + ":fence"
}
