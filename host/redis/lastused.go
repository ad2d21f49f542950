package redis

import (
	"context"
	_ "embed"
	"encoding/hex"
	"fmt"
	"log/slog"
	"sync"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/plantgate/plantgate/host"
)

var (
	//go:embed touch_token.lua
	touchTokenLua    string
	touchTokenScript = goredis.NewScript(touchTokenLua)
)

// TouchToken records at as the last use of the token whose digest is
// digest. A token that no longer exists is left alone.
func (s *Store) TouchToken(ctx context.Context, digest [32]byte, at time.Time) error {
	sel := selector(digest)
	err := touchTokenScript.Run(ctx, s.client, []string{s.tokenKey(sel)}, hex.EncodeToString(digest[:]), unixMilli(at)).Err()
	if err != nil {
		return storeError("touch token", err)
	}
	return nil
}

// TokenLookup is what TokenUsage wraps: host.Store has it.
type TokenLookup interface {
	Token(ctx context.Context, digest [32]byte) (host.Token, error)
}

// TokenUsage answers token lookups from a TokenLookup and records, off the
// request path, when an active token (not revoked, not expired) was looked
// up: at most once per interval per token, so a busy token costs one write
// a minute rather than one per request. Writes that cannot keep up are
// dropped, never waited for.
//
// A lookup of an active token is taken as a use: the bundled bearer-auth
// plugin authorizes with every active token it finds.
type TokenUsage struct {
	lookup   TokenLookup
	store    *Store
	interval time.Duration
	log      *slog.Logger
	now      func() time.Time

	mu     sync.Mutex
	last   map[[32]byte]time.Time
	closed bool
	queue  chan touch
	done   chan struct{}   // closed when the writer has stopped
	stop   context.Context // ended by Close at its deadline
	cancel context.CancelFunc
}

type touch struct {
	digest [32]byte
	at     time.Time
}

// DefaultUsageInterval is how often, at most, TokenUsage records one
// token's use.
const DefaultUsageInterval = time.Minute

// NewTokenUsage returns a TokenUsage that answers from lookup and records
// in store every interval at most (DefaultUsageInterval when 0). Close
// stops it, within the caller's deadline.
func NewTokenUsage(lookup TokenLookup, store *Store, interval time.Duration, log *slog.Logger) *TokenUsage {
	if interval <= 0 {
		interval = DefaultUsageInterval
	}
	if log == nil {
		log = slog.Default()
	}
	u := &TokenUsage{
		lookup: lookup, store: store, interval: interval, log: log, now: time.Now,
		last: map[[32]byte]time.Time{}, queue: make(chan touch, 256), done: make(chan struct{}),
	}
	u.stop, u.cancel = context.WithCancel(context.Background())
	go u.run()
	return u
}

// Token answers a lookup and notes the use of an active token.
func (u *TokenUsage) Token(ctx context.Context, digest [32]byte) (host.Token, error) {
	t, err := u.lookup.Token(ctx, digest)
	if err == nil && !t.Revoked && (t.Expires.IsZero() || u.now().Before(t.Expires)) {
		u.note(digest)
	}
	return t, err
}

// TokenStamped is Token with the stamp of the answer, when the lookup
// behind gives stamps (tokencache.Cache.TokenStamped); zero otherwise, so
// nothing is kept from the answer.
func (u *TokenUsage) TokenStamped(ctx context.Context, digest [32]byte) (host.Token, time.Time, error) {
	s, ok := u.lookup.(interface {
		TokenStamped(context.Context, [32]byte) (host.Token, time.Time, error)
	})
	if !ok {
		t, err := u.Token(ctx, digest)
		return t, time.Time{}, err
	}
	t, stamp, err := s.TokenStamped(ctx, digest)
	if err == nil && !t.Revoked && (t.Expires.IsZero() || u.now().Before(t.Expires)) {
		u.note(digest)
	}
	return t, stamp, err
}

func (u *TokenUsage) note(digest [32]byte) {
	now := u.now()
	u.mu.Lock()
	defer u.mu.Unlock()
	if last, ok := u.last[digest]; u.closed || ok && now.Sub(last) < u.interval {
		return
	}
	select {
	case u.queue <- touch{digest, now}:
		u.last[digest] = now
	default: // the writer is behind: this use is recorded on a later one
	}
}

func (u *TokenUsage) run() {
	defer close(u.done)
	for t := range u.queue {
		if u.stop.Err() != nil {
			continue // Close's deadline has passed: drop what is left
		}
		ctx, cancel := context.WithTimeout(u.stop, 2*time.Second)
		if err := u.store.TouchToken(ctx, t.digest, t.at); err != nil && u.stop.Err() == nil {
			u.log.Warn("could not record a token's last use", "err", err)
		}
		cancel()
	}
}

// Close stops recording once the writes already queued are done, or when
// ctx ends (the shutdown deadline), whichever is first. At ctx's end the
// writes still queued are dropped and Close returns ctx's error at once;
// a write in flight ends at its own timeout, or sooner when the store is
// closed, as serve does next.
func (u *TokenUsage) Close(ctx context.Context) error {
	u.mu.Lock()
	if !u.closed {
		u.closed = true
		close(u.queue)
	}
	u.mu.Unlock()
	select {
	case <-u.done:
		return nil
	case <-ctx.Done():
		u.cancel()
		return fmt.Errorf("record token use: last-use writes still queued were dropped: %w", ctx.Err())
	}
}
