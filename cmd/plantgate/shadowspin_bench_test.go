package main

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"sync"
	"testing"
	"time"
)

// BenchmarkLiveBesideSpinningShadow measures the live chain's latency
// (GET /plants/1 through the real Fiber stack, bearer-auth and plant-rules
// live) with no shadow, and beside an authorize shadow that spins on every
// call until its 100 ms deadline (testdata/abi/spinquiet), its pool at the
// default (wasm.DefaultShadowInstances). It reports the p50, p99 and max of
// two clients' requests; compare the rows of one run:
//
//	go test -run '^$' -bench LiveBesideSpinningShadow -benchtime 3000x ./cmd/plantgate/
func BenchmarkLiveBesideSpinningShadow(b *testing.B) {
	for _, bc := range []struct{ name, sidecar string }{
		{"no-shadow", ""},
		{"shadow-default", `{"limits": {"timeout_ms": 100}}`},
	} {
		b.Run(bc.name, func(b *testing.B) {
			dir := pluginsDir(b, "10-bearer-auth.wasm", "20-plant-rules.wasm")
			if bc.sidecar != "" {
				withFixture(b, dir, "spinquiet", "10-bearer-auth.shadow.wasm", bc.sidecar)
			}
			m := &Main{Listen: "127.0.0.1:0", PluginsDir: dir, BootstrapToken: testToken, CacheDir: sharedCache,
				Logger: slog.New(slog.DiscardHandler)}
			if err := m.Run(context.Background()); err != nil {
				b.Fatal(err)
			}
			defer m.Close()
			base := "http://" + m.Addr().String()
			if status, body := post(b, base, testToken, `{"id":1,"name":"Fern"}`); status != 200 {
				b.Fatalf("create: %d %s", status, body)
			}
			const clients = 2
			took := make([][]time.Duration, clients)
			var wg sync.WaitGroup
			b.ResetTimer()
			for c := range clients {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for range b.N / clients {
						req, _ := http.NewRequest("GET", base+"/plants/1", nil)
						req.Header.Set("Authorization", "Bearer "+testToken)
						start := time.Now()
						resp, err := http.DefaultClient.Do(req)
						if err != nil {
							b.Error(err)
							return
						}
						io.Copy(io.Discard, resp.Body)
						resp.Body.Close()
						took[c] = append(took[c], time.Since(start))
						if resp.StatusCode != 200 {
							b.Errorf("status %d", resp.StatusCode)
							return
						}
					}
				}()
			}
			wg.Wait()
			b.StopTimer()
			all := slices.Concat(took...)
			slices.Sort(all)
			if len(all) == 0 {
				return
			}
			q := func(f float64) float64 { return float64(all[int(f*float64(len(all)-1))].Microseconds()) / 1000 }
			b.ReportMetric(q(0.5), "p50-ms")
			b.ReportMetric(q(0.99), "p99-ms")
			b.ReportMetric(q(1), "max-ms")
			b.Logf("%s: %d requests, p50 %.2f ms, p99 %.2f ms, max %.2f ms", bc.name, len(all), q(0.5), q(0.99), q(1))
		})
	}
}
