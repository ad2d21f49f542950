package main

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/urfave/cli/v3"

	"github.com/plantgate/plantgate/host"
	plantshttp "github.com/plantgate/plantgate/host/http"
	"github.com/plantgate/plantgate/host/metrics"
	"github.com/plantgate/plantgate/host/redis"
	"github.com/plantgate/plantgate/host/tokencache"
	"github.com/plantgate/plantgate/host/wasm"
	"github.com/plantgate/plantgate/host/webhook"
)

func serveCommand() *cli.Command {
	return &cli.Command{
		Name:        "serve",
		Usage:       "serve the Plant Store API through the plugin chain",
		Description: secretsHelp,
		Flags: append([]cli.Flag{
			&cli.StringFlag{Name: "listen", Value: "127.0.0.1:8080", Usage: "address to serve HTTP on", Sources: env("LISTEN")},
			redisURLFlag,
			redisPasswordFileFlag,
			&cli.StringFlag{Name: "plugins", Usage: "drop-in directory of NN-name.wasm policy plugins (and NN-name.json configs), run in file-name order", Sources: env("PLUGINS")},
			&cli.StringFlag{Name: "bootstrap-token", Usage: "ensure this bearer token exists with every scope at start-up, as the one active token named bootstrap (tests, demos, containers); prefer the environment variable or --bootstrap-token-file", Sources: env("BOOTSTRAP_TOKEN")},
			bootstrapTokenFileFlag,
			&cli.BoolFlag{Name: "insecure-no-auth", Usage: "serve without any authorize plugin: every request is allowed through", Sources: env("INSECURE_NO_AUTH")},
			&cli.IntFlag{Name: "body-limit", Value: 1 << 20, Usage: "largest request body in bytes", Sources: env("BODY_LIMIT")},
			&cli.DurationFlag{Name: "request-timeout", Value: 5 * time.Second, Usage: "deadline for the plugins and the store on one request", Sources: env("REQUEST_TIMEOUT")},
			&cli.DurationFlag{Name: "shutdown-timeout", Value: 15 * time.Second, Usage: "how long in-flight requests may take to finish on SIGTERM", Sources: env("SHUTDOWN_TIMEOUT")},
			&cli.StringFlag{Name: "cache-dir", Usage: "plugin compilation cache (default: the user cache directory's plantgate folder; \"off\" disables it)", Sources: env("CACHE_DIR")},
			&cli.StringFlag{Name: "log-level", Value: "info", Usage: "debug, info, warn or error", Sources: env("LOG_LEVEL")},
			&cli.StringFlag{Name: "log-format", Value: "text", Usage: "text or json", Sources: env("LOG_FORMAT")},
			&cli.BoolFlag{Name: "access-log", Value: true, Usage: "log one line per request", Sources: env("ACCESS_LOG")},
			&cli.DurationFlag{Name: "stats-interval", Usage: "log each plugin's instances, calls and guest memory this often (0: never)", Sources: env("STATS_INTERVAL")},
			&cli.StringFlag{Name: "admin-listen", Usage: "address of the admin listener serving the read-only console at /, /metrics, /healthz and /readyz, e.g. 127.0.0.1:9090; empty: off. Keep it off the public network", Sources: env("ADMIN_LISTEN")},
			&cli.DurationFlag{Name: "token-cache-ttl", Value: time.Second, Usage: "keep each token the store found this long, so a busy token is read about once per TTL; a revoked token may still pass for up to this long (0: read the store on every request)", Sources: env("TOKEN_CACHE_TTL")},
			&cli.BoolFlag{Name: "pprof", Usage: "also serve Go's profiler (/debug/pprof/) on the admin listener; needs --admin-listen", Sources: env("PPROF")},
			&cli.BoolFlag{Name: "watch", Value: true, Usage: "reload the plugin chain when the plugins directory changes (SIGHUP reloads it too)", Sources: env("WATCH")},
		}, webhookServeFlags()...),
		Action: func(ctx context.Context, cmd *cli.Command) error {
			logger, err := newLogger(cmd.String("log-level"), cmd.String("log-format"))
			if err != nil {
				return err
			}
			redisURL, err := redisURL(cmd)
			if err != nil {
				return err
			}
			bootstrap, err := bootstrapToken(cmd)
			if err != nil {
				return err
			}
			m := &Main{
				Listen:          cmd.String("listen"),
				RedisURL:        redisURL,
				PluginsDir:      cmd.String("plugins"),
				BootstrapToken:  bootstrap,
				InsecureNoAuth:  cmd.Bool("insecure-no-auth"),
				BodyLimit:       int(cmd.Int("body-limit")),
				RequestTimeout:  cmd.Duration("request-timeout"),
				ShutdownTimeout: cmd.Duration("shutdown-timeout"),
				CacheDir:        cmd.String("cache-dir"),
				AccessLog:       cmd.Bool("access-log"),
				StatsInterval:   cmd.Duration("stats-interval"),
				AdminListen:     cmd.String("admin-listen"),
				Pprof:           cmd.Bool("pprof"),
				TokenCacheTTL:   cmd.Duration("token-cache-ttl"),
				Watch:           cmd.Bool("watch"),
				Webhooks:        webhookOptions(cmd),
				Logger:          logger,
			}
			// Before Run: a SIGHUP must never fall back to its default,
			// which ends the process.
			hup := make(chan os.Signal, 1)
			signal.Notify(hup, syscall.SIGHUP)
			defer signal.Stop(hup)
			if err := m.Run(ctx); err != nil {
				m.Close()
				return err
			}
			if err := serveUntil(ctx, m, hup); err != nil {
				// Exiting beats staying half-alive: a supervisor restarts
				// a process that exits, not one that only stopped accepting.
				logger.Error("a listener stopped by itself: shutting down, exit 1", "err", err)
				m.Close()
				return &exitError{code: 1, err: err}
			}
			logger.Info("shutting down", "timeout", m.ShutdownTimeout)
			return m.Close()
		},
	}
}

