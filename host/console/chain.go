package console

import (
	"encoding/hex"
	"fmt"
	"strings"
	"time"

	"github.com/plantgate/plantgate/host/wasm"
)

// Chain is the plugin chain as the page shows it.
type Chain struct {
	Generation  uint64      `json:"generation"`
	Since       time.Time   `json:"since"`
	LastReload  time.Time   `json:"last_reload"` // zero: none since start
	LastOutcome string      `json:"last_outcome"`
	Refusal     string      `json:"refusal"` // the last refused reload's reason; "" none
	RefusedAt   time.Time   `json:"refused_at"`
	Plugins     []PluginRef `json:"plugins"`
}

// RefusalIsCurrent says the last reload was refused: the chain in force
// is older than the plugins directory.
func (c *Chain) RefusalIsCurrent() bool { return c.LastOutcome == wasm.ReloadRefused }

// PluginRef is one plugin of the chain.
type PluginRef struct {
	Order       int    `json:"order"`
	Name        string `json:"name"`
	File        string `json:"file"`
	Phases      string `json:"phases"`
	ABI         uint32 `json:"abi"`
	SHA256      string `json:"sha256"`
	Size        int64  `json:"size"`
	Limits      string `json:"limits"`
	Config      string `json:"config"` // MaskConfig's; "" none
	Instances   int    `json:"instances"`
	MemoryBytes int64  `json:"memory_bytes"`
	Calls       uint64 `json:"calls"`
	WrittenOff  uint64 `json:"written_off"`
}

func newChain(st wasm.ReloadStatus, plugins []wasm.PluginState) *Chain {
	c := &Chain{Generation: st.Generation, Since: st.Since, LastReload: st.LastReload, LastOutcome: st.LastOutcome,
		Refusal: st.Refusal, RefusedAt: st.RefusedAt, Plugins: make([]PluginRef, len(plugins))}
	for i, p := range plugins {
		c.Plugins[i] = PluginRef{
			Order: i + 1, Name: p.Info.Name, File: p.Info.File, Phases: strings.Join(p.Info.Phases, ", "),
			ABI: p.Info.ABIVersion, SHA256: hex.EncodeToString(p.Info.SHA256[:]), Size: p.Info.Size,
			Limits: limits(p.Info.Limits), Config: MaskConfig(p.Config), Instances: p.Stats.Live,
			MemoryBytes: p.Memory, Calls: p.Stats.Calls, WrittenOff: p.Stats.WrittenOff,
		}
	}
	return c
}

func limits(l wasm.Limits) string {
	return fmt.Sprintf("memory %d MiB, timeout %s, %d instances, recycled after %d calls, interrupt %s",
		l.MemoryMiB, l.Timeout, l.Instances, l.MaxCalls, l.Interrupt)
}
