package metrics

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/prometheus/client_golang/prometheus/testutil"
	goredis "github.com/redis/go-redis/v9"

	"github.com/plantgate/plantgate/host"
	"github.com/plantgate/plantgate/host/redis"
	"github.com/plantgate/plantgate/host/redis/redistest"
	"github.com/plantgate/plantgate/host/webhook"
)

// signalObserver passes each finished delivery to the metrics, then tells
// the test: scraping after the signal sees the delivery and its attempts.
type signalObserver struct {
	*WebhookMetrics
	outcomes chan string
}

func (o signalObserver) WebhookDelivery(outcome string) {
	o.WebhookMetrics.WebhookDelivery(outcome)
	o.outcomes <- outcome
}

// The webhook metrics through the real deliverer, store and /metrics
// handler, after a known sequence: event 1 delivered at once, event 2
// answered 500 then 204, event 3 answered 500 until its attempts (2) run
// out. Exact values: deliveries by outcome, attempts by result, backlog and
// age of the oldest pending event, mid-way (event 2's second attempt held
// by the receiver) and at the end.
func TestWebhookMetricsAfterKnownSequence(t *testing.T) {
	t.Parallel()
	t.Run("miniredis", func(t *testing.T) {
		t.Parallel()
		testWebhookMetrics(t, miniredis.RunT(t).Addr())
	})
	t.Run("redis-server", func(t *testing.T) {
		t.Parallel()
		testWebhookMetrics(t, redistest.Start(t).Addr())
	})
}