func newLogger(level, format string) (*slog.Logger, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("--log-level %q: want debug, info, warn or error", level)
	}
	opts := &slog.HandlerOptions{Level: l}
	switch format {
	case "text":
		return slog.New(slog.NewTextHandler(os.Stderr, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(os.Stderr, opts)), nil
	}
	return nil, fmt.Errorf("--log-format %q: want text or json", format)
}

// Main is the running gateway: Run wires the store, the plugin chain and the
// HTTP server and starts serving; Close shuts them down in reverse order.
type Main struct {
	Listen          string
	RedisURL        string
	PluginsDir      string
	BootstrapToken  string
	InsecureNoAuth  bool
	BodyLimit       int
	RequestTimeout  time.Duration
	ShutdownTimeout time.Duration
	CacheDir        string
	AccessLog       bool
	StatsInterval   time.Duration // 0: no "plugin stats" log lines
	AdminListen     string        // "": no admin listener
	Pprof           bool          // serve /debug/pprof/ on the admin listener
	TokenCacheTTL   time.Duration // 0: every token lookup reads the store
	Watch           bool          // reload the chain when the plugins directory changes
	Webhooks        webhook.Options
	Logger          *slog.Logger

	store          *redis.Store
	closeStore     func()
	metrics        *metrics.Metrics
	observed       host.Store // store, measured
	usage          *redis.TokenUsage
	policy         host.Policy
	reloader       *wasm.Reloader // nil without a plugins directory
	stopWatch      context.CancelFunc
	watching       chan struct{}
	server         *plantshttp.Server
	served         chan error
	failed         chan error // a listener that stopped by itself (Failed)
	ln             net.Listener
	stopStats      chan struct{}
	addr           net.Addr
	admin          *adminServer
	stopping       atomic.Bool
	pending        atomic.Bool // start-up still waits for the store (storeUp)
	stopRetry      context.CancelFunc
	retried        chan struct{} // closed when storeUp's retries end
	deliverer      *webhook.Deliverer
	webhookMetrics *metrics.WebhookMetrics
}

// Addr is the address the server listens on, once Run has returned.
func (m *Main) Addr() net.Addr { return m.addr }

