package console

import (
	"cmp"
	"math"
	"slices"
	"strconv"

	dto "github.com/prometheus/client_model/go"
)

// family is one gathered metric family's series, by their labels.
type family []*dto.Metric

func (f family) label(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}

// sum adds the counter (or gauge) values of the series whose labels match
// want ("" matches any value).
func (f family) sum(want map[string]string) float64 {
	total := 0.0
	for _, m := range f {
		if f.matches(m, want) {
			total += m.GetCounter().GetValue() + m.GetGauge().GetValue()
		}
	}
	return total
}

func (f family) matches(m *dto.Metric, want map[string]string) bool {
	for k, v := range want {
		if f.label(m, k) != v {
			return false
		}
	}
	return true
}

// values returns the distinct values of a label, sorted.
func (f family) values(name string) []string {
	var vs []string
	for _, m := range f {
		if v := f.label(m, name); !slices.Contains(vs, v) {
			vs = append(vs, v)
		}
	}
	slices.Sort(vs)
	return vs
}

// Latency summarizes a histogram since the gateway started.
type Latency struct {
	Count  uint64  `json:"count"`
	MeanMS float64 `json:"mean_ms"`
	P99MS  float64 `json:"p99_ms"` // estimated from the buckets, as Prometheus's histogram_quantile does
}

// latency merges the histograms of the series matching want.
func (f family) latency(want map[string]string) Latency {
	var count uint64
	var sum float64
	var bounds []float64
	cum := map[float64]uint64{}
	for _, m := range f {
		h := m.GetHistogram()
		if h == nil || !f.matches(m, want) {
			continue
		}
		count += h.GetSampleCount()
		sum += h.GetSampleSum()
		for _, b := range h.GetBucket() {
			if _, ok := cum[b.GetUpperBound()]; !ok {
				bounds = append(bounds, b.GetUpperBound())
			}
			cum[b.GetUpperBound()] += b.GetCumulativeCount()
		}
	}
	if count == 0 {
		return Latency{}
	}
	slices.Sort(bounds)
	return Latency{Count: count, MeanMS: sum / float64(count) * 1000, P99MS: quantile(0.99, bounds, cum, count) * 1000}
}

// quantile interpolates linearly inside the bucket holding the q-th
// observation; past the last finite bound it answers that bound.
func quantile(q float64, bounds []float64, cum map[float64]uint64, count uint64) float64 {
	rank := q * float64(count)
	lower, below := 0.0, uint64(0)
	for _, ub := range bounds {
		n := cum[ub]
		if float64(n) >= rank {
			if math.IsInf(ub, 1) || n == below {
				return lower
			}
			return lower + (ub-lower)*(rank-float64(below))/float64(n-below)
		}
		lower, below = ub, n
	}
	return lower
}

// RouteRow is one route and status: requests answered, and their rate.
type RouteRow struct {
	Route  string   `json:"route"`
	Status string   `json:"status"`
	Count  float64  `json:"count"`
	Rate   *float64 `json:"rate_per_second"` // nil until two samples a second apart
}

// RouteLatency is one route's answer time, every status together (the
// histogram has no status label).
type RouteLatency struct {
	Route string `json:"route"`
	Latency
}

// PluginRow is one plugin's calls of one phase.
type PluginRow struct {
	Plugin string  `json:"plugin"`
	Phase  string  `json:"phase"`
	Allow  float64 `json:"allow"`
	Deny   float64 `json:"deny"`
	Fault  float64 `json:"fault"`
	Busy   float64 `json:"busy"`
	Latency
}

// StoreRow is one store operation.
type StoreRow struct {
	Op     string  `json:"op"`
	Errors float64 `json:"errors"`
	Latency
}

// TokenCache is the token cache's lookups; absent when the cache is off.
type TokenCache struct {
	Hits    float64 `json:"hits"`
	Misses  float64 `json:"misses"`
	HitRate float64 `json:"hit_rate"` // 0..1; 0 before any lookup
}

// Webhooks is the delivery engine's state; absent without webhooks.
type Webhooks struct {
	Backlog      *float64           `json:"backlog"` // nil: the store did not answer in time
	OldestAgeSec *float64           `json:"oldest_pending_age_seconds"`
	Deliveries   map[string]float64 `json:"deliveries"` // delivered, retry, failed
	Attempts     map[string]float64 `json:"attempts"`   // by result
}

