package redis

import (
	"context"
	"errors"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	goredis "github.com/redis/go-redis/v9"
)

// A batcher sends the commands of concurrent requests to Redis together,
// in pipelines: one write and one read for many commands instead of one
// round trip (and its syscalls) each. Under load that is most of what a
// create costs the gateway.
//
// A lone caller sends its own command at once: with nobody to batch with, a
// hand-off to a worker would only add two goroutine wake-ups. Otherwise a
// few workers each take the first queued command, plus whatever else is
// queued at that moment up to a maximum, and send them as one pipeline.
// When that is a small batch while other callers are waiting (their
// commands in the other worker's pipeline, or about to be queued), the
// worker lingers, for up to lingerFor, yielding the processor rather than
// sleeping, and takes what arrives meanwhile: under load that doubles the
// batch and halves the write and read syscalls per command, which on a
// loopback connection cost more than the command. On an idle machine the
// first yield comes straight back and the linger ends there, so a light
// load pays a yield, not a wait.
// Each caller still waits for its own reply only until its context ends; a
// command that has been sent may still run after that, which is safe
// because every write here is idempotent. Scripts keep EVALSHA: a command
// answered NOSCRIPT is run again alone with go-redis's EVALSHA, then EVAL
// fallback, so each create or delete is still one atomic script call.

// batchWorkers is how many pipelines can be in flight at once. Two keep
// one pipeline filling while the other is on the wire; four workers
// without the linger sent batches half the size at the same throughput.
const batchWorkers = 2

// A worker whose batch is smaller than lingerBelow while other callers wait
// lingers up to lingerFor for more, until its batch holds lingerBelow.
// Measured under 64 concurrent creates on 2 cores: batches of ~4.5 became
// ~9, with 5–10% more throughput and a lower p99. It yields the processor
// rather than sleeping (issue 10: a time.Sleep of 50 µs slept ~1 ms, and 2
// concurrent creates took 1.2 ms instead of 80 µs), and it stops as soon as
// a yield finds nothing else to run (shorter than idleYield): the callers
// it would wait for are then waiting on the network, not about to queue,
// so a light load is not delayed. Under load the yields run the request
// handlers that queue the next commands.
const (
	lingerFor   = 50 * time.Microsecond
	lingerBelow = 8
	idleYield   = 2 * time.Microsecond
)

// errStoreClosed answers commands queued after Close.
var errStoreClosed = errors.New("redis store closed")

type batcher struct {
	client  goredis.UniversalClient
	cluster *goredis.ClusterClient // non-nil: a batch is split by primary
	// fence.wait > 0 (Options.WaitReplicas): each pipeline goes to one
	// primary's connection and ends with a fence and WAIT (fence.go).
	fence   fencer
	ops     chan *op
	max     int
	stop    chan struct{}
	wg      sync.WaitGroup
	waiting atomic.Int64 // callers in do: queued, in a pipeline, or about to be
	lingers atomic.Int64 // times a worker lingered, for tests
	direct  atomic.Int64 // commands a lone caller sent itself, for tests
}

// op is one queued command and how to rerun it when it is a script the
// server does not know.
type op struct {
	ctx    context.Context
	cmd    goredis.Cmder
	key    string          // the (first) key cmd touches: its slot's primary runs it
	script *goredis.Script // the script cmd is an EVALSHA of, or nil
	keys   []string
	args   []any
	done   chan struct{}
}

func newBatcher(client goredis.UniversalClient, max int, fence fencer) *batcher {
	b := &batcher{client: client, ops: make(chan *op, 1024), max: max, stop: make(chan struct{}), fence: fence}
	b.cluster, _ = client.(*goredis.ClusterClient)
	b.wg.Add(batchWorkers)
	for range batchWorkers {
		go b.work()
	}
	return b
}

// close stops the workers once the commands they hold are answered.
func (b *batcher) close() {
	close(b.stop)
	b.wg.Wait()
}