// Run starts the gateway and returns once it serves, or with the reason it
// cannot.
func (m *Main) Run(ctx context.Context) error {
	log := m.Logger
	if m.Pprof && m.AdminListen == "" {
		return errors.New("--pprof serves on the admin listener: set --admin-listen too")
	}
	if err := m.openStore(ctx); err != nil {
		return err
	}
	m.metrics = metrics.New()
	m.observed = m.metrics.Store(m.store)
	if err := m.storeUp(ctx); err != nil {
		return err
	}
	if err := m.loadPlugins(ctx); err != nil {
		return err
	}
	if m.InsecureNoAuth {
		log.Warn("INSECURE: serving without authorization (--insecure-no-auth); every request is let through the authorize phase")
	}
	srv, err := plantshttp.New(plantshttp.Config{
		Store:          m.observed,
		Policy:         m.policy,
		InsecureNoAuth: m.InsecureNoAuth,
		BodyLimit:      m.BodyLimit,
		RequestTimeout: m.RequestTimeout,
		Ready:          m.ready,
		Logger:         log,
		AccessLog:      m.AccessLog,
		Observe:        m.metrics.Request,
		CursorKey:      m.store.CursorKey,
	})
	if err != nil {
		if !m.policy.Authorizes() && !m.InsecureNoAuth {
			return m.noAuthorizeError()
		}
		return err
	}
	m.server = srv
	ln, err := net.Listen("tcp", m.Listen)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", m.Listen, err)
	}
	m.addr, m.ln = ln.Addr(), ln
	m.served = make(chan error, 1)
	m.failed = make(chan error, 2) // the HTTP and the admin listener
	go func() {
		err := srv.Serve(ln)
		m.served <- err
		m.listenerStopped("http", ln.Addr(), err)
	}()
	log.Info("serving", "addr", ln.Addr().String())
	if m.AdminListen != "" {
		if m.admin, err = m.serveAdmin(); err != nil {
			return err
		}
		log.Info("serving admin endpoints (console at /, /metrics, /healthz, /readyz)", "addr", m.admin.addr.String(), "pprof", m.Pprof)
	}
	if m.StatsInterval > 0 && m.reloader != nil {
		m.stopStats = make(chan struct{})
		go m.logStats(m.StatsInterval, m.stopStats)
	}
	return nil
}

// logStats logs one "plugin stats" line per plugin every interval: what a
// soak test reads to see whether guest memory stays flat.
func (m *Main) logStats(interval time.Duration, stop <-chan struct{}) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
		}
		m.reloader.Each(func(p wasm.PluginInfo, st wasm.Stats, memory int64) {
			m.Logger.Info("plugin stats", "plugin", p.Name, "instances", st.Live, "calls", st.Calls,
				"discarded", st.Discarded, "memory_bytes", memory)
		})
	}
}

func (m *Main) noAuthorizeError() error {
	return fmt.Errorf("no authorize plugin is loaded (plugins dir %q); refusing to serve unauthenticated traffic: add one (e.g. bin/plugins/10-bearer-auth.wasm) or pass --insecure-no-auth", m.PluginsDir)
}

