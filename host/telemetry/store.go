package telemetry

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/plantgate/plantgate/host"
)

// Store wraps s so that each call made in a sampled request's span gets a
// child span of its own ("redis create_plant", kind client). A call outside
// any recording span (start-up, a request not sampled) is passed through
// untouched and costs one check.
//
// Spans are around the store's operations rather than Redis commands
// (redisotel): creates from concurrent requests are batched into one
// pipeline, whose commands belong to no single request, and the
// background readers (outbox, heartbeats) would make a root trace a
// second. A create or delete also carries its span's traceparent to the
// outbox event it writes (host.WithTraceParent), so that the webhook
// delivery of that event joins the trace.
func Store(s host.Store, tracer trace.Tracer) host.Store {
	return &store{s: s, tracer: tracer}
}

type store struct {
	s      host.Store
	tracer trace.Tracer
}

var _ host.Store = (*store)(nil)

// start starts op's span when ctx's span records; span is nil otherwise.
func (st *store) start(ctx context.Context, op string, attrs ...attribute.KeyValue) (context.Context, trace.Span) {
	if !trace.SpanFromContext(ctx).IsRecording() {
		return ctx, nil
	}
	attrs = append(attrs, attribute.String("db.system.name", "redis"), attribute.String("db.operation.name", op))
	return st.tracer.Start(ctx, "redis "+op, trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(attrs...))
}

func end(span trace.Span, err error) {
	if span == nil {
		return
	}
	if err != nil {
		switch c := host.Code(err); c {
		case host.ErrPlantNotFound, host.ErrTokenNotFound, host.ErrConflict:
			span.SetAttributes(attribute.Int("plantgate.error", int(c)))
		default:
			span.SetAttributes(attribute.Int("plantgate.error", int(c)))
			span.SetStatus(codes.Error, err.Error())
		}
	}
	span.End()
}

func (st *store) CreatePlant(ctx context.Context, p host.Plant) (bool, error) {
	ctx, span := st.start(ctx, "create_plant", attribute.Int64("plantgate.plant.id", p.ID))
	if span != nil {
		ctx = host.WithTraceParent(ctx, TraceParent(ctx))
	}
	created, err := st.s.CreatePlant(ctx, p)
	if span != nil {
		span.SetAttributes(attribute.Bool("plantgate.plant.created", created))
	}
	end(span, err)
	return created, err
}

func (st *store) Plant(ctx context.Context, id int64) (host.Plant, error) {
	ctx, span := st.start(ctx, "plant", attribute.Int64("plantgate.plant.id", id))
	p, err := st.s.Plant(ctx, id)
	end(span, err)
	return p, err
}

func (st *store) Plants(ctx context.Context, after *int64, limit int) (host.Page, error) {
	ctx, span := st.start(ctx, "plants", attribute.Int("plantgate.page.limit", limit))
	page, err := st.s.Plants(ctx, after, limit)
	end(span, err)
	return page, err
}

func (st *store) DeletePlant(ctx context.Context, id int64) error {
	ctx, span := st.start(ctx, "delete_plant", attribute.Int64("plantgate.plant.id", id))
	if span != nil {
		ctx = host.WithTraceParent(ctx, TraceParent(ctx))
	}
	err := st.s.DeletePlant(ctx, id)
	end(span, err)
	return err
}

func (st *store) Token(ctx context.Context, digest [32]byte) (host.Token, error) {
	ctx, span := st.start(ctx, "token")
	t, err := st.s.Token(ctx, digest)
	end(span, err)
	return t, err
}

func (st *store) Ping(ctx context.Context) error { return st.s.Ping(ctx) }
