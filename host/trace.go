package host

import "context"

// Trace records what the policy decided for one request, for its access
// log line. The HTTP layer puts one in the request's context with
// WithTrace; a Policy fills it in when a plugin denies or fails.
type Trace struct {
	Plugin string // the plugin whose deny or fault ended a chain; "" when none did
	Phase  string // that plugin's phase: "authorize" or "validate"
}

type traceKey struct{}

// WithTrace returns ctx carrying t.
func WithTrace(ctx context.Context, t *Trace) context.Context {
	return context.WithValue(ctx, traceKey{}, t)
}

// TraceFrom returns the Trace in ctx, or nil.
func TraceFrom(ctx context.Context) *Trace {
	t, _ := ctx.Value(traceKey{}).(*Trace)
	return t
}
