// Package console serves the operators' console: one read-only page on the
// admin listener showing the live plugin chain and the gateway's traffic.
//
//	c := console.New(console.Config{Gatherer: m.Registry(), Chain: reloader.Snapshot})
//	mux.Handle("GET /", c)
//
// # Notes
//
//   - Every number is read from the gateway's own Prometheus registry at
//     each request: the console keeps no counters of its own, only the last
//     half minute of request counts to turn them into rates.
//   - The page is rendered on the server, so it shows the numbers as of
//     page load with JavaScript off; with it on, console.js fetches the page
//     again every two seconds and swaps its <main> in. /console.json serves
//     the same numbers for scripts.
//   - Nothing is fetched from elsewhere and no inline script or style runs:
//     the Content-Security-Policy allows 'self' only.
//   - Plugin configs are shown with secrets masked (MaskConfig). The page
//     still names routes, plugins and addresses: the admin listener belongs
//     off the public network.
package console

import (
	"context"
	"embed"
	"encoding/json"
	"html/template"
	"math"
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/plantgate/plantgate/host/fleet"
	"github.com/plantgate/plantgate/host/redis"
	"github.com/plantgate/plantgate/host/wasm"
)

//go:embed assets
var assets embed.FS

var page = template.Must(template.New("page.html").Funcs(template.FuncMap{
	"number":  number,
	"ms":      func(v float64) string { return number(math.Round(v*1000) / 1000) },
	"when":    when,
	"short":   func(s string) string { return s[:min(len(s), 12)] },
	"percent": func(v float64) string { return number(math.Round(v*1000)/10) + "%" },
	"opt": func(v *float64) string {
		if v == nil {
			return "—"
		}
		return number(math.Round(*v*100) / 100)
	},
}).ParseFS(assets, "assets/page.html"))

// csp allows the page's own script and style and nothing else: no inline
// code, no other origin, no framing.
const csp = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; " +
	"object-src 'none'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

// Config says where the console reads from.
type Config struct {
	// Gatherer is the gateway's registry.
	Gatherer prometheus.Gatherer

	// Chain reports the plugin chain, as wasm.Reloader.Snapshot does.
	//
	// Optional. Default: none; the page says no plugins directory is served.
	Chain func() (wasm.ReloadStatus, []wasm.PluginState)

	// Fleet reports the fleet's chain and gateways from their heartbeats,
	// as fleet.Reader.Read does, and Self is this gateway's fleet id.
	//
	// Optional. Default: none; the page says the gateway does not follow
	// the store's chain.
	Fleet func(context.Context) (fleet.Status, error)
	Self  string

	// Diffs reads the fleet's latest shadow disagreements, newest first,
	// as redis.Store.ShadowDiffs does.
	//
	// Optional. Default: none; the page lists no disagreements.
	Diffs func(ctx context.Context, n int) ([]redis.ShadowDiff, error)

	// Now is the clock of the rates and the page's time.
	//
	// Optional. Default: time.Now.
	Now func() time.Time
}

// Console is an http.Handler serving /, /console.json, /console.js and
// /console.css.
type Console struct {
	cfg    Config
	static http.Handler

	mu      sync.Mutex // guards samples
	samples []sample   // request counts, oldest first, at least a second apart
}

type sample struct {
	at     time.Time
	counts map[string]float64
}

// rateWindow is how far back a rate looks: long enough to smooth a burst,
// short enough to show a change within the page's refresh.
const rateWindow = 30 * time.Second

// New returns a Console reading from cfg.
func New(cfg Config) *Console {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Console{cfg: cfg, static: http.FileServerFS(assets)}
}

// View is the whole page's data; /console.json serves it.
type View struct {
	At    time.Time `json:"at"`
	Chain *Chain    `json:"chain"` // nil: no plugins directory
	traffic
	// Fleet is the fleet's chain and gateways; nil when this gateway does
	// not follow the store's chain (or FleetError says why it is unknown).
	Fleet      *fleet.Status `json:"fleet"`
	FleetError string        `json:"fleet_error,omitempty"`
	Self       string        `json:"self,omitempty"` // this gateway's fleet id
	// Shadows are the shadow plugins' agreement counts on this gateway;
	// Diffs the fleet's latest disagreements (DiffsError: why unknown).
	Shadows    []Shadow `json:"shadows"`
	Diffs      []Diff   `json:"diffs"`
	DiffsError string   `json:"diffs_error,omitempty"`
}

