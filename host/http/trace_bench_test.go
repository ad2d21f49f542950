package http_test

import (
	"context"
	"io"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/plantgate/plantgate/host"
	"github.com/plantgate/plantgate/host/decisionlog"
	"github.com/plantgate/plantgate/host/redis/redistest"
	"github.com/plantgate/plantgate/host/telemetry"
)

// discardExporter takes batches of spans and keeps nothing: the cost
// measured is the SDK's (spans, attributes, the batcher), not a network's.
type discardExporter struct{}

func (discardExporter) ExportSpans(context.Context, []sdktrace.ReadOnlySpan) error { return nil }
func (discardExporter) Shutdown(context.Context) error                             { return nil }

// BenchmarkCreatePlantObserved is BenchmarkCreatePlant's full path
// (bearer-auth + plant-rules, a real redis-server) with tracing and the
// decision log off (the default: what every request pays for their being
// there), tracing on but the request not sampled, tracing on at 100%, and
// the decision log on at 100%. Compare the ratios within one run:
//
//	go test -run '^$' -bench CreatePlantObserved -benchmem -count 5 ./host/http/
func BenchmarkCreatePlantObserved(b *testing.B) {
	tracer := func(b *testing.B, s sdktrace.Sampler) *sdktrace.TracerProvider {
		tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(discardExporter{}), sdktrace.WithSampler(s))
		b.Cleanup(func() { tp.Shutdown(context.Background()) })
		return tp
	}
	for _, v := range []string{"off", "tracing-not-sampled", "tracing-100%", "decision-log-100%"} {
		b.Run(v, func(b *testing.B) {
			o := gatewayOptions{redisURL: redistest.Start(b).URL()}
			switch v {
			case "tracing-not-sampled":
				o.tracer = tracer(b, sdktrace.ParentBased(sdktrace.NeverSample())).Tracer("bench")
				o.decisions = telemetry.Decisions{Tracer: o.tracer}
			case "tracing-100%":
				o.tracer = tracer(b, sdktrace.AlwaysSample()).Tracer("bench")
				o.decisions = telemetry.Decisions{Tracer: o.tracer}
			case "decision-log-100%":
				l, err := decisionlog.Open(decisionlog.Config{Writer: io.Discard, Queue: 1 << 16})
				if err != nil {
					b.Fatal(err)
				}
				b.Cleanup(func() {
					l.Close()
					if l.Dropped() != 0 {
						b.Logf("decision log dropped %d of %d lines", l.Dropped(), l.Dropped()+l.Written())
					}
				})
				o.decisions = host.DecisionRecorder(l)
			}
			benchHandler(b, newGateway(b, o).srv)
		})
	}
}
