// Package tokencache keeps the answers of token lookups for a short time,
// so that a busy client's bearer token is read from the store about once
// per TTL instead of once per request.
//
// Only found tokens are kept, revoked and expired ones included (the
// plugin decides on those flags, and a revoked token stays revoked). A
// "not found" answer and a store error are never kept: a token created a
// moment ago works on its first request, and an outage ends as soon as the
// store answers. The price is the TTL: a token revoked in the store is
// still taken as valid for up to one TTL by a gateway that looked it up
// just before. That is why the TTL is short (serve's --token-cache-ttl,
// default 1 s) and can be turned off (0).
//
// Lookups that miss on one token while its store read is under way wait
// for that read rather than making their own (golang.org/x/sync's
// singleflight): a burst of requests with a token whose entry just went
// stale costs one store read, not one each. The read's answer, error
// included, goes to those waiting callers only; the next lookup after it
// reads the store again.
//
// The cache is bounded (Max entries), so a flood of valid tokens cannot
// grow the gateway's memory: when it is full a new token takes the place
// of the one kept longest, in O(1) (golang-lru's simplelru), so a busy
// client arriving after the cache filled is read from the store once per
// TTL, not on every request. Every entry lives for the same TTL from its
// store read, so the one kept longest is also the first to go stale.
package tokencache

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/golang-lru/v2/simplelru"
	"golang.org/x/sync/singleflight"

	"github.com/plantgate/plantgate/host"
)

// Lookup is the store's token lookup, which the cache answers for.
type Lookup interface {
	Token(ctx context.Context, digest [32]byte) (host.Token, error)
}

// DefaultMax bounds a cache made with max 0.
const DefaultMax = 100_000

// Cache answers Token from what the store said less than ttl ago.
type Cache struct {
	lookup Lookup
	ttl    time.Duration
	now    func() time.Time

	// Peek only reads simplelru's map, so hits share mu's read lock; Add
	// and Remove move its list and need the write lock.
	mu      sync.RWMutex
	entries *simplelru.LRU[[32]byte, entry] // by digest, oldest store read first out
	last    time.Time                       // the latest stamp given

	reads        singleflight.Group // store reads under way, by digest
	hits, misses atomic.Uint64
}

type entry struct {
	tok     host.Token
	expires time.Time // when the entry stops being used (fetched + ttl)
}

// New returns a cache of at most max tokens (DefaultMax when 0), each kept
// for ttl, in front of lookup.
func New(lookup Lookup, ttl time.Duration, max int) *Cache {
	if max <= 0 {
		max = DefaultMax
	}
	entries, err := simplelru.NewLRU[[32]byte, entry](max, nil)
	if err != nil {
		panic(err) // only for a size below 1, excluded above
	}
	return &Cache{lookup: lookup, ttl: ttl, now: time.Now, entries: entries}
}

// Token returns the token whose digest is digest: from the cache while the
// entry is younger than the TTL, else from the store. Concurrent misses on
// one token share one store read; each caller waits for it only until its
// own ctx ends (then it gets ErrStoreUnavailable wrapping ctx's error), and
// one caller giving up neither ends the read nor changes what the others
// get. The shared read is detached from the callers' contexts, so the
// Lookup must bound its own calls (redis.Store does, with its timeouts).
func (c *Cache) Token(ctx context.Context, digest [32]byte) (host.Token, error) {
	tok, _, err := c.TokenStamped(ctx, digest)
	return tok, err
}

// TokenStamped is Token that also returns the answer's stamp: the moment
// its entry stops being used, which identifies the one store read the
// answer comes from. Two answers with the same stamp come from the same
// read. A decision made from an answer may be kept for as long as a later
// lookup returns the same stamp: that keeps it within the cache's own
// revocation bound (the TTL). A found token's answer is always kept, so
// it always has a stamp, later than any stamp given before; an error's is
// zero.
func (c *Cache) TokenStamped(ctx context.Context, digest [32]byte) (host.Token, time.Time, error) {
	now := c.now()
	c.mu.RLock()
	e, ok := c.entries.Peek(digest)
	c.mu.RUnlock()
	if ok && now.Before(e.expires) {
		c.hits.Add(1)
		return e.tok, e.expires, nil
	}
	return c.miss(ctx, digest, now, e, ok)
}

// miss waits for the shared store read. Apart from Token, so that the
// read's closure, which moves what it captures to the heap, costs only a
// miss: captured in Token, the digest and the entry cost every hit two
// allocations.
func (c *Cache) miss(ctx context.Context, digest [32]byte, now time.Time, e entry, ok bool) (host.Token, time.Time, error) {
	read := c.reads.DoChan(string(digest[:]), func() (any, error) {
		return c.read(context.WithoutCancel(ctx), digest, now, e, ok)
	})
	// Counted once this caller waits for the read: a test that sees n
	// misses knows n callers share it.
	c.misses.Add(1)
	select {
	case r := <-read:
		got, _ := r.Val.(entry)
		return got.tok, got.expires, r.Err
	case <-ctx.Done():
		return host.Token{}, time.Time{}, fmt.Errorf("token lookup: %w",
			errors.Join(host.Errorf(host.ErrStoreUnavailable, "token store did not answer in time"), ctx.Err()))
	}
}

// read asks the store and keeps a found token; stale is the entry the
// caller saw, if any (had). It runs on a goroutine of its own, where a
// panic would end the process (singleflight re-raises it there): it
// becomes an internal error with its stack instead, like a panic on the
// request path.
func (c *Cache) read(ctx context.Context, digest [32]byte, now time.Time, stale entry, had bool) (got entry, err error) {
	defer func() {
		if r := recover(); r != nil {
			got, err = entry{}, errors.Join(host.Errorf(host.ErrInternal, "token lookup failed"),
				fmt.Errorf("token lookup panicked: %v\n%s", r, debug.Stack()))
		}
	}()
	tok, err := c.lookup.Token(ctx, digest)
	if err != nil {
		if had {
			c.mu.Lock()
			// Stale: gone from the store, or the store is down. Either way
			// the old answer must not come back.
			if cur, still := c.entries.Peek(digest); still && cur.expires == stale.expires {
				c.entries.Remove(digest)
			}
			c.mu.Unlock()
		}
		return entry{tok: tok}, err
	}
	e := entry{tok: tok, expires: now.Add(c.ttl)}
	c.mu.Lock()
	// Each read's stamp is later than every one before, so that it names
	// this read alone even when an evicted entry is read again within one
	// tick of the clock (a coarse or a test's clock).
	if !e.expires.After(c.last) {
		e.expires = c.last.Add(time.Nanosecond)
	}
	c.last = e.expires
	c.entries.Add(digest, e) // full: in place of the one kept longest
	c.mu.Unlock()
	return e, nil
}

// Stats returns how many lookups the cache answered and how many went to
// the store, since New.
func (c *Cache) Stats() (hits, misses uint64) { return c.hits.Load(), c.misses.Load() }

// Len is the number of tokens kept, live or stale.
func (c *Cache) Len() int {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.entries.Len()
}
