// Package metrics owns Plantgate's Prometheus collectors and serves them.
//
// The other host packages do not import Prometheus: host/http reports each
// request through Config.Observe, host/wasm each plugin call, pool wait and
// reload through its Observer interface, and the store is measured by
// wrapping it (Store). Metrics implements those hooks, so the packages that
// do the work stay small and are tested without a registry.
//
//	m := metrics.New()
//	store = m.Store(store)
//	opts := wasm.Options{Observer: m, Tokens: store}
//	srv, _ := http.New(http.Config{Observe: m.Request, Store: store, …})
//	admin.Handle("/metrics", m.Handler())
//
// # Metrics
//
//	plantgate_http_requests_total{route,status}           counter
//	plantgate_http_request_duration_seconds{route}        histogram
//	plantgate_plugin_calls_total{plugin,phase,outcome}    counter; outcome: allow, deny, fault, busy
//	plantgate_plugin_call_duration_seconds{plugin,phase}  histogram, pool wait included
//	plantgate_plugin_pool_wait_seconds{plugin}            histogram of the calls that found no idle instance
//	plantgate_plugin_instances{plugin}                    gauge: live instances of the current chain
//	plantgate_plugin_pool_size{plugin}                    gauge: the pool's bound (limits.instances)
//	plantgate_store_duration_seconds{op}                  histogram; op: create_plant, token, ping
//	plantgate_store_errors_total{op}                      counter: failures other than "not found"/conflict
//	plantgate_chain_reloads_total{outcome}                counter; outcome: applied, unchanged, refused
//	plantgate_token_cache_lookups_total{result}           counter; result: hit, miss (only with the token cache on)
//	plantgate_decision_log_lines_total{result}            counter; result: written, dropped, error (only with --decision-log)
//	plantgate_build_info{version,revision,go_version}     gauge, always 1
//	plantgate_tls_…                                      with --tls-cert; see TLS
//
// plus the Go runtime's and the process's standard collectors.
package metrics

import (
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/plantgate/plantgate/host/buildinfo"
)

// Metrics holds the collectors and a registry of its own (not the global
// one), so tests and two gateways in one process do not collide.
type Metrics struct {
	reg *prometheus.Registry

	requests      *prometheus.CounterVec
	requestTime   *prometheus.HistogramVec
	pluginCalls   *prometheus.CounterVec
	pluginTime    *prometheus.HistogramVec
	poolWait      *prometheus.HistogramVec
	storeTime     *prometheus.HistogramVec
	storeErrors   *prometheus.CounterVec
	reloads       *prometheus.CounterVec
	pools         *poolCollector
	statusStrings [600]string // "200" for 200: no strconv on the request path
	requestSeries sync.Map    // seriesKey → series
	pluginSeries  sync.Map    // seriesKey → series
}

// Buckets: requests and store calls take from ~50 µs to the request
// timeout; a plugin call from ~1 µs to its deadline.
var (
	requestBuckets = []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5}
	pluginBuckets  = []float64{.000005, .00001, .000025, .00005, .0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1}
)

// New returns Metrics with every collector registered.
func New() *Metrics {
	m := &Metrics{reg: prometheus.NewRegistry()}
	m.requests = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "plantgate_http_requests_total", Help: "HTTP requests answered, by route and status.",
	}, []string{"route", "status"})
	m.requestTime = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "plantgate_http_request_duration_seconds", Help: "Time to answer an HTTP request, by route.", Buckets: requestBuckets,
	}, []string{"route"})
	m.pluginCalls = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "plantgate_plugin_calls_total", Help: "Policy plugin phase calls, by plugin, phase and outcome (allow, deny, fault, busy).",
	}, []string{"plugin", "phase", "outcome"})
	m.pluginTime = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "plantgate_plugin_call_duration_seconds", Help: "Time of one policy plugin phase call, waiting for an instance included.", Buckets: pluginBuckets,
	}, []string{"plugin", "phase"})
	m.poolWait = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "plantgate_plugin_pool_wait_seconds", Help: "Time a call waited for a plugin instance, for the calls that found none idle.", Buckets: requestBuckets,
	}, []string{"plugin"})
	m.storeTime = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "plantgate_store_duration_seconds", Help: "Time of one store operation, by operation.", Buckets: requestBuckets,
	}, []string{"op"})
	m.storeErrors = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "plantgate_store_errors_total", Help: "Store operations that failed (not counting not-found and conflict answers), by operation.",
	}, []string{"op"})
	m.reloads = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "plantgate_chain_reloads_total", Help: "Plugin chain reloads, by outcome (applied, unchanged, refused).",
	}, []string{"outcome"})
	m.pools = &poolCollector{
		live: prometheus.NewDesc("plantgate_plugin_instances", "Live instances of each plugin of the current chain.", []string{"plugin"}, nil),
		size: prometheus.NewDesc("plantgate_plugin_pool_size", "Bound of each plugin's instance pool (limits.instances).", []string{"plugin"}, nil),
	}
	bi := buildinfo.Get()
	build := prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "plantgate_build_info", Help: "Build of the running gateway; always 1.",
	}, []string{"version", "revision", "go_version"})
	build.WithLabelValues(bi.Version, bi.Revision, bi.GoVersion).Set(1)
	m.reg.MustRegister(m.requests, m.requestTime, m.pluginCalls, m.pluginTime, m.poolWait, m.storeTime,
		m.storeErrors, m.reloads, m.pools, build,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	for i := range m.statusStrings {
		m.statusStrings[i] = strconv.Itoa(i)
	}
	// Known series start at zero, so a dashboard shows them before traffic.
	for _, o := range []string{"applied", "unchanged", "refused"} {
		m.reloads.WithLabelValues(o)
	}
	return m
}

