package wasm

import (
	"context"
	"errors"
	"time"

	"github.com/plantgate/plantgate/host"
	"github.com/plantgate/plantgate/sdk/abi"
)

// Chain runs plugins in order for each phase; it is the gateway's
// host.Policy.
//
// For each phase, the plugins that serve it run in order and the first deny
// or fault ends the chain: later plugins do not run. Authorize returns the
// principal named by the first plugin that named one, so a later plugin (a
// rate limiter, an audit hook) cannot change who the request is from.
type Chain struct {
	plugins   []*Plugin
	authorize []*Plugin
	validate  []*Plugin
	// kept[i] is authorize[i]'s decision cache, nil when it declares none:
	// the chain's own, so a changed chain starts empty (decisioncache.go).
	kept []*decisions
	// ext holds the slots when some plugin is a shadow or a canary
	// (shadow.go); nil otherwise, and calls take the plain path.
	ext *extras
}

var _ host.Policy = (*Chain)(nil)

// NewChain returns a chain of plugins in the order given. The chain owns
// them: Close closes them.
func NewChain(plugins ...*Plugin) *Chain {
	c := &Chain{plugins: plugins, ext: newExtras(plugins)}
	for _, p := range plugins {
		if _, role := FileRole(p.info.File); role != RoleLive {
			continue // shadow.go's steps call it
		}
		if p.info.phases&abi.PhaseAuthorize != 0 {
			c.authorize = append(c.authorize, p)
			var kept *decisions
			if p.stamped != nil {
				kept = newDecisions(p.decisionCfg)
			}
			c.kept = append(c.kept, kept)
		}
		if p.info.phases&abi.PhaseValidate != 0 {
			c.validate = append(c.validate, p)
		}
	}
	return c
}

// keptOf returns the decision cache of the live authorize plugin p, nil
// for one without, or for a canary: a canary's share is small and its
// answers are the ones under study, so each is a call.
func (c *Chain) keptOf(p *Plugin) *decisions {
	for i, q := range c.authorize {
		if q == p {
			return c.kept[i]
		}
	}
	return nil
}

// Empty returns a chain with no plugins: it allows everything and
// Authorizes reports false.
func Empty() *Chain { return NewChain() }

// Authorize implements host.Policy. On a deny or fault it returns the
// error and the principal an earlier plugin named, if any, for the log.
func (c *Chain) Authorize(ctx context.Context, r host.AuthorizeRequest) (principal string, err error) {
	if c.ext != nil {
		return c.authorizeExt(ctx, r)
	}
	if len(c.authorize) == 0 {
		return "", nil
	}
	digest := requestDigest(ctx, r.Credential) // once for every plugin of the chain
	for i, p := range c.authorize {
		start := time.Now()
		named, err := p.authorize(ctx, r, digest, c.kept[i])
		p.note(ctx, "authorize", start, err)
		if p.decisions != nil && p.decisions.Wants(ctx) {
			p.recordAuthorize(ctx, r, named, start, err, false)
		}
		if err != nil {
			// The principal an earlier plugin named is kept for the log.
			return principal, err
		}
		if principal == "" {
			principal = named
		}
	}
	return principal, nil
}

// Validate implements host.Policy.
func (c *Chain) Validate(ctx context.Context, plant host.Plant, principal string) error {
	if c.ext != nil {
		return c.validateExt(ctx, plant, principal)
	}
	for _, p := range c.validate {
		start := time.Now()
		err := p.Validate(ctx, plant, principal)
		p.note(ctx, "validate", start, err)
		if p.decisions != nil && p.decisions.Wants(ctx) {
			p.recordValidate(ctx, plant, principal, start, err, false)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// Authorizes implements host.Policy: whether any plugin serves the
// authorize phase.
func (c *Chain) Authorizes() bool { return len(c.authorize) > 0 }

// Plugins describes the chain's plugins in order.
func (c *Chain) Plugins() []PluginInfo {
	infos := make([]PluginInfo, len(c.plugins))
	for i, p := range c.plugins {
		infos[i] = p.Info()
	}
	return infos
}

// Stats returns each plugin's counters, in chain order.
func (c *Chain) Stats() []Stats {
	stats := make([]Stats, len(c.plugins))
	for i, p := range c.plugins {
		stats[i] = p.Stats()
	}
	return stats
}

// Memory returns each plugin's linear memory (Plugin.Memory), in chain order.
func (c *Chain) Memory() []int64 {
	mem := make([]int64, len(c.plugins))
	for i, p := range c.plugins {
		mem[i] = p.Memory()
	}
	return mem
}

// Close closes every plugin, waiting for calls in flight until ctx is done.
func (c *Chain) Close(ctx context.Context) error {
	var errs []error
	for _, p := range c.plugins {
		errs = append(errs, p.Close(ctx))
	}
	return errors.Join(errs...)
}
