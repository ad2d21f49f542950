package wasm

import (
	"context"
	"time"

	"github.com/plantgate/plantgate/host"
)

// Observer is told what the plugins do, so that a metrics package can count
// it without this package importing one. Its methods are called on the
// request path and must be cheap and safe for concurrent use.
type Observer interface {
	// PluginCall reports one phase call into plugin ("bearer-auth"):
	// phase is "authorize" or "validate", outcome one of the Outcome
	// constants, and took the time from asking for an instance to the
	// decision, waiting for the pool included.
	PluginCall(plugin, phase, outcome string, took time.Duration)
	// PoolWait reports a call that found no idle instance of plugin and
	// waited for one (successfully or not) for waited.
	PoolWait(plugin string, waited time.Duration)
	// Reload reports a reload of a plugins directory: outcome is
	// ReloadApplied, ReloadUnchanged or ReloadRefused.
	Reload(outcome string)
}

// Outcomes of a phase call, as Observer.PluginCall reports them.
const (
	OutcomeAllow = "allow"
	OutcomeDeny  = "deny"
	OutcomeFault = "fault" // trap, panic, timeout, bad decision: failed closed
	OutcomeBusy  = "busy"  // no instance free before the deadline, or shutting down
)

// Outcomes of a reload, as Observer.Reload reports them.
const (
	ReloadApplied   = "applied"
	ReloadUnchanged = "unchanged"
	ReloadRefused   = "refused"
)

// outcome classifies the result of a phase call.
func outcome(err error) string {
	if err == nil {
		return OutcomeAllow
	}
	switch host.Code(err) {
	case host.ErrPluginFault, host.ErrPluginBadDecision, host.ErrInternal:
		return OutcomeFault
	case host.ErrPluginBusy, host.ErrNotReady:
		return OutcomeBusy
	}
	return OutcomeDeny
}

// note records the outcome of one plugin call on the context's trace and
// observer.
func (p *Plugin) note(ctx context.Context, phase string, start time.Time, err error) {
	if err != nil {
		if t := host.TraceFrom(ctx); t != nil {
			t.Plugin, t.Phase = p.info.Name, phase
		}
	}
	if p.obs != nil {
		p.obs.PluginCall(p.info.Name, phase, outcome(err), time.Since(start))
	}
}

// noteWait reports a wait for an instance that began at start.
func (p *Plugin) noteWait(start time.Time) {
	if p.obs != nil {
		p.obs.PoolWait(p.info.Name, time.Since(start))
	}
}
