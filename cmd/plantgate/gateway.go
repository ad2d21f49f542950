package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/plantgate/plantgate/host"
	"github.com/plantgate/plantgate/host/decisionlog"
	"github.com/plantgate/plantgate/host/fleet"
	plantshttp "github.com/plantgate/plantgate/host/http"
	"github.com/plantgate/plantgate/host/metrics"
	"github.com/plantgate/plantgate/host/oidc"
	"github.com/plantgate/plantgate/host/redis"
	"github.com/plantgate/plantgate/host/telemetry"
	"github.com/plantgate/plantgate/host/tlscert"
	"github.com/plantgate/plantgate/host/wasm"
	"github.com/plantgate/plantgate/host/webhook"
)

// Main is the running gateway: Run wires the store, the plugin chain and the
// HTTP server and starts serving; Close shuts them down in reverse order.
type Main struct {
	Listen          string
	RedisURL        string
	WaitReplicas    int // replicas that must have a create or delete before it is acknowledged
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
	Transport       Transport // TLS, mTLS, CORS (issue 30)
	Logger          *slog.Logger

	// The fleet (issue 12): where the chain comes from, and who signs it.
	PluginsFromStore bool     // follow the fleet's chain in the store (host/fleet)
	TrustKeys        []string // public key files: every plugin must be signed by one

	// Issue 24: what the plugins decided, and traces.
	DecisionLog decisionlog.Config          // Path "" and no Writer: no decision log
	OTelEnv     func(string) (string, bool) // reads the OTEL_* variables (os.LookupEnv); nil: no tracing
	// TrustTraceparent makes each request's span a child of the client's
	// traceparent (--trace-incoming honour) instead of the root of a new
	// trace linked to it (link, the default).
	TrustTraceparent bool

	// Issue 30: access tokens from the operator's identity provider.
	OIDC OIDC

	store          *redis.Store
	closeStore     func()
	metrics        *metrics.Metrics
	observed       host.Store // store, measured
	usage          *redis.TokenUsage
	policy         host.Policy
	reloader       *wasm.Reloader // nil without a plugins directory
	member         *fleet.Member  // nil unless PluginsFromStore
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
	decisionLog    *decisionlog.Log   // nil: off
	tracing        *telemetry.Tracing // nil: off
	shadows        *shadowRecorder    // counts and logs shadow plugins' decisions
	certs          *tlscert.Reloader  // nil: plain HTTP
	stopCerts      func()             // stops watching the TLS files; nil: none watched
	oidcKeys       *oidc.Provider     // nil: no --oidc-issuer
	oidc           *oidc.Resolver     // nil: no --oidc-issuer
	introspector   *oidc.Introspector // nil: no --oidc-introspection
}

// Addr is the address the server listens on, once Run has returned.
func (m *Main) Addr() net.Addr { return m.addr }

// startupGCPercent is GOGC while Run loads the plugins.
const startupGCPercent = 20

// loadingGC counts the Runs loading plugins at once (the tests start many
// gateways in one process): the first sets startupGCPercent, the last puts
// back what was there before.
var loadingGC struct {
	sync.Mutex
	n     int
	saved int
}

// tightenGC sets startupGCPercent and returns the function that undoes it.
func tightenGC() (restore func()) {
	loadingGC.Lock()
	if loadingGC.n == 0 {
		loadingGC.saved = debug.SetGCPercent(startupGCPercent)
	}
	loadingGC.n++
	loadingGC.Unlock()
	return func() {
		loadingGC.Lock()
		defer loadingGC.Unlock()
		if loadingGC.n--; loadingGC.n == 0 {
			debug.SetGCPercent(loadingGC.saved)
		}
	}
}

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
	if err := m.startObservability(ctx); err != nil {
		return err
	}
	if err := m.storeUp(ctx); err != nil {
		return err
	}
	if err := m.startOIDC(); err != nil {
		return err
	}
	// Compiling and instantiating the chain is most of start-up's garbage
	// (decoded modules, compiler state): collected at GOGC 100 the heap
	// doubles over it, and the pages stay with the process. A tighter
	// GOGC while loading, and the freed pages handed back once loaded,
	// took the idle gateway with the two bundled plugins from 130-133 to
	// 122 MiB peak and 114 MiB resident (2-vCPU VM), with no measurable
	// change in time to ready. The operator's GOGC applies from then on.
	restoreGC := tightenGC()
	err := m.loadPlugins(ctx)
	restoreGC()
	if err != nil {
		return err
	}
	debug.FreeOSMemory()
	handshakeFailed, err := m.loadCerts()
	if err != nil {
		return err
	}
	if m.InsecureNoAuth {
		log.Warn("INSECURE: serving without authorization (--insecure-no-auth); every request is let through the authorize phase")
	}
	srv, err := plantshttp.New(plantshttp.Config{
		Store:            m.observed,
		Policy:           m.policy,
		InsecureNoAuth:   m.InsecureNoAuth,
		BodyLimit:        m.BodyLimit,
		RequestTimeout:   m.RequestTimeout,
		Ready:            m.ready,
		Logger:           log,
		AccessLog:        m.AccessLog,
		Observe:          m.metrics.Request,
		CursorKey:        m.store.CursorKey,
		Tracer:           m.tracer(),
		HandshakeFailed:  handshakeFailed,
		CORSOrigins:      m.Transport.CORSOrigins,
		TrustTraceparent: m.TrustTraceparent,
		Credentials:      m.credentials(),
		OpenAPI:          m.openAPI(),
	})
	if err != nil {
		if !m.policy.Authorizes() && !m.InsecureNoAuth {
			return m.noAuthorizeError()
		}
		return err
	}
	m.server = srv
	ln, err := m.listen()
	if err != nil {
		return err
	}
	m.addr, m.ln = ln.Addr(), ln
	m.served = make(chan error, 1)
	m.failed = make(chan error, 2) // the HTTP and the admin listener
	go func() {
		err := srv.Serve(ln)
		m.served <- err
		m.listenerStopped("http", ln.Addr(), err)
	}()
	log.Info("serving", "addr", ln.Addr().String(), "tls", m.certs != nil, "mtls", m.Transport.TLSClientCA != "", "cors_origins", len(m.Transport.CORSOrigins))
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
				"kept", st.Kept, "discarded", st.Discarded, "memory_bytes", memory)
		})
	}
}

func (m *Main) noAuthorizeError() error {
	if m.PluginsFromStore {
		return errors.New("no authorize plugin in the store's fleet chain (--plugins-from-store); refusing to serve unauthenticated traffic: push one (plantgate plugin push bin/plugins/10-bearer-auth.wasm) or pass --insecure-no-auth")
	}
	return fmt.Errorf("no authorize plugin is loaded (plugins dir %q); refusing to serve unauthenticated traffic: add one (e.g. bin/plugins/10-bearer-auth.wasm) or pass --insecure-no-auth", m.PluginsDir)
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
	if m.stopCerts != nil {
		m.stopCerts()
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
	if m.oidcKeys != nil {
		m.oidcKeys.Close()
	}
	if m.usage != nil {
		if err := m.usage.Close(ctx); err != nil {
			errs = append(errs, err)
		}
	}
	errs = append(errs, m.closeObservability(ctx)...)
	if m.closeStore != nil {
		m.closeStore()
	} else if m.store != nil {
		if err := m.store.Close(); err != nil {
			errs = append(errs, fmt.Errorf("close store: %w", err))
		}
	}
	return errors.Join(errs...)
}
