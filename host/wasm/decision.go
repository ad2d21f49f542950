package wasm

import (
	"context"
	"time"

	"github.com/plantgate/plantgate/host"
)

// recordAuthorize hands an authorize call's decision to the plugin's
// DecisionRecorder (Options.Decisions): the decision log and the trace span
// both, in one call. Call it only once Wants said yes:
//
//	if p.decisions != nil && p.decisions.Wants(ctx) {
//		p.recordAuthorize(ctx, r, named, start, err, shadow)
//	}
//
// It is a function of its own so that the Decision it builds (which
// escapes into the recorder) costs nothing to a request that records
// nothing. shadow marks a shadow plugin's decision (recorded, not
// enforced); live and shadow calls go through the same two functions.
func (p *Plugin) recordAuthorize(ctx context.Context, r host.AuthorizeRequest, named string, start time.Time, err error, shadow bool) {
	d := p.decision("authorize", start, err)
	d.Shadow = shadow
	d.Principal = named
	d.Input = host.DecisionInput{Method: r.Method, Path: r.Path, Route: r.Route, PathID: r.PathID, HasPathID: r.HasPathID}
	p.decisions.Record(ctx, d)
}

// recordValidate is recordAuthorize for the validate phase.
func (p *Plugin) recordValidate(ctx context.Context, plant host.Plant, principal string, start time.Time, err error, shadow bool) {
	d := p.decision("validate", start, err)
	d.Shadow = shadow
	// The validate phase judges creates only: POST /plants.
	d.Input = host.DecisionInput{Method: "POST", Path: "/plants", Route: "POST /plants", Plant: &plant, Principal: principal}
	p.decisions.Record(ctx, d)
}

// decision is the part of a Decision every phase shares.
func (p *Plugin) decision(phase string, start time.Time, err error) *host.Decision {
	d := &host.Decision{
		Plugin: p.info.Name, SHA256: p.info.SHA256, Phase: phase,
		Outcome: outcome(err), Start: start, Took: time.Since(start),
	}
	if err != nil {
		d.Code = host.Code(err)
		if d.Outcome == OutcomeDeny {
			if e, ok := err.(*host.Error); ok {
				d.Message = e.Message
			}
		}
	}
	return d
}
