package redis

import (
	"context"
	_ "embed"
	"encoding/hex"
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
		return storeError("touch token "+sel, err)
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
	done   chan struct{}
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
// stops it.
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
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		if err := u.store.TouchToken(ctx, t.digest, t.at); err != nil {
			u.log.Warn("could not record a token's last use", "err", err)
		}
		cancel()
	}
}

// Close stops recording once the writes already queued are done.
func (u *TokenUsage) Close() {
	u.mu.Lock()
	if !u.closed {
		u.closed = true
		close(u.queue)
	}
	u.mu.Unlock()
	<-u.done
}
