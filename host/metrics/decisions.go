package metrics

import "github.com/prometheus/client_golang/prometheus"

// DecisionLog exports the decision log's counts (host/decisionlog): lines
// written, lines dropped because the queue was full (the request did not
// wait), and lines the file refused. Call it once.
//
//	plantgate_decision_log_lines_total{result}  counter; result: written, dropped, error
func (m *Metrics) DecisionLog(written, dropped, failed func() uint64) {
	for r, f := range map[string]func() uint64{"written": written, "dropped": dropped, "error": failed} {
		m.reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name:        "plantgate_decision_log_lines_total",
			Help:        "Decision log lines written, dropped (queue full: never waited for) and failed.",
			ConstLabels: prometheus.Labels{"result": r},
		}, func() float64 { return float64(f()) }))
	}
}
