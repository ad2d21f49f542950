package fleet

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/plantgate/plantgate/host/redis"
	"github.com/plantgate/plantgate/host/wasm"
)

const (
	// PollInterval is how often a Member reads the chain's version.
	PollInterval = 250 * time.Millisecond
	// BeatInterval is how often a Member writes its heartbeat, and
	// BeatTTL how long one lives: a gateway missing a few beats in a row
	// drops out of the fleet.
	BeatInterval = time.Second
	BeatTTL      = 5 * time.Second
	// retryRefused is how long a Member waits before loading a version it
	// refused again: the cause may have been the store, not the chain.
	retryRefused = 5 * time.Second
)

// Member keeps a gateway's Reloader (built on a StoreSource) on the
// fleet's chain and reports the gateway in heartbeats.
type Member struct {
	store   *redis.Store
	r       *wasm.Reloader
	log     *slog.Logger
	id      string
	host    string
	addr    string
	started time.Time

	mu        sync.Mutex
	refused   uint64 // the store's version last refused; 0: none since the last load
	refusal   string
	refusedAt time.Time
}

// NewMember makes a Member for the gateway serving on addr.
func NewMember(store *redis.Store, r *wasm.Reloader, addr string, log *slog.Logger) *Member {
	host, _ := os.Hostname()
	var b [6]byte
	_, _ = rand.Read(b[:])
	return &Member{store: store, r: r, log: log, id: host + "-" + hex.EncodeToString(b[:]), host: host, addr: addr, started: time.Now()}
}

// ID is the gateway's id in the fleet.
func (m *Member) ID() string { return m.id }

// Run polls and beats until ctx is done, then leaves the fleet.
func (m *Member) Run(ctx context.Context) {
	poll := time.NewTicker(PollInterval)
	defer poll.Stop()
	beat := time.NewTicker(BeatInterval)
	defer beat.Stop()
	m.beat(ctx)
	for {
		select {
		case <-ctx.Done():
			lctx, cancel := context.WithTimeout(context.Background(), time.Second)
			defer cancel()
			if err := m.store.Leave(lctx, m.id); err != nil {
				m.log.Warn("leaving the fleet", "id", m.id, "err", err)
			}
			return
		case <-poll.C:
			if m.follow(ctx) {
				m.beat(ctx) // say at once that this gateway moved
			}
		case <-beat.C:
			m.beat(ctx)
		}
	}
}

// follow reloads when the store's version is not the one served; it
// reports whether it tried.
func (m *Member) follow(ctx context.Context) bool {
	v, err := m.store.PluginVersion(ctx)
	if err != nil {
		return false // the heartbeat cannot be written either; the next poll retries
	}
	st, _ := m.r.Snapshot()
	m.mu.Lock()
	skip := v == st.Version || (v == m.refused && time.Since(m.refusedAt) < retryRefused)
	m.mu.Unlock()
	if skip {
		return false
	}
	_, err = m.r.Reload(ctx) // logs the outcome
	m.mu.Lock()
	defer m.mu.Unlock()
	if err != nil {
		m.refused, m.refusal, m.refusedAt = v, err.Error(), time.Now()
	} else {
		m.refused, m.refusal = 0, ""
	}
	return true
}

func (m *Member) beat(ctx context.Context) {
	st, _ := m.r.Snapshot()
	hb := redis.Heartbeat{
		ID: m.id, Host: m.host, Addr: m.addr, Started: m.started, Beat: time.Now(),
		Version: st.Version, Digest: st.Digest, State: StateServing,
	}
	m.mu.Lock()
	if m.refused != 0 && m.refused != st.Version {
		hb.State, hb.Refused, hb.Error = StateRefused, m.refused, m.refusal
	}
	m.mu.Unlock()
	if err := m.store.Beat(ctx, hb, BeatTTL); err != nil && ctx.Err() == nil {
		m.log.Debug("heartbeat not written", "err", err)
	}
}

// Heartbeat states.
const (
	StateServing = "serving" // the newest chain this gateway has seen
	StateRefused = "refused" // the newest chain failed here; an older one serves
)