// TokenCache exports the token cache's counts of lookups it answered (hit)
// and sent to the store (miss). Call it once.
func (m *Metrics) TokenCache(stats func() (hits, misses uint64)) {
	for _, r := range []string{"hit", "miss"} {
		m.reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name:        "plantgate_token_cache_lookups_total",
			Help:        "Token lookups answered by the token cache (hit) or sent to the store (miss).",
			ConstLabels: prometheus.Labels{"result": r},
		}, func() float64 {
			hits, misses := stats()
			if r == "hit" {
				return float64(hits)
			}
			return float64(misses)
		}))
	}
}

// Introspections exports the identity provider's token introspections
// (--oidc-introspection) by outcome: names[i] is the outcome counted by
// stats()[i].
func (m *Metrics) Introspections(names []string, stats func() []uint64) {
	for i, name := range names {
		m.reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name:        "plantgate_oidc_introspections_total",
			Help:        "Opaque access tokens the gateway asked the identity provider about (RFC 7662), by outcome; limited ones were refused without asking.",
			ConstLabels: prometheus.Labels{"outcome": name},
		}, func() float64 { return float64(stats()[i]) }))
	}
}

// Registry is the registry the collectors are in.
func (m *Metrics) Registry() *prometheus.Registry { return m.reg }

// Handler serves the metrics in the Prometheus text format.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{Registry: m.reg})
}

// Request records one HTTP request: host/http's Config.Observe.
func (m *Metrics) Request(route string, status int, took time.Duration) {
	k := seriesKey{a: route, status: status}
	v, ok := m.requestSeries.Load(k)
	if !ok {
		s := ""
		if status >= 0 && status < len(m.statusStrings) {
			s = m.statusStrings[status]
		} else {
			s = strconv.Itoa(status)
		}
		v, _ = m.requestSeries.LoadOrStore(k, series{m.requests.WithLabelValues(route, s), m.requestTime.WithLabelValues(route)})
	}
	sr := v.(series)
	sr.count.Inc()
	sr.time.Observe(took.Seconds())
}

// PluginCall implements host/wasm's Observer.
func (m *Metrics) PluginCall(plugin, phase, outcome string, took time.Duration) {
	k := seriesKey{a: plugin, b: phase, c: outcome}
	v, ok := m.pluginSeries.Load(k)
	if !ok {
		v, _ = m.pluginSeries.LoadOrStore(k, series{m.pluginCalls.WithLabelValues(plugin, phase, outcome), m.pluginTime.WithLabelValues(plugin, phase)})
	}
	sr := v.(series)
	sr.count.Inc()
	sr.time.Observe(took.Seconds())
}

// seriesKey names the series of one request route and status, or of one
// plugin, phase and outcome. The label lookups Prometheus makes per
// observation (hashing every label value, a lock) cost more than the
// observation; the series are looked up once and kept here. Their number
// is bounded as the labels are: routes, statuses, plugins and phases.
type seriesKey struct {
	a, b, c string
	status  int
}

// series is a counter and a histogram observed together.
type series struct {
	count prometheus.Counter
	time  prometheus.Observer
}

// PoolWait implements host/wasm's Observer.
func (m *Metrics) PoolWait(plugin string, waited time.Duration) {
	m.poolWait.WithLabelValues(plugin).Observe(waited.Seconds())
}

// Reload implements host/wasm's Observer.
func (m *Metrics) Reload(outcome string) { m.reloads.WithLabelValues(outcome).Inc() }

// Pool is one plugin's instance pool, as the pool gauges show it.
type Pool struct {
	Plugin string
	Live   int // instances alive now
	Size   int // the pool's bound
}

// SetPools sets the function the pool gauges read at each scrape; the
// gateway passes one that describes the current chain.
func (m *Metrics) SetPools(f func() []Pool) { m.pools.set(f) }

// TLS exports the API listener's certificate, read at each scrape from
// state, and returns the hook that counts failed handshakes
// (host/http's Config.HandshakeFailed). Call it once.
//
//	plantgate_tls_certificate_expiry_timestamp_seconds  gauge: the served certificate's notAfter
//	plantgate_tls_certificate_reloads_total{outcome}    counter; outcome: applied (the first load included), refused
//	plantgate_tls_certificate_stale                     gauge: 1 while the files hold a set that was refused (the previous one is served)
//	plantgate_tls_handshake_failures_total              counter
func (m *Metrics) TLS(state func() (notAfter time.Time, applied, refused uint64, stale bool)) func(error) {
	m.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "plantgate_tls_certificate_expiry_timestamp_seconds", Help: "Expiry (notAfter, Unix time) of the certificate the API listener serves.",
	}, func() float64 { t, _, _, _ := state(); return float64(t.Unix()) }))
	for _, o := range []string{"applied", "refused"} {
		m.reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "plantgate_tls_certificate_reloads_total", Help: "Certificate file sets read: applied (served from the next handshake on; the first load included) or refused (the previous set is still served).",
			ConstLabels: prometheus.Labels{"outcome": o},
		}, func() float64 {
			_, applied, refused, _ := state()
			if o == "applied" {
				return float64(applied)
			}
			return float64(refused)
		}))
	}
	m.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "plantgate_tls_certificate_stale", Help: "1 while the certificate files hold a set that was refused, so the previous certificate is still served.",
	}, func() float64 {
		if _, _, _, stale := state(); stale {
			return 1
		}
		return 0
	}))
	failures := prometheus.NewCounter(prometheus.CounterOpts{
		Name: "plantgate_tls_handshake_failures_total", Help: "TLS connections closed because their handshake failed (old protocol version, no or an untrusted client certificate, plain HTTP, timeout).",
	})
	m.reg.MustRegister(failures)
	return func(error) { failures.Inc() }
}
