package wasm

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/plantgate/plantgate/sdk/abi"
)

// ProbeBuffer asks one instance's plantgate_buffer for a request buffer of n
// bytes, exactly as the first phase call of that size would, and returns why
// the answer is no buffer (0, or outside memory), or nil. Loading never
// calls plantgate_buffer, so without this probe a module whose buffer export
// is broken loads and then fails every request (plugin check).
//
// An OPA policy has no request buffer (its input is written where its heap
// starts): it always answers nil.
func (p *Plugin) ProbeBuffer(ctx context.Context, n uint32) error {
	if p.opa != nil {
		return nil
	}
	in, err := p.acquire(ctx)
	if err != nil {
		return err
	}
	if err := in.askBuffer(ctx, n); err != nil {
		var ce *callError
		if errors.As(err, &ce) {
			if crash := p.crashed(in, abi.ExportBuffer); crash != "" {
				err = errors.New(crash)
			}
		}
		p.release(ctx, in, true)
		return fmt.Errorf("plugin %s: %w", p.info.File, err)
	}
	p.release(ctx, in, false)
	return nil
}

// checkConfigRequired asks the first instance whether the module needs a
// config (abi.ExportConfigRequired) and refuses it when it has none.
func (p *Plugin) checkConfigRequired(ctx context.Context, in *instance) error {
	if in.mod.ExportedFunction(abi.ExportConfigRequired) == nil {
		return nil
	}
	required, err := in.callU32(ctx, abi.ExportConfigRequired)
	if err != nil {
		return err
	}
	p.info.ConfigRequired = required != 0
	if p.info.ConfigRequired && p.config == nil {
		return fmt.Errorf("requires a config (%s answered %d) and has none: give its sidecar %s a \"config\" (docs/abi.md#config)",
			abi.ExportConfigRequired, required, strings.TrimSuffix(p.info.File, ".wasm")+".json")
	}
	return nil
}
