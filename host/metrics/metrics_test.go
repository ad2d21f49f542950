package metrics

import (
	"context"
	"errors"
	"io"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/plantgate/plantgate/host"
)

type fakeStore struct{ err error }

func (f fakeStore) CreatePlant(context.Context, host.Plant) (bool, error) { return true, f.err }
func (f fakeStore) Token(context.Context, [32]byte) (host.Token, error) {
	return host.Token{}, host.Errorf(host.ErrTokenNotFound, "no")
}
func (f fakeStore) Ping(context.Context) error { return f.err }
func (f fakeStore) Plant(_ context.Context, id int64) (host.Plant, error) {
	return host.Plant{}, host.Errorf(host.ErrPlantNotFound, "no plant with id %d", id)
}
func (f fakeStore) Plants(context.Context, *int64, int) (host.Page, error) { return host.Page{}, f.err }
func (f fakeStore) DeletePlant(context.Context, int64) error               { return f.err }

func TestMetrics(t *testing.T) {
	t.Parallel()
	m := New()
	m.Request("/plants", 200, time.Millisecond)
	m.Request("/plants", 200, time.Millisecond)
	m.Request("other", 404, time.Millisecond)
	m.PluginCall("bearer-auth", "authorize", "allow", time.Microsecond)
	m.PluginCall("bearer-auth", "authorize", "deny", time.Microsecond)
	m.PoolWait("bearer-auth", time.Millisecond)
	m.Reload("applied")
	m.Reload("refused")
	m.Reload("refused")
	m.SetPools(func() []Pool { return []Pool{{Plugin: "bearer-auth", Live: 3, Size: 4}} })

	ctx := context.Background()
	ok, down := m.Store(fakeStore{}), m.Store(fakeStore{err: errors.New("down")})
	ok.CreatePlant(ctx, host.Plant{})
	down.CreatePlant(ctx, host.Plant{})
	ok.Token(ctx, [32]byte{}) // not found is an answer, not an error
	down.Ping(ctx)
	down.Plant(ctx, 1) // not found is an answer too
	down.Plants(ctx, nil, 20)
	down.DeletePlant(ctx, 1)

	for _, c := range []struct {
		got  float64
		want float64
	}{
		{testutil.ToFloat64(m.requests.WithLabelValues("/plants", "200")), 2},
		{testutil.ToFloat64(m.requests.WithLabelValues("other", "404")), 1},
		{testutil.ToFloat64(m.pluginCalls.WithLabelValues("bearer-auth", "authorize", "deny")), 1},
		{testutil.ToFloat64(m.reloads.WithLabelValues("refused")), 2},
		{testutil.ToFloat64(m.reloads.WithLabelValues("unchanged")), 0},
		{testutil.ToFloat64(m.storeErrors.WithLabelValues("create_plant")), 1},
		{testutil.ToFloat64(m.storeErrors.WithLabelValues("ping")), 1},
		{testutil.ToFloat64(m.storeErrors.WithLabelValues("plants")), 1},
		{testutil.ToFloat64(m.storeErrors.WithLabelValues("delete_plant")), 1},
		{float64(testutil.CollectAndCount(m.storeErrors)), 4}, // no "token" or "plant" series
	} {
		if c.got != c.want {
			t.Errorf("got %v, want %v", c.got, c.want)
		}
	}

	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	body, _ := io.ReadAll(rec.Body)
	for _, want := range []string{
		`plantgate_plugin_instances{plugin="bearer-auth"} 3`,
		`plantgate_plugin_pool_size{plugin="bearer-auth"} 4`,
		`plantgate_plugin_pool_wait_seconds_count{plugin="bearer-auth"} 1`,
		`plantgate_store_duration_seconds_count{op="token"} 1`,
		`plantgate_store_duration_seconds_count{op="plant"} 1`,
		`plantgate_http_request_duration_seconds_count{route="/plants"} 2`,
		`plantgate_build_info{go_version="go`,
		"go_goroutines ",
	} {
		if !strings.Contains(string(body), want) {
			t.Errorf("metrics lack %q", want)
		}
	}
}

// BenchmarkObserve: a plugin call and a request observed, as the gateway
// does per request, against the Prometheus label lookups they replace.
func BenchmarkObserve(b *testing.B) {
	m := New()
	b.Run("cached-series", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			m.PluginCall("bearer-auth", "authorize", "allow", time.Microsecond)
			m.Request("/plants", 200, time.Millisecond)
		}
	})
	b.Run("label-lookups-baseline", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			m.pluginCalls.WithLabelValues("bearer-auth", "authorize", "allow").Inc()
			m.pluginTime.WithLabelValues("bearer-auth", "authorize").Observe(1e-6)
			m.requests.WithLabelValues("/plants", "200").Inc()
			m.requestTime.WithLabelValues("/plants").Observe(1e-3)
		}
	})
}
