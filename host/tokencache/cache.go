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
// The cache is bounded (Max entries); when it is full of live entries a new
// token is answered from the store and simply not kept, so a flood of
// valid tokens cannot grow the gateway's memory.
package tokencache

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

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
	max    int
	now    func() time.Time

	mu      sync.RWMutex
	entries map[[32]byte]entry

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
	return &Cache{lookup: lookup, ttl: ttl, max: max, now: time.Now, entries: make(map[[32]byte]entry)}
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
// revocation bound (the TTL). The stamp is zero when the answer was not
// kept (a full cache), so that nothing is kept from it.
func (c *Cache) TokenStamped(ctx context.Context, digest [32]byte) (host.Token, time.Time, error) {
	now := c.now()
	c.mu.RLock()
	e, ok := c.entries[digest]
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
			if cur, still := c.entries[digest]; still && cur.expires == stale.expires {
				delete(c.entries, digest)
			}
			c.mu.Unlock()
		}
		return entry{tok: tok}, err
	}
	e := entry{tok: tok, expires: now.Add(c.ttl)}
	if !c.put(digest, e) {
		e.expires = time.Time{} // not kept: no stamp
	}
	return e, nil
}

// put keeps e unless the cache is full of entries still live, and
// reports whether it did.
func (c *Cache) put(digest [32]byte, e entry) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.entries[digest]; !ok && len(c.entries) >= c.max {
		now := c.now()
		for d, old := range c.entries {
			if !now.Before(old.expires) {
				delete(c.entries, d)
			}
		}
		if len(c.entries) >= c.max {
			return false
		}
	}
	c.entries[digest] = e
	return true
}

// Stats returns how many lookups the cache answered and how many went to
// the store, since New.
func (c *Cache) Stats() (hits, misses uint64) { return c.hits.Load(), c.misses.Load() }

// Len is the number of tokens kept, live or stale.
func (c *Cache) Len() int {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return len(c.entries)
}
