// Package fleet keeps a gateway in step with the fleet's plugin chain in
// the store: StoreSource reads that chain for a wasm.Reloader, Member polls
// its version, reloads and reports the gateway's state in heartbeats, and
// Read says whether the fleet converged.
//
// # Why a poll, not pub/sub
//
// A Member reads the chain's version (one HGET) every PollInterval,
// 250 ms: a push reaches every gateway within that plus the time to load
// the new chain, well inside the 2 s the fleet promises. Pub/sub would save
// those reads, but a message is delivered at most once: one published while
// a gateway reconnects (or its node fails over) is lost, so a poll would be
// needed anyway. The poll works the same on one node, a Cluster, Sentinel
// and the embedded store, and costs 4 reads a second per gateway.
package fleet

import (
	"context"
	"fmt"

	"github.com/plantgate/plantgate/host/redis"
	"github.com/plantgate/plantgate/host/wasm"
)

// StoreSource is the wasm.Source of the fleet's chain in the store.
type StoreSource struct{ Store *redis.Store }

func (s StoreSource) String() string { return "store " + s.Store.Addr() }

// Snapshot implements wasm.Source: the manifest and every module it names,
// each checked against its digest.
func (s StoreSource) Snapshot(ctx context.Context) (wasm.Snapshot, error) {
	m, err := s.Store.PluginManifest(ctx)
	if err != nil {
		return wasm.Snapshot{}, fmt.Errorf("read the plugin chain: %w", err)
	}
	return SnapshotOf(ctx, s.Store, m)
}

// SnapshotOf is the chain m as a gateway loads it: every module it names
// read from st and checked against its digest. Fleet commands check what
// they publish, and verify what they sign over, on it.
func SnapshotOf(ctx context.Context, st *redis.Store, m redis.PluginManifest) (wasm.Snapshot, error) {
	snap := wasm.Snapshot{Version: m.Version, Files: make([]wasm.File, 0, len(m.Plugins)), Sig: m.Sig}
	for _, p := range m.Plugins {
		mod, err := st.PluginModule(ctx, p.Module)
		if err != nil {
			return wasm.Snapshot{}, fmt.Errorf("plugin %s (chain version %d): %w", p.File, m.Version, err)
		}
		snap.Files = append(snap.Files, wasm.File{Name: p.File, Module: mod, Sidecar: p.Sidecar, Sig: p.Sig})
	}
	return snap, nil
}
