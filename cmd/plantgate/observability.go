package main

import (
	"context"
	"fmt"

	"github.com/urfave/cli/v3"
	"go.opentelemetry.io/otel/trace"

	"github.com/plantgate/plantgate/host"
	"github.com/plantgate/plantgate/host/buildinfo"
	"github.com/plantgate/plantgate/host/decisionlog"
	"github.com/plantgate/plantgate/host/telemetry"
)

// observabilityFlags are serve's decision log flags and what a request's
// trace makes of the client's traceparent; tracing itself is configured by
// the OTEL_* environment variables (host/telemetry).
func observabilityFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "decision-log", Usage: "write every plugin decision as a JSON line (OPA decision-log fields) to this file, or - for standard output; empty: off", Sources: env("DECISION_LOG")},
		&cli.FloatFlag{Name: "decision-log-sample", Value: 1, Usage: "share of requests whose decisions are logged, 0 to 1 (decided by request id: a request's decisions are logged together)", Sources: env("DECISION_LOG_SAMPLE")},
		&cli.StringFlag{Name: "trace-incoming", Value: traceLink, Usage: "what a request's trace makes of the client's traceparent: link (start a new trace with a span link to the client's span: the client picks neither the trace id nor the sampling; for a public listener) or honour (continue the client's trace: behind a proxy that sets or checks traceparent)", Sources: env("TRACE_INCOMING")},
		&cli.IntFlag{Name: "decision-log-max-mib", Value: decisionlog.DefaultMaxBytes >> 20, Usage: "rotate the decision log file to PATH.1 once it would pass this size (the log keeps at most about twice this on disk)", Sources: env("DECISION_LOG_MAX_MIB")},
	}
}

// Values of --trace-incoming.
const (
	traceLink   = "link"
	traceHonour = "honour"
)

// traceIncoming reads --trace-incoming: whether to trust the client's
// traceparent.
func traceIncoming(cmd *cli.Command) (bool, error) {
	switch v := cmd.String("trace-incoming"); v {
	case traceLink:
		return false, nil
	case traceHonour:
		return true, nil
	default:
		return false, fmt.Errorf("--trace-incoming %q: want link or honour", v)
	}
}

// decisionLogConfig reads the decision log flags.
func decisionLogConfig(cmd *cli.Command) (decisionlog.Config, error) {
	c := decisionlog.Config{Path: cmd.String("decision-log"), SampleRate: cmd.Float("decision-log-sample"), MaxBytes: int64(cmd.Int("decision-log-max-mib")) << 20}
	if c.SampleRate < 0 || c.SampleRate > 1 {
		return c, fmt.Errorf("--decision-log-sample %v: want a share from 0 to 1", c.SampleRate)
	}
	if c.MaxBytes <= 0 {
		return c, fmt.Errorf("--decision-log-max-mib %d: want 1 or more", cmd.Int("decision-log-max-mib"))
	}
	if c.SampleRate == 0 && c.Path != "" {
		return c, fmt.Errorf("--decision-log-sample 0 logs nothing: leave --decision-log unset instead")
	}
	return c, nil
}

// startObservability opens the decision log and starts tracing, as
// configured; both are off by default.
func (m *Main) startObservability(ctx context.Context) error {
	version := buildinfo.Get().Version
	if m.DecisionLog.Path != "" || m.DecisionLog.Writer != nil {
		cfg := m.DecisionLog
		cfg.Version = version
		l, err := decisionlog.Open(cfg)
		if err != nil {
			return err
		}
		m.decisionLog = l
		m.metrics.DecisionLog(l.Written, l.Dropped, l.Errors)
		m.Logger.Info("writing decision log", "path", cfg.Path, "sample", cfg.SampleRate)
	}
	if m.OTelEnv != nil {
		cfg, err := telemetry.ConfigFromEnv(m.OTelEnv)
		if err != nil {
			return err
		}
		t, err := telemetry.Start(ctx, cfg, version)
		if err != nil {
			return err
		}
		if t != nil {
			m.tracing = t
			m.observed = telemetry.Store(m.observed, t.Tracer)
			m.Logger.Info("exporting traces", "protocol", cfg.Protocol, "endpoint", cfg.Endpoint, "sampler", cfg.SamplerName, "service", cfg.ServiceName)
		}
	}
	return nil
}

// decisionRecorder is what the plugin chain reports its decisions to: the
// decision log and the tracer, either, both or none (nil).
func (m *Main) decisionRecorder() host.DecisionRecorder {
	var rs []host.DecisionRecorder
	if m.decisionLog != nil {
		rs = append(rs, m.decisionLog)
	}
	if m.tracing != nil {
		rs = append(rs, telemetry.Decisions{Tracer: m.tracing.Tracer})
	}
	return host.Recorders(rs...)
}

// closeObservability writes out the decision log and the last spans; it
// runs after the server and the plugins are closed.
func (m *Main) closeObservability(ctx context.Context) []error {
	var errs []error
	if m.decisionLog != nil {
		if err := m.decisionLog.Close(); err != nil {
			errs = append(errs, fmt.Errorf("close decision log: %w", err))
		}
	}
	if m.tracing != nil {
		if err := m.tracing.Shutdown(ctx); err != nil {
			errs = append(errs, fmt.Errorf("export the last spans: %w", err))
		}
	}
	return errs
}

// tracer is the tracer when tracing is on; nil (not a no-op tracer) when
// off, so that the request path skips tracing with one nil check.
func (m *Main) tracer() trace.Tracer {
	if m.tracing == nil {
		return nil
	}
	return m.tracing.Tracer
}