// ServeHTTP implements http.Handler.
func (c *Console) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Content-Security-Policy", csp)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		h.Set("Allow", "GET, HEAD")
		http.Error(w, "the console is read-only", http.StatusMethodNotAllowed)
		return
	}
	switch r.URL.Path {
	case "/", "/console.json":
	case "/favicon.ico":
		// Browsers ask for it unbidden; a 404 would be an error in their console.
		w.WriteHeader(http.StatusNoContent)
		return
	case "/console.js", "/console.css":
		h.Set("Cache-Control", "no-cache")
		r2 := r.Clone(r.Context())
		r2.URL.Path = "/assets" + r.URL.Path
		c.static.ServeHTTP(w, r2)
		return
	default:
		http.NotFound(w, r)
		return
	}
	v, err := c.view(r.Context())
	if err != nil {
		http.Error(w, "reading the metrics: "+err.Error(), http.StatusInternalServerError)
		return
	}
	h.Set("Cache-Control", "no-store")
	if r.URL.Path == "/console.json" {
		h.Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(v)
		return
	}
	h.Set("Content-Type", "text/html; charset=utf-8")
	_ = page.Execute(w, v)
}

func (c *Console) view(ctx context.Context) (View, error) {
	mfs, err := c.cfg.Gatherer.Gather()
	if err != nil && len(mfs) == 0 {
		return View{}, err
	}
	fams := make(map[string]family, len(mfs))
	for _, mf := range mfs {
		fams[mf.GetName()] = mf.GetMetric()
	}
	now := c.cfg.Now()
	v := View{At: now}
	var counts map[string]float64
	v.traffic, counts = readTraffic(fams)
	rates := c.rates(now, counts)
	if rates != nil {
		r := rates[rateKey("", "")]
		v.RequestRate = &r
		for i := range v.Routes {
			r := rates[rateKey(v.Routes[i].Route, v.Routes[i].Status)]
			v.Routes[i].Rate = &r
		}
	}
	v.Shadows = readShadows(fams)
	if c.cfg.Diffs != nil {
		if v.Diffs, err = c.readDiffs(ctx); err != nil {
			v.DiffsError = err.Error()
		}
	}
	if c.cfg.Chain != nil {
		st, plugins := c.cfg.Chain()
		v.Chain = newChain(st, plugins)
	}
	if c.cfg.Fleet != nil {
		v.Self = c.cfg.Self
		if st, err := c.cfg.Fleet(ctx); err != nil {
			v.FleetError = err.Error()
		} else {
			v.Fleet = &st
		}
	}
	return v, nil
}

// rates returns each count's rate per second against the oldest sample of
// the window, and keeps counts as a sample; nil while no sample is a second
// old.
func (c *Console) rates(now time.Time, counts map[string]float64) map[string]float64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	for len(c.samples) > 0 && now.Sub(c.samples[0].at) > rateWindow {
		c.samples = c.samples[1:]
	}
	var rates map[string]float64
	if len(c.samples) > 0 {
		if base := c.samples[0]; now.Sub(base.at) >= time.Second {
			dt := now.Sub(base.at).Seconds()
			rates = make(map[string]float64, len(counts))
			for k, n := range counts {
				rates[k] = max(n-base.counts[k], 0) / dt
			}
		}
	}
	if len(c.samples) == 0 || now.Sub(c.samples[len(c.samples)-1].at) >= time.Second {
		c.samples = append(c.samples, sample{at: now, counts: counts})
	}
	return rates
}

// when formats a time for the page; the zero time is "never".
func when(t time.Time) string {
	if t.IsZero() {
		return "never"
	}
	return t.UTC().Format("2006-01-02 15:04:05 UTC")
}
