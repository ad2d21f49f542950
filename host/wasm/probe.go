package wasm

import (
	"context"
	"errors"
	"fmt"

	"github.com/plantgate/plantgate/sdk/abi"
)

// ProbeBuffer asks one instance's plantgate_buffer for a request buffer of n
// bytes, exactly as the first phase call of that size would, and returns why
// the answer is no buffer (0, or outside memory), or nil. Loading never
// calls plantgate_buffer, so without this probe a module whose buffer export
// is broken loads and then fails every request (plugin check).
func (p *Plugin) ProbeBuffer(ctx context.Context, n uint32) error {
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