func testWebhookMetrics(t *testing.T, addr string) {
	ctx := context.Background()
	store, err := redis.Open(ctx, "redis://"+addr, redis.Options{KeyPrefix: "m:"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	raw := goredis.NewClient(&goredis.Options{Addr: addr})
	t.Cleanup(func() { raw.Close() })

	m := New()
	w := m.Webhooks(store.WebhookBacklog)
	// Events happened at t0, t0+10s and t0+20s; the scrapes run at t0+90s.
	t0 := time.UnixMilli(1_700_000_000_000)
	w.now = func() time.Time { return t0.Add(90 * time.Second) }
	scrape := httptest.NewServer(m.Handler())
	t.Cleanup(scrape.Close)

	// The receiver answers by the plant id in the body, and holds event 2's
	// second attempt until released.
	second, release := make(chan struct{}), make(chan struct{})
	var mu sync.Mutex
	tries := map[int]int{}
	recv := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		var body struct {
			Data struct{ ID int } `json:"data"`
		}
		if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
			rw.WriteHeader(http.StatusBadRequest)
			return
		}
		mu.Lock()
		tries[body.Data.ID]++
		n := tries[body.Data.ID]
		mu.Unlock()
		switch {
		case body.Data.ID == 1:
			rw.WriteHeader(http.StatusNoContent)
		case body.Data.ID == 2 && n == 2:
			close(second)
			<-release
			rw.WriteHeader(http.StatusOK)
		default:
			rw.WriteHeader(http.StatusInternalServerError)
		}
	}))
	t.Cleanup(recv.Close)
	t.Cleanup(func() {
		select {
		case <-release:
		default:
			close(release) // a failed test must not leave the receiver blocked
		}
	})
	secret, err := webhook.NewSecret()
	if err != nil {
		t.Fatal(err)
	}
	if err := store.AddEndpoint(ctx, host.Endpoint{ID: "ep", URL: recv.URL, Events: host.AllEvents, Secret: secret, Created: time.Now()}); err != nil {
		t.Fatal(err)
	}

	compare := func(stage string, delivered, retry, failed, ok2xx, err5xx, backlog int, age float64) {
		t.Helper()
		attempts := ""
		if ok2xx > 0 {
			attempts += fmt.Sprintf("plantgate_webhook_attempts_total{result=\"2xx\"} %d\n", ok2xx)
		}
		if err5xx > 0 {
			attempts += fmt.Sprintf("plantgate_webhook_attempts_total{result=\"5xx\"} %d\n", err5xx)
		}
		if attempts != "" {
			attempts = "# HELP plantgate_webhook_attempts_total Webhook POST attempts by result: 2xx, 3xx, 4xx, 5xx, timeout, error (connection failed), refused (forbidden address).\n" +
				"# TYPE plantgate_webhook_attempts_total counter\n" + attempts
		}
		want := fmt.Sprintf(`# HELP plantgate_webhook_deliveries_total Webhook delivery attempts' consequences: delivered, retry (another attempt scheduled) or failed (kept for replay).
# TYPE plantgate_webhook_deliveries_total counter
plantgate_webhook_deliveries_total{outcome="delivered"} %d
plantgate_webhook_deliveries_total{outcome="failed"} %d
plantgate_webhook_deliveries_total{outcome="retry"} %d
%s# HELP plantgate_webhook_backlog Webhook deliveries and outbox entries not yet handled.
# TYPE plantgate_webhook_backlog gauge
plantgate_webhook_backlog %d
# HELP plantgate_webhook_oldest_pending_age_seconds Age of the oldest event not yet delivered (0: none).
# TYPE plantgate_webhook_oldest_pending_age_seconds gauge
plantgate_webhook_oldest_pending_age_seconds %g
`, delivered, failed, retry, attempts, backlog, age)
		if err := testutil.ScrapeAndCompare(scrape.URL, strings.NewReader(want),
			"plantgate_webhook_deliveries_total", "plantgate_webhook_attempts_total",
			"plantgate_webhook_backlog", "plantgate_webhook_oldest_pending_age_seconds"); err != nil {
			t.Fatalf("%s: %v", stage, err)
		}
		resp, err := http.Get(scrape.URL)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if line := fmt.Sprintf("\nplantgate_webhook_attempt_duration_seconds_count %d\n", ok2xx+err5xx); !strings.Contains(string(body), line) {
			t.Fatalf("%s: metrics lack %q", stage, strings.TrimSpace(line))
		}
	}
	compare("before any event", 0, 0, 0, 0, 0, 0, 0)

	obs := signalObserver{WebhookMetrics: w, outcomes: make(chan string, 16)}
	d := webhook.New(store, webhook.Options{
		AllowPrivate: true, Backoff: 5 * time.Millisecond, MaxAttempts: 2, Poll: 20 * time.Millisecond,
		Consumer: "gw", Observer: obs,
	})
	if err := d.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := d.Close(ctx); err != nil {
			t.Error(err)
		}
	})
	for i, shard := range []int{1, 6, 11} {
		ts := t0.Add(time.Duration(i) * 10 * time.Second).UnixMilli()
		if err := raw.XAdd(ctx, &goredis.XAddArgs{
			Stream: fmt.Sprintf("m:{p%02d}:events", shard),
			Values: []any{redis.EventFieldType, host.EventPlantCreated, redis.EventFieldTS, strconv.FormatInt(ts, 10),
				redis.EventFieldData, fmt.Sprintf(`{"id":%d,"name":"Fern"}`, i+1)},
		}).Err(); err != nil {
			t.Fatal(err)
		}
	}

	// Mid-way: event 1 delivered; event 2 retried once, its second attempt
	// at the receiver; event 3 retried once, then failed.
	wait := func(want map[string]int) {
		t.Helper()
		got := map[string]int{}
		for n := 0; n < sum(want); n++ {
			select {
			case o := <-obs.outcomes:
				got[o]++
			case <-time.After(15 * time.Second):
				t.Fatalf("outcomes %v, want %v", got, want)
			}
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("outcomes %v, want %v", got, want)
		}
	}
	wait(map[string]int{"delivered": 1, "retry": 2, "failed": 1})
	select {
	case <-second:
	case <-time.After(15 * time.Second):
		t.Fatal("event 2's second attempt never came")
	}
	// The outbox entries are acknowledged right after their deliveries
	// were recorded; wait for that stored state.
	deadline := time.Now().Add(15 * time.Second)
	for _, shard := range []int{1, 6, 11} {
		for {
			p, err := raw.XPending(ctx, fmt.Sprintf("m:{p%02d}:events", shard), "webhooks").Result()
			if err != nil {
				t.Fatal(err)
			}
			if p.Count == 0 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("shard %d: %d outbox entries never acknowledged", shard, p.Count)
			}
			time.Sleep(5 * time.Millisecond) // polling stored state, not ordering events
		}
	}
	// Backlog: event 2's delivery only (the outbox is acknowledged); its
	// event happened at t0+10s, 80 s before the scrape.
	compare("mid-way", 1, 2, 1, 1, 3, 1, 80)

	close(release)
	wait(map[string]int{"delivered": 1})
	compare("at the end", 2, 2, 1, 2, 3, 0, 0)
}

func sum(m map[string]int) (n int) {
	for _, v := range m {
		n += v
	}
	return n
}