// do queues o and waits for its reply or for ctx to end.
func (b *batcher) do(ctx context.Context, o *op) error {
	alone := b.waiting.Add(1) == 1
	defer b.waiting.Add(-1)
	if alone {
		// Nothing to batch with: a hand-off to a worker would only add two
		// goroutine wake-ups to the round trip.
		select {
		case <-b.stop:
			return errStoreClosed
		default:
		}
		b.direct.Add(1)
		if b.fence.wait > 0 {
			o.ctx = ctx
			node, _ := primaryOf(ctx, b.client, o.key) // nil: answered errNoPrimary
			b.fence.send(node, []*op{o})
			return nil
		}
		_ = b.client.Process(ctx, o.cmd)
		b.rerun(ctx, o)
		return nil
	}
	o.ctx, o.done = ctx, make(chan struct{})
	select {
	case b.ops <- o:
	case <-ctx.Done():
		return ctx.Err()
	case <-b.stop:
		return errStoreClosed
	}
	select {
	case <-o.done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-b.stop:
		// Queued after the workers left, or cut off by the closing client.
		return errStoreClosed
	}
}

// maxScriptStrings bounds a batched script call's keys and arguments.
const maxScriptStrings = 8

// scriptOp is a script call's op with its EVALSHA command inline. Every
// argument is a *string into strs, which go-redis writes (and reads a
// cluster slot from) as the string, so boxing it allocates nothing: the
// op, the command's argument list and the boxes are one allocation, where
// a []string of keys, an []any of arguments, the command's own list and a
// box per string were a dozen.
type scriptOp struct {
	op
	argv [3 + maxScriptStrings]any
	strs [1 + maxScriptStrings]string // the script's hash, keys, arguments
}

// newScriptOp returns the op of one EVALSHA of script; op.keys and op.args
// are its keys and arguments again, for a rerun.
func newScriptOp(ctx context.Context, script *goredis.Script, keys, args []string) *scriptOp {
	if len(keys)+len(args) > maxScriptStrings {
		panic("redis: a script call with more than maxScriptStrings keys and arguments")
	}
	o := &scriptOp{}
	o.strs[0] = script.Hash()
	n := 1 + copy(o.strs[1:], keys)
	n += copy(o.strs[n:], args)
	argv := append(o.argv[:0], "evalsha", &o.strs[0], len(keys))
	for i := 1; i < n; i++ {
		argv = append(argv, &o.strs[i])
	}
	o.op = op{cmd: goredis.NewCmd(ctx, argv...), key: keys[0], script: script, keys: o.strs[1 : 1+len(keys)], args: argv[3+len(keys):]}
	return o
}

func (b *batcher) work() {
	defer b.wg.Done()
	batch := make([]*op, 0, b.max)
	for {
		batch = batch[:0]
		select {
		case o := <-b.ops:
			batch = append(batch, o)
		case <-b.stop:
			b.drain()
			return
		}
		batch = b.take(batch)
		if len(batch) < lingerBelow && b.waiting.Load() > int64(len(batch)) {
			batch = b.linger(batch)
		}
		b.send(batch)
	}
}

// take adds what is queued now to batch, up to the maximum.
func (b *batcher) take(batch []*op) []*op {
	for len(batch) < b.max {
		select {
		case o := <-b.ops:
			batch = append(batch, o)
		default:
			return batch
		}
	}
	return batch
}

// linger adds to batch what is queued within lingerFor, and returns as soon
// as it holds lingerBelow commands or a yield finds the processor idle. It
// yields rather than sleeps: a sleep that short is rounded up to the
// kernel's timer slack and the runtime's netpoll granularity (about a
// millisecond on an idle Linux machine, twenty times lingerFor).
func (b *batcher) linger(batch []*op) []*op {
	b.lingers.Add(1)
	until := time.Now().Add(lingerFor)
	for {
		before := time.Now()
		runtime.Gosched()
		now := time.Now()
		batch = b.take(batch)
		if len(batch) >= lingerBelow || len(batch) == b.max || !now.Before(until) || now.Sub(before) < idleYield {
			return batch
		}
	}
}

// drain answers what is still queued at Close.
func (b *batcher) drain() {
	for {
		select {
		case o := <-b.ops:
			o.cmd.SetErr(errStoreClosed)
			close(o.done)
		default:
			return
		}
	}
}

