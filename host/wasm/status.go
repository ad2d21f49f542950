package wasm

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"time"

	"github.com/plantgate/plantgate/host/pluginsig"
)

// ReloadStatus says which chain a Reloader serves, since when, and how the
// last reload went: what an operator asks after a deploy.
type ReloadStatus struct {
	// Generation is 1 for the chain loaded at start, plus one per applied
	// reload; 0 once the Reloader is closed.
	Generation uint64
	// Since is when the current chain was swapped in.
	Since time.Time
	// Version is the source's chain version the current chain stands for
	// (the store's manifest version; 0 for a directory), and Digest its
	// ChainDigest: what a heartbeat reports and `plugin status` compares.
	Version uint64
	Digest  string
	// LastReload is when Reload last ran, whatever its outcome; zero when
	// it has not run since start.
	LastReload time.Time
	// LastOutcome is that reload's ReloadApplied, ReloadUnchanged or
	// ReloadRefused; "" when none ran.
	LastOutcome string
	// Refusal is the error of the last refused reload, and RefusedAt when
	// it happened; a later applied reload does not clear them, so a
	// refusal that was fixed can still be read with its time.
	Refusal   string
	RefusedAt time.Time
}

// PluginState is one plugin of the current chain as a console shows it.
type PluginState struct {
	Info   PluginInfo
	Stats  Stats
	Memory int64 // guest linear memory in bytes, all instances
	// Config is the config passed to plantgate_configure, as written in the
	// sidecar; nil when none. It may hold secrets: whoever shows it masks
	// them.
	Config json.RawMessage
}

// Snapshot returns the status and the current chain's plugins in order,
// all read from one generation so a reload in between cannot mix two.
func (r *Reloader) Snapshot() (ReloadStatus, []PluginState) {
	g := r.acquire()
	defer g.release()
	r.statusMu.Lock()
	st := r.status
	r.statusMu.Unlock()
	st.Generation, st.Since, st.Version, st.Digest = g.seq, g.since, g.ver.Load(), g.dig
	if g.chain == nil {
		return st, nil
	}
	plugins := make([]PluginState, len(g.chain.plugins))
	for i, p := range g.chain.plugins {
		plugins[i] = PluginState{Info: p.Info(), Stats: p.Stats(), Memory: p.Memory()}
		if p.config != nil {
			plugins[i].Config = bytes.Clone(p.config)
		}
	}
	return st, plugins
}

// recordReload notes a Reload's outcome for Snapshot.
func (r *Reloader) recordReload(at time.Time, outcome string, err error) {
	r.statusMu.Lock()
	defer r.statusMu.Unlock()
	r.status.LastReload, r.status.LastOutcome = at, outcome
	if err != nil {
		r.status.Refusal, r.status.RefusedAt = err.Error(), at
	}
}

// ChainDigest is pluginsig.ChainDigest of files: what heartbeats report,
// `plugin status` compares and a chain signature covers.
func ChainDigest(files []File) string {
	entries := make([]pluginsig.ChainEntry, len(files))
	for i, f := range files {
		m := sha256.Sum256(f.Module)
		entries[i] = pluginsig.ChainEntry{File: f.Name, Module: hex.EncodeToString(m[:]), Sidecar: f.Sidecar}
	}
	return pluginsig.ChainDigest(entries)
}