// traffic is what the console reads from the registry.
type traffic struct {
	Requests     float64        `json:"requests"`
	RequestRate  *float64       `json:"request_rate_per_second"`
	Routes       []RouteRow     `json:"routes"`
	RouteLatency []RouteLatency `json:"route_latency"`
	PluginCalls  []PluginRow    `json:"plugin_calls"`
	Store        []StoreRow     `json:"store"`
	TokenCache   *TokenCache    `json:"token_cache"`
	Webhooks     *Webhooks      `json:"webhooks"`
}

// readTraffic builds the traffic view from gathered families; counts holds
// each request series' count for the rates, keyed as rateKey.
func readTraffic(fams map[string]family) (t traffic, counts map[string]float64) {
	counts = map[string]float64{}
	req := fams["plantgate_http_requests_total"]
	for _, m := range req {
		row := RouteRow{Route: req.label(m, "route"), Status: req.label(m, "status"), Count: m.GetCounter().GetValue()}
		t.Routes = append(t.Routes, row)
		t.Requests += row.Count
		counts[rateKey(row.Route, row.Status)] = row.Count
	}
	counts[rateKey("", "")] = t.Requests
	slices.SortFunc(t.Routes, func(a, b RouteRow) int {
		return cmp.Or(cmp.Compare(a.Route, b.Route), cmp.Compare(a.Status, b.Status))
	})
	rt := fams["plantgate_http_request_duration_seconds"]
	for _, route := range rt.values("route") {
		t.RouteLatency = append(t.RouteLatency, RouteLatency{route, rt.latency(map[string]string{"route": route})})
	}

	calls, took := fams["plantgate_plugin_calls_total"], fams["plantgate_plugin_call_duration_seconds"]
	for _, plugin := range calls.values("plugin") {
		for _, phase := range calls.values("phase") {
			n := func(outcome string) float64 {
				return calls.sum(map[string]string{"plugin": plugin, "phase": phase, "outcome": outcome})
			}
			row := PluginRow{Plugin: plugin, Phase: phase, Allow: n("allow"), Deny: n("deny"), Fault: n("fault"), Busy: n("busy"),
				Latency: took.latency(map[string]string{"plugin": plugin, "phase": phase})}
			if row.Allow+row.Deny+row.Fault+row.Busy > 0 {
				t.PluginCalls = append(t.PluginCalls, row)
			}
		}
	}

	st, stErr := fams["plantgate_store_duration_seconds"], fams["plantgate_store_errors_total"]
	for _, op := range st.values("op") {
		t.Store = append(t.Store, StoreRow{Op: op, Errors: stErr.sum(map[string]string{"op": op}), Latency: st.latency(map[string]string{"op": op})})
	}

	if tc, ok := fams["plantgate_token_cache_lookups_total"]; ok {
		c := &TokenCache{Hits: tc.sum(map[string]string{"result": "hit"}), Misses: tc.sum(map[string]string{"result": "miss"})}
		if c.Hits+c.Misses > 0 {
			c.HitRate = c.Hits / (c.Hits + c.Misses)
		}
		t.TokenCache = c
	}

	if d, ok := fams["plantgate_webhook_deliveries_total"]; ok {
		w := &Webhooks{Deliveries: byLabel(d, "outcome"), Attempts: byLabel(fams["plantgate_webhook_attempts_total"], "result")}
		if b, ok := fams["plantgate_webhook_backlog"]; ok {
			n := b.sum(nil)
			w.Backlog = &n
		}
		if a, ok := fams["plantgate_webhook_oldest_pending_age_seconds"]; ok {
			n := a.sum(nil)
			w.OldestAgeSec = &n
		}
		t.Webhooks = w
	}
	return t, counts
}

func byLabel(f family, name string) map[string]float64 {
	out := map[string]float64{}
	for _, v := range f.values(name) {
		out[v] = f.sum(map[string]string{name: v})
	}
	return out
}

func rateKey(route, status string) string { return route + "\x00" + status }

// number formats a count, or a value its caller rounded, for the page:
// the shortest decimal that reads back as v, never an exponent.
func number(v float64) string { return strconv.FormatFloat(v, 'f', -1, 64) }
