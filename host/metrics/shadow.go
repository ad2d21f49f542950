package metrics

import "github.com/prometheus/client_golang/prometheus"

// ShadowMetrics counts shadow plugins' decisions against the live chain's:
//
//	plantgate_shadow_decisions_total{plugin,outcome}  counter; outcome: agree, would_deny, would_allow, fault
//	plantgate_shadow_dropped_total{plugin}            counter: sampled shadow calls dropped (queue full, pool busy)
//	plantgate_shadow_diffs_unlogged_total             counter: disagreements not written to the diff log (rate bound, store error)
//
// plugin is the slot's name ("policy" for 20-policy.shadow.wasm).
type ShadowMetrics struct {
	decisions *prometheus.CounterVec
	dropped   *prometheus.CounterVec
	unlogged  prometheus.Counter
}

// ShadowOutcomes are the outcomes of a shadow decision, as labelled.
var ShadowOutcomes = []string{"agree", "would_deny", "would_allow", "fault"}

// Shadows registers the shadow counters and returns them. Call it once.
func (m *Metrics) Shadows() *ShadowMetrics {
	s := &ShadowMetrics{
		decisions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "plantgate_shadow_decisions_total",
			Help: "Shadow plugin decisions compared with the live chain's answer, by plugin and outcome (agree, would_deny, would_allow, fault).",
		}, []string{"plugin", "outcome"}),
		dropped: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "plantgate_shadow_dropped_total",
			Help: "Sampled shadow plugin calls dropped because too many were pending or the shadow's pool stayed busy, by plugin.",
		}, []string{"plugin"}),
		unlogged: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "plantgate_shadow_diffs_unlogged_total",
			Help: "Shadow disagreements not written to the fleet's diff log: over its rate bound, or the store failed.",
		}),
	}
	m.reg.MustRegister(s.decisions, s.dropped, s.unlogged)
	return s
}

// Decision counts one shadow decision. The first one of a plugin starts
// its other outcomes at zero, so a dashboard shows them all.
func (s *ShadowMetrics) Decision(plugin, outcome string) {
	for _, o := range ShadowOutcomes {
		s.decisions.WithLabelValues(plugin, o)
	}
	s.decisions.WithLabelValues(plugin, outcome).Inc()
}

// Dropped counts one dropped shadow call.
func (s *ShadowMetrics) Dropped(plugin string) { s.dropped.WithLabelValues(plugin).Inc() }

// Unlogged counts one disagreement left out of the diff log.
func (s *ShadowMetrics) Unlogged() { s.unlogged.Inc() }
