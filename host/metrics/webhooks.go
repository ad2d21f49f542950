package metrics

import (
	"context"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Webhooks registers the webhook collectors and returns the delivery
// engine's Observer (host/webhook). backlog is read at each scrape, with a
// short deadline, for the backlog gauges. Call it once.
//
//	plantgate_webhook_deliveries_total{outcome}        counter; outcome: delivered, retry, failed
//	plantgate_webhook_attempts_total{result}           counter; result: 2xx, 3xx, 4xx, 5xx, timeout, error, refused
//	plantgate_webhook_attempt_duration_seconds         histogram
//	plantgate_webhook_backlog                          gauge: deliveries and outbox entries not yet handled
//	plantgate_webhook_oldest_pending_age_seconds       gauge: age of the oldest of them (0: none)
func (m *Metrics) Webhooks(backlog func(ctx context.Context) (int64, time.Time, error)) *WebhookMetrics {
	w := &WebhookMetrics{
		deliveries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "plantgate_webhook_deliveries_total", Help: "Webhook delivery attempts' consequences: delivered, retry (another attempt scheduled) or failed (kept for replay).",
		}, []string{"outcome"}),
		attempts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "plantgate_webhook_attempts_total", Help: "Webhook POST attempts by result: 2xx, 3xx, 4xx, 5xx, timeout, error (connection failed), refused (forbidden address).",
		}, []string{"result"}),
		took: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "plantgate_webhook_attempt_duration_seconds", Help: "Time of one webhook POST attempt.", Buckets: requestBuckets,
		}),
		backlog: backlog,
		now:     time.Now,
		n:       prometheus.NewDesc("plantgate_webhook_backlog", "Webhook deliveries and outbox entries not yet handled.", nil, nil),
		age:     prometheus.NewDesc("plantgate_webhook_oldest_pending_age_seconds", "Age of the oldest event not yet delivered (0: none).", nil, nil),
	}
	for _, o := range []string{"delivered", "retry", "failed"} {
		w.deliveries.WithLabelValues(o)
	}
	m.reg.MustRegister(w.deliveries, w.attempts, w.took, w)
	return w
}

// WebhookMetrics implements host/webhook's Observer, and collects the
// backlog gauges at scrape time.
type WebhookMetrics struct {
	deliveries *prometheus.CounterVec
	attempts   *prometheus.CounterVec
	took       prometheus.Histogram
	backlog    func(ctx context.Context) (int64, time.Time, error)
	now        func() time.Time // the age gauge's clock; tests set it
	n, age     *prometheus.Desc
	mu         sync.Mutex // one backlog read at a time
}

// WebhookAttempt implements host/webhook's Observer.
func (w *WebhookMetrics) WebhookAttempt(result string, took time.Duration) {
	w.attempts.WithLabelValues(result).Inc()
	w.took.Observe(took.Seconds())
}

// WebhookDelivery implements host/webhook's Observer.
func (w *WebhookMetrics) WebhookDelivery(outcome string) { w.deliveries.WithLabelValues(outcome).Inc() }

func (w *WebhookMetrics) Describe(ch chan<- *prometheus.Desc) { ch <- w.n; ch <- w.age }

// Collect reads the backlog; a store that does not answer in time leaves
// the gauges out of this scrape rather than report a false zero.
func (w *WebhookMetrics) Collect(ch chan<- prometheus.Metric) {
	w.mu.Lock()
	defer w.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	n, oldest, err := w.backlog(ctx)
	if err != nil {
		return
	}
	age := 0.0
	if !oldest.IsZero() {
		age = max(w.now().Sub(oldest).Seconds(), 0)
	}
	ch <- prometheus.MustNewConstMetric(w.n, prometheus.GaugeValue, float64(n))
	ch <- prometheus.MustNewConstMetric(w.age, prometheus.GaugeValue, age)
}
