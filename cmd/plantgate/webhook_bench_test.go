package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/plantgate/plantgate/host/redis/redistest"
)

// BenchmarkWebhookLatency measures event → receiver latency through a real
// gateway process at a steady rate: an outbox entry is written (as a create
// does) every 2 ms for 10 s, and the receiver notes when each arrives.
//
//	go test -run '^$' -bench WebhookLatency -benchtime 1x ./cmd/plantgate/
func BenchmarkWebhookLatency(b *testing.B) {
	srv := redistest.Start(b, redistest.WithArgs("--appendonly", "yes", "--appendfsync", "everysec"))
	var mu sync.Mutex
	sent := map[string]time.Time{}
	var lat []time.Duration
	recv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		now := time.Now()
		mu.Lock()
		if at, ok := sent[r.Header.Get("webhook-id")]; ok {
			lat = append(lat, now.Sub(at))
			delete(sent, r.Header.Get("webhook-id"))
		}
		mu.Unlock()
		w.WriteHeader(204)
	}))
	defer recv.Close()
	out, errOut, code := runCLI(b, "", "webhook", "--redis-url", srv.URL(), "add", "--url", recv.URL, "--allow-private")
	if code != 0 {
		b.Fatal(out, errOut)
	}
	webhookGateway(b, srv.URL(), "--access-log=false")
	rc := goredis.NewClient(&goredis.Options{Addr: srv.Addr()})
	defer rc.Close()
	b.ResetTimer()
	const every, total = 2 * time.Millisecond, 5000
	tick := time.NewTicker(every)
	defer tick.Stop()
	for i := range total {
		<-tick.C
		shard := i % 16
		now := time.Now()
		mu.Lock()
		sid, err := rc.XAdd(context.Background(), &goredis.XAddArgs{
			Stream: fmt.Sprintf("plantgate:{p%02d}:events", shard),
			Values: []any{"type", "plant.created", "ts", strconv.FormatInt(now.UnixMilli(), 10), "data", fmt.Sprintf(`{"id":%d,"name":"p"}`, i)},
		}).Result()
		if err != nil {
			mu.Unlock()
			b.Fatal(err)
		}
		sent[fmt.Sprintf("msg_p%02d_%s", shard, sid)] = now
		mu.Unlock()
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		mu.Lock()
		n := len(lat)
		mu.Unlock()
		if n == total || time.Now().After(deadline) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	b.StopTimer()
	mu.Lock()
	defer mu.Unlock()
	slices.Sort(lat)
	if len(lat) < total {
		b.Fatalf("%d of %d events arrived", len(lat), total)
	}
	q := func(p float64) float64 { return float64(lat[int(p*float64(len(lat)-1))].Microseconds()) / 1000 }
	b.ReportMetric(q(0.5), "p50-ms")
	b.ReportMetric(q(0.99), "p99-ms")
	b.ReportMetric(q(1), "max-ms")
	b.ReportMetric(float64(total)/(float64(total)*every.Seconds()), "events/s")
}
