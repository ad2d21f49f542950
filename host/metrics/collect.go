package metrics

import (
	"context"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/plantgate/plantgate/host"
)

// poolCollector reads the pools at scrape time: the chain changes on a
// reload, so there is nothing to keep up to date in between.
type poolCollector struct {
	live, size *prometheus.Desc

	mu    sync.Mutex
	pools func() []Pool
}

func (c *poolCollector) set(f func() []Pool) {
	c.mu.Lock()
	c.pools = f
	c.mu.Unlock()
}

func (c *poolCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.live
	ch <- c.size
}

func (c *poolCollector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	f := c.pools
	c.mu.Unlock()
	if f == nil {
		return
	}
	for _, p := range f() {
		ch <- prometheus.MustNewConstMetric(c.live, prometheus.GaugeValue, float64(p.Live), p.Plugin)
		ch <- prometheus.MustNewConstMetric(c.size, prometheus.GaugeValue, float64(p.Size), p.Plugin)
	}
}

// Store wraps s so that each operation is timed and each failure counted.
// "Not found" and "conflict" answers are answers, not failures.
func (m *Metrics) Store(s host.Store) host.Store { return &store{s: s, m: m} }

type store struct {
	s host.Store
	m *Metrics
}

var _ host.Store = (*store)(nil)

func (st *store) observe(op string, start time.Time, err error) {
	st.m.storeTime.WithLabelValues(op).Observe(time.Since(start).Seconds())
	if err != nil {
		switch host.Code(err) {
		case host.ErrTokenNotFound, host.ErrConflict, host.ErrPlantNotFound:
		default:
			st.m.storeErrors.WithLabelValues(op).Inc()
		}
	}
}

func (st *store) CreatePlant(ctx context.Context, p host.Plant) (bool, error) {
	start := time.Now()
	created, err := st.s.CreatePlant(ctx, p)
	st.observe("create_plant", start, err)
	return created, err
}

func (st *store) Plant(ctx context.Context, id int64) (host.Plant, error) {
	start := time.Now()
	p, err := st.s.Plant(ctx, id)
	st.observe("plant", start, err)
	return p, err
}

func (st *store) Plants(ctx context.Context, after *int64, limit int) (host.Page, error) {
	start := time.Now()
	page, err := st.s.Plants(ctx, after, limit)
	st.observe("plants", start, err)
	return page, err
}

func (st *store) DeletePlant(ctx context.Context, id int64) error {
	start := time.Now()
	err := st.s.DeletePlant(ctx, id)
	st.observe("delete_plant", start, err)
	return err
}

func (st *store) Token(ctx context.Context, digest [32]byte) (host.Token, error) {
	start := time.Now()
	t, err := st.s.Token(ctx, digest)
	st.observe("token", start, err)
	return t, err
}

func (st *store) Ping(ctx context.Context) error {
	start := time.Now()
	err := st.s.Ping(ctx)
	st.observe("ping", start, err)
	return err
}