// send runs the batch. On a cluster it is split by primary, one pipeline
// each, sent on their own: go-redis's cluster pipeline answers only once
// every node has, so a primary that is down or silent would otherwise hold
// the commands of the healthy ones, batched with its own, until the
// deadline. The worker does not wait for them either, so it goes on
// batching for the healthy primaries.
func (b *batcher) send(batch []*op) {
	if b.cluster == nil {
		if b.fence.wait > 0 {
			b.fence.send(b.client, batch)
		} else {
			b.sendPipeline(batch)
		}
		return
	}
	for node, group := range byPrimary(b.client, batch) {
		b.wg.Add(1)
		go func() {
			defer b.wg.Done()
			switch {
			case b.fence.wait == 0:
				b.sendPipeline(group)
			case node == nil:
				// A fence proves nothing for commands the cluster client
				// may route elsewhere.
				for _, o := range group {
					o.cmd.SetErr(errNoPrimary)
					close(o.done)
				}
			default:
				b.fence.send(node, group)
			}
		}()
	}
}

// errNoPrimary answers a fenced command whose slot has no known primary.
var errNoPrimary = errors.New("no primary known for the key's slot yet")

// byPrimary groups ops by the primary serving each op's key (primaryOf),
// in fresh slices (the batcher's worker reuses its batch). Ops whose primary
// is unknown (no slot map yet) form a group of their own, under nil.
func byPrimary(client goredis.UniversalClient, ops []*op) map[goredis.Cmdable][]*op {
	groups := make(map[goredis.Cmdable][]*op, 3)
	for _, o := range ops {
		node, _ := primaryOf(o.ctx, client, o.key)
		groups[node] = append(groups[node], o)
	}
	return groups
}

// primaryOf is the client that reaches the primary serving key: in a
// cluster, that slot's primary's own client (a cluster pipeline would route
// a keyless WAIT to any node); otherwise client itself, whose connections
// all go to the one primary. The error (no slot map yet) comes with a nil
// client, not a typed nil.
func primaryOf(ctx context.Context, client goredis.UniversalClient, key string) (goredis.Cmdable, error) {
	if c, ok := client.(*goredis.ClusterClient); ok {
		node, err := c.MasterForKey(ctx, key)
		if err != nil {
			return nil, err
		}
		return node, nil
	}
	return client, nil
}

// callersDeadline is when a pipeline sent for several callers may give up:
// it waits while any caller may, until the latest deadline (never past the
// client's read and write timeouts), and without one when a caller has none.
type callersDeadline struct {
	last      time.Time // the latest caller deadline
	unbounded bool      // some caller has none
}

func (d *callersDeadline) add(ctx context.Context) {
	if t, ok := ctx.Deadline(); !ok {
		d.unbounded = true
	} else if t.After(d.last) {
		d.last = t
	}
}

// context is the pipeline's context; cancel it once the pipeline is done.
func (d *callersDeadline) context() (context.Context, context.CancelFunc) {
	if d.unbounded {
		return context.Background(), func() {}
	}
	return context.WithDeadline(context.Background(), d.last)
}

// sendPipeline runs one pipeline of the ops whose callers still wait.
func (b *batcher) sendPipeline(batch []*op) {
	pipe := b.client.Pipeline()
	n := 0
	var deadline callersDeadline
	for _, o := range batch {
		if err := o.ctx.Err(); err != nil {
			o.cmd.SetErr(err)
			continue
		}
		_ = pipe.Process(o.ctx, o.cmd)
		n++
		deadline.add(o.ctx)
	}
	if n > 0 {
		// Each command's own error is in the command.
		ctx, cancel := deadline.context()
		_, _ = pipe.Exec(ctx)
		cancel()
	}
	for _, o := range batch {
		b.rerun(o.ctx, o)
		close(o.done)
	}
}

// rerun runs o's script again alone, with go-redis's EVALSHA then EVAL
// fallback, when the server did not know it.
func (b *batcher) rerun(ctx context.Context, o *op) {
	if o.script != nil && isNoScript(o.cmd.Err()) && ctx.Err() == nil {
		o.cmd = o.script.Run(ctx, b.client, o.keys, o.args...)
	}
}

func isNoScript(err error) bool {
	return err != nil && strings.HasPrefix(err.Error(), "NOSCRIPT")
}
