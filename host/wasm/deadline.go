package wasm

import (
	"context"
	"sync/atomic"
	"time"
)

// callContext is an instance's context for its phase calls, made once and
// reused: it ends at the call's deadline (the plugin's timeout, or the
// request's deadline if sooner) and carries the request's values, without
// the allocations of a context.WithTimeout per call. wazero's deadline
// enforcement watches its Done channel.
//
// A cancellation of the request that is not its deadline is not seen during
// the call, which the plugin's timeout bounds anyway; a request already done
// never reaches an instance (acquire). Once its timer has fired the context
// stays done, so the instance is discarded after that call.
type callContext struct {
	parent   context.Context
	deadline time.Time
	timer    *time.Timer
	done     chan struct{}
	expired  atomic.Bool
	tokens   tokenCall // the authorize call's credential, for token_lookup
	record   []byte    // token_lookup's encoding buffer, reused across calls
	kvCalls  int       // KV host calls made in this call (abi.KVBudget)
	opa      *instance // the instance, for an OPA policy's builtins; else nil
	// expire, when not nil, is called once the deadline has passed: the
	// instance's runner (runner.go) abandons its call.
	expire func()
}

// recordBufKey reaches a call's token record buffer through its context.
type recordBufKey struct{}

// newCallContext returns a callContext for an instance's calls; expire may
// be nil.
func newCallContext(expire func()) *callContext {
	c := &callContext{done: make(chan struct{}), expire: expire}
	c.timer = time.AfterFunc(time.Hour, func() {
		c.expired.Store(true)
		close(c.done)
		if c.expire != nil {
			c.expire()
		}
	})
	c.timer.Stop()
	return c
}

// begin starts a call under parent with at most timeout.
func (c *callContext) begin(parent context.Context, timeout time.Duration) context.Context {
	c.parent = parent
	c.kvCalls = 0
	c.deadline = time.Now().Add(timeout)
	if d, ok := parent.Deadline(); ok && d.Before(c.deadline) {
		c.deadline = d
	}
	c.timer.Reset(time.Until(c.deadline))
	return c
}

// end ends the call. It reports false when the deadline fired: the context
// is spent and its instance must be discarded.
func (c *callContext) end() bool {
	stopped := c.timer.Stop()
	c.parent = nil
	c.tokens = tokenCall{} // drop the token record: the instance outlives the request
	return stopped && !c.expired.Load()
}

// stop releases the timer of a discarded instance.
func (c *callContext) stop() { c.timer.Stop() }

func (c *callContext) Deadline() (time.Time, bool) { return c.deadline, true }

func (c *callContext) Done() <-chan struct{} { return c.done }

func (c *callContext) Err() error {
	if c.expired.Load() {
		return context.DeadlineExceeded
	}
	return nil
}

func (c *callContext) Value(key any) any {
	switch key.(type) {
	case tokenCallKey:
		return &c.tokens
	case recordBufKey:
		return &c.record
	case kvCallsKey:
		return &c.kvCalls
	}
	if p := c.parent; p != nil {
		return p.Value(key)
	}
	return nil
}
