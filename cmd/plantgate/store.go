package main

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/plantgate/plantgate/host"
	plantshttp "github.com/plantgate/plantgate/host/http"
	"github.com/plantgate/plantgate/host/oidc"
	"github.com/plantgate/plantgate/host/redis"
)

func (m *Main) openStore(ctx context.Context) error {
	log := m.Logger
	if m.RedisURL == "" {
		if m.WaitReplicas > 0 {
			return errors.New("--redis-wait-replicas needs --redis-url: the embedded store has no replicas")
		}
		st, closeFn, err := redis.Embedded(ctx, redis.Options{})
		if err != nil {
			return fmt.Errorf("start embedded store: %w", err)
		}
		m.store, m.closeStore = st, closeFn
		log.Warn("NOT DURABLE: no --redis-url given, plants and tokens live in an embedded in-memory store and are lost when the process exits")
		return nil
	}
	st, err := redis.Dial(m.RedisURL, redis.Options{WaitReplicas: m.WaitReplicas})
	if err != nil {
		return fmt.Errorf("open store: %w", err)
	}
	m.store = st
	log.Info("store", "mode", st.Mode(), "addr", st.Addr(), "wait_replicas", m.WaitReplicas)
	return nil
}

// storeUp runs what needs the store at start-up: log its persistence and
// ensure the bootstrap token. When Redis is down the gateway starts anyway
// (readiness 503, creates 503 + Retry-After) and a goroutine retries until
// Redis answers or the gateway stops, logging loudly meanwhile.
func (m *Main) storeUp(ctx context.Context) error {
	if m.BootstrapToken != "" {
		if _, err := plantshttp.ParseBearer([][]byte{[]byte("Bearer " + m.BootstrapToken)}); err != nil {
			return errBadBootstrap
		}
		if m.OIDC.Issuer != "" && oidc.IsJWT(m.BootstrapToken) {
			return errDottedBootstrap
		}
	}
	if m.RedisURL == "" {
		return m.afterStore(ctx)
	}
	err := m.afterStore(ctx)
	if err == nil || errors.Is(err, errBadBootstrap) {
		return err
	}
	m.Logger.Error("STORE UNREACHABLE at start-up: serving 503 (readiness and creates) until it answers; retrying every second",
		"addr", m.store.Addr(), "err", err)
	m.pending.Store(true)
	bg, cancel := context.WithCancel(context.Background())
	m.stopRetry = cancel
	m.retried = make(chan struct{})
	go func() {
		defer close(m.retried)
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		for attempt := 1; ; attempt++ {
			select {
			case <-bg.Done():
				return
			case <-tick.C:
			}
			err := m.afterStore(bg)
			if err == nil {
				m.pending.Store(false)
				m.Logger.Info("store reachable: ready", "addr", m.store.Addr(), "after_attempts", attempt)
				return
			}
			if attempt%10 == 0 {
				m.Logger.Error("STORE STILL UNREACHABLE: serving 503", "addr", m.store.Addr(), "attempts", attempt, "err", err)
			}
		}
	}()
	return nil
}

var errBadBootstrap = errors.New("--bootstrap-token must be a bearer token: letters, digits and -._~+/ followed by optional =")

// afterStore pings the store, logs its persistence and ensures the
// bootstrap token.
func (m *Main) afterStore(ctx context.Context) error {
	if err := m.store.Ping(ctx); err != nil {
		return err
	}
	if m.RedisURL != "" {
		if p, err := m.store.Persistence(ctx); err != nil {
			m.Logger.Warn("store persistence unknown", "err", err)
		} else {
			m.Logger.Info("store", "persistence", p)
		}
	}
	if m.BootstrapToken != "" {
		if err := m.bootstrap(ctx); err != nil {
			return err
		}
	}
	return m.startWebhooks(ctx)
}

// bootstrap ensures the bootstrap token exists with every scope, and is the
// only active token named "bootstrap": a new one revokes the older ones, so
// restarts with a fresh token (make run, containers) do not pile up valid
// tokens. A revoked one stays revoked. Only its digest is stored; the token
// itself is never logged.
func (m *Main) bootstrap(ctx context.Context) error {
	if _, err := plantshttp.ParseBearer([][]byte{[]byte("Bearer " + m.BootstrapToken)}); err != nil {
		return errBadBootstrap
	}
	if len(m.BootstrapToken) < 16 {
		m.Logger.Warn("the bootstrap token is shorter than 16 characters; use it for tests and demos only")
	}
	t := host.Token{
		Digest:  sha256.Sum256([]byte(m.BootstrapToken)),
		Name:    bootstrapName,
		Scopes:  host.AllScopes(),
		Created: time.Now(),
	}
	res, err := m.store.BootstrapToken(ctx, t)
	if err != nil {
		return fmt.Errorf("store bootstrap token: %w", err)
	}
	if res.Revoked {
		// Serving on is right: other tokens still work, and the operator
		// revoked this one on purpose.
		m.Logger.Warn("the bootstrap token was revoked; not restored: mint another (plantgate token create) or start with a new --bootstrap-token")
		return nil
	}
	m.Logger.Info("bootstrap token ensured: the only active token of its name; older ones revoked",
		"name", t.Name, "scopes", strings.Join(t.Scopes, " "), "created", res.Created, "superseded", res.Superseded)
	return nil
}

// bootstrapName names the bootstrap token; `token create` refuses it, since
// the next start would revoke such a token.
const bootstrapName = "bootstrap"