func (m *Main) openStore(ctx context.Context) error {
	log := m.Logger
	if m.RedisURL == "" {
		st, closeFn, err := redis.Embedded(ctx, redis.Options{})
		if err != nil {
			return fmt.Errorf("start embedded store: %w", err)
		}
		m.store, m.closeStore = st, closeFn
		log.Warn("NOT DURABLE: no --redis-url given, plants and tokens live in an embedded in-memory store and are lost when the process exits")
		return nil
	}
	st, err := redis.Dial(m.RedisURL, redis.Options{})
	if err != nil {
		return fmt.Errorf("open store: %w", err)
	}
	m.store = st
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

func (m *Main) loadPlugins(ctx context.Context) error {
	// Lookups by plugins also record, at most once a minute per token and
	// off the request path, when a token was last used; cached answers
	// count as uses too.
	var lookup redis.TokenLookup = m.observed
	if m.TokenCacheTTL > 0 {
		cache := tokencache.New(m.observed, m.TokenCacheTTL, 0)
		m.metrics.TokenCache(cache.Stats)
		lookup = cache
	}
	m.usage = redis.NewTokenUsage(lookup, m.store, 0, m.Logger)
	opts := wasm.Options{Tokens: m.usage, Logger: m.Logger, CacheDir: m.cacheDir(), Observer: m.metrics}
	if m.PluginsDir == "" {
		m.policy = wasm.Empty()
		m.Logger.Warn("no --plugins directory: the policy chain is empty")
		return nil
	}
	start := time.Now()
	// Under --insecure-no-auth no credential is parsed, so an authorize
	// plugin would judge every request without one: refused at start and
	// at every reload, never silently half-applied.
	r, err := wasm.NewReloader(ctx, m.PluginsDir, opts, wasm.ReloadOptions{RequireAuthorize: !m.InsecureNoAuth, ForbidAuthorize: m.InsecureNoAuth})
	if errors.Is(err, wasm.ErrNoAuthorize) {
		return m.noAuthorizeError()
	}
	if errors.Is(err, wasm.ErrAuthorizeForbidden) {
		return fmt.Errorf("refusing to start: %w; remove it or --insecure-no-auth", err)
	}
	if err != nil {
		return fmt.Errorf("load plugins: %w", err)
	}
	m.reloader, m.policy = r, r
	m.metrics.SetPools(func() []metrics.Pool {
		infos, stats := r.Plugins(), r.Stats()
		pools := make([]metrics.Pool, 0, len(infos))
		for i, p := range infos {
			if i < len(stats) {
				pools = append(pools, metrics.Pool{Plugin: p.Name, Live: stats[i].Live, Size: p.Limits.Instances})
			}
		}
		return pools
	})
	for _, p := range r.Plugins() {
		m.Logger.Info("plugin loaded", "plugin", p.Name, "file", p.File, "phases", p.Phases)
	}
	m.Logger.Info("plugin chain ready", "plugins", len(r.Plugins()), "took", time.Since(start).Round(time.Millisecond))
	if m.Watch {
		wctx, cancel := context.WithCancel(context.Background())
		m.stopWatch, m.watching = cancel, make(chan struct{})
		go func() {
			defer close(m.watching)
			if err := r.Watch(wctx); err != nil {
				m.Logger.Error("not watching the plugins directory; reload with SIGHUP", "err", err)
			}
		}()
	}
	return nil
}

// Reload loads the plugins directory again (SIGHUP). The previous chain
// stays in force when the new one is refused; the error says why.
func (m *Main) Reload(ctx context.Context) error {
	if m.reloader == nil {
		return errors.New("no --plugins directory to reload")
	}
	_, err := m.reloader.Reload(ctx)
	return err
}

func (m *Main) cacheDir() string {
	switch m.CacheDir {
	case "off":
		return ""
	case "":
		dir, err := os.UserCacheDir()
		if err != nil {
			return ""
		}
		return dir + "/plantgate/wasm"
	}
	return m.CacheDir
}

func (m *Main) ready(context.Context) error {
	if m.stopping.Load() {
		return errors.New("shutting down")
	}
	if m.policy == nil {
		return errors.New("plugin chain not loaded")
	}
	if m.pending.Load() {
		return errors.New("start-up waits for the store")
	}
	return nil
}

// Close stops serving (in-flight requests finish within ShutdownTimeout),
// then closes the plugin chain and the store.
func (m *Main) Close() error {
	m.stopping.Store(true)
	if m.stopStats != nil {
		close(m.stopStats)
		m.stopStats = nil
	}
	timeout := m.ShutdownTimeout
	if timeout <= 0 {
		timeout = 15 * time.Second
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var errs []error
	if m.stopRetry != nil {
		m.stopRetry()
		<-m.retried
	}
	if m.stopWatch != nil {
		m.stopWatch()
		<-m.watching
	}
	if m.admin != nil {
		if err := m.admin.srv.Shutdown(ctx); err != nil {
			errs = append(errs, fmt.Errorf("shut down admin: %w", err))
		}
	}
	if m.served != nil { // serving started; a Run that failed before has no server goroutine
		if err := m.server.Shutdown(ctx); err != nil {
			errs = append(errs, fmt.Errorf("shut down http: %w", err))
		}
		// A Shutdown that lands before Serve has begun accepting does not stop
		// it; closing the listener does.
		m.ln.Close()
		select {
		case err := <-m.served:
			if err != nil && !errors.Is(err, net.ErrClosed) {
				errs = append(errs, fmt.Errorf("serve: %w", err))
			}
		case <-ctx.Done():
			errs = append(errs, fmt.Errorf("serve: still running after %s", timeout))
		}
	}
	if m.deliverer != nil {
		if err := m.deliverer.Close(ctx); err != nil {
			errs = append(errs, err)
		}
	}
	if m.reloader != nil {
		if err := m.reloader.Close(ctx); err != nil {
			errs = append(errs, fmt.Errorf("close plugins: %w", err))
		}
	}
	if m.usage != nil {
		if err := m.usage.Close(ctx); err != nil {
			errs = append(errs, err)
		}
	}
	if m.closeStore != nil {
		m.closeStore()
	} else if m.store != nil {
		if err := m.store.Close(); err != nil {
			errs = append(errs, fmt.Errorf("close store: %w", err))
		}
	}
	return errors.Join(errs...)
}
