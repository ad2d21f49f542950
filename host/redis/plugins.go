package redis

import (
	"context"
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	goredis "github.com/redis/go-redis/v9"
)

// The fleet's plugin chain lives under one hash tag, so publishing is one
// script in one slot:
//
//	plantgate:{plugins}:module:<hex sha256>  string: a module's bytes, content-addressed
//	plantgate:{plugins}:chain                hash: version (integer), manifest (JSON),
//	                                         previous (JSON: the manifest it replaced, with its version)
//
// The manifest lists the chain's plugins in order, each with its module's
// digest, its sidecar bytes and its signature lines. The version only grows:
// every publish is a compare-and-set on the version the publisher read, so
// two pushes at once never lose one another's change (the loser retries).
// Gateways poll the version (PluginVersion) and read the manifest when it
// moves. The manifest a publish replaced is kept beside it, for `plugin
// rollback`, which publishes its plugins again as a new version.
//
// The replaced manifest's modules stay stored, so a rollback to it always
// finds them. A module the version before the replaced one named, that
// neither the new manifest nor the replaced one names, expires ModuleGrace
// after the publish, set in the same script: a gateway still loading an
// older version finds its modules meanwhile, and the store does not keep
// every module ever pushed. Publishing a manifest that names an expiring
// module again, or storing it again (PutPluginModule), keeps it for good.

var (
	//go:embed publish_plugins.lua
	publishPluginsLua    string
	publishPluginsScript = goredis.NewScript(publishPluginsLua)
)

// PluginEntry is one plugin of the fleet's chain.
type PluginEntry struct {
	File    string `json:"file"`              // "10-auth.wasm"
	Module  string `json:"module"`            // hex SHA-256 of the module
	Sidecar []byte `json:"sidecar,omitempty"` // the NN-name.json bytes; nil: none
	Sig     []byte `json:"sig,omitempty"`     // signature lines; nil: unsigned
}

// PluginManifest is the fleet's chain at one version; version 0 is the
// empty chain nobody published yet.
type PluginManifest struct {
	Version uint64        `json:"-"`
	Plugins []PluginEntry `json:"plugins"`
	Sig     []byte        `json:"sig,omitempty"` // the chain's signature lines (package pluginsig); nil: unsigned
	// Previous is the manifest this one replaced (its Previous nil); nil
	// when none was, or when not read from the store.
	Previous *PluginManifest `json:"-"`
}

// storedManifest is a manifest with its version, as the chain's previous
// field holds it.
type storedManifest struct {
	Version uint64        `json:"version"`
	Plugins []PluginEntry `json:"plugins"`
	Sig     []byte        `json:"sig,omitempty"`
}

// ModuleGrace is how long a module dropped from the chain stays in the store.
const ModuleGrace = 10 * time.Minute

// ErrPluginConflict is returned by PublishPlugins when the chain moved since
// the publisher read it.
var ErrPluginConflict = errors.New("the plugin chain changed meanwhile")

func (s *Store) pluginChainKey() string { return s.opts.KeyPrefix + "{plugins}:chain" }

func (s *Store) pluginModuleKey(digest string) string {
	return s.opts.KeyPrefix + "{plugins}:module:" + digest
}

// PluginVersion is the fleet chain's version: one HGET, what gateways poll.
func (s *Store) PluginVersion(ctx context.Context) (uint64, error) {
	v, err := s.client.HGet(ctx, s.pluginChainKey(), "version").Result()
	if errors.Is(err, goredis.Nil) {
		return 0, nil
	}
	if err != nil {
		return 0, storeError("plugin version", err)
	}
	n, err := strconv.ParseUint(v, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("plugin chain version %q: %w", v, err)
	}
	return n, nil
}

// PluginManifest reads the fleet's chain: version and manifest together.
func (s *Store) PluginManifest(ctx context.Context) (PluginManifest, error) {
	vals, err := s.client.HMGet(ctx, s.pluginChainKey(), "version", "manifest", "previous").Result()
	if err != nil {
		return PluginManifest{}, storeError("plugin manifest", err)
	}
	var m PluginManifest
	if vals[0] == nil {
		return m, nil
	}
	v, _ := vals[0].(string)
	if m.Version, err = strconv.ParseUint(v, 10, 64); err != nil {
		return m, fmt.Errorf("plugin chain version %q: %w", v, err)
	}
	raw, _ := vals[1].(string)
	if err := json.Unmarshal([]byte(raw), &m); err != nil {
		return m, fmt.Errorf("plugin chain manifest version %d: %w", m.Version, err)
	}
	if prev, _ := vals[2].(string); prev != "" {
		var p storedManifest
		if err := json.Unmarshal([]byte(prev), &p); err != nil {
			return m, fmt.Errorf("plugin chain version %d: previous manifest: %w", m.Version, err)
		}
		m.Previous = &PluginManifest{Version: p.Version, Plugins: p.Plugins, Sig: p.Sig}
	}
	return m, nil
}

// PutPluginModule stores a module under its SHA-256 and returns the hex
// digest. Storing the same module again changes nothing, but that it no
// longer expires if it was dropped from the chain.
func (s *Store) PutPluginModule(ctx context.Context, module []byte) (string, error) {
	sum := sha256.Sum256(module)
	digest := hex.EncodeToString(sum[:])
	if err := s.client.Set(ctx, s.pluginModuleKey(digest), module, 0).Err(); err != nil {
		return "", storeError("put plugin module", err)
	}
	return digest, nil
}

// PluginModule reads a module by its digest and checks that its content
// still hashes to it: a key rewritten in place is refused here.
func (s *Store) PluginModule(ctx context.Context, digest string) ([]byte, error) {
	b, err := s.client.Get(ctx, s.pluginModuleKey(digest)).Bytes()
	if errors.Is(err, goredis.Nil) {
		return nil, fmt.Errorf("module %s is not in the store", digest)
	}
	if err != nil {
		return nil, storeError("plugin module", err)
	}
	if sum := sha256.Sum256(b); hex.EncodeToString(sum[:]) != digest {
		return nil, fmt.Errorf("module %s: content does not hash to its key (rewritten in place)", digest)
	}
	return b, nil
}

// PublishPlugins stores m as the next version of the chain in place of
// base, the chain the publisher read (PluginManifest), if the chain is
// still at base's version, and returns the new version. Every module m
// names must already be stored (PutPluginModule); base's are kept (the
// rollback target's), and those of base.Previous that neither names expire
// ModuleGrace later. A chain that moved since base
// gives ErrPluginConflict: read it again and redo the change.
func (s *Store) PublishPlugins(ctx context.Context, base, m PluginManifest) (uint64, error) {
	if m.Plugins == nil {
		m.Plugins = []PluginEntry{}
	}
	manifest, err := json.Marshal(m)
	if err != nil {
		return 0, err
	}
	previous, err := json.Marshal(storedManifest{Version: base.Version, Plugins: base.Plugins, Sig: base.Sig})
	if err != nil {
		return 0, err
	}
	keys := []string{s.pluginChainKey()}
	named := map[string]bool{}
	for _, p := range m.Plugins {
		keys = append(keys, s.pluginModuleKey(p.Module))
		named[p.Module] = true
	}
	referenced := len(keys) - 1
	// base's modules are the rollback target's: kept. The ones the version
	// before base named, that neither m nor base names, expire. The script
	// publishes only if the chain is still at base's version, and a version
	// is always stored with its manifest and the one it replaced, so these
	// are that chain's whenever it publishes.
	for _, p := range base.Plugins {
		named[p.Module] = true
	}
	if base.Previous != nil {
		for _, p := range base.Previous.Plugins {
			if !named[p.Module] {
				named[p.Module] = true
				keys = append(keys, s.pluginModuleKey(p.Module))
			}
		}
	}
	next := max(m.Version, base.Version+1)
	v, err := publishPluginsScript.Run(ctx, s.client, keys, base.Version, manifest, next, referenced, ModuleGrace.Milliseconds(), previous).Uint64()
	if err != nil {
		msg := err.Error()
		switch {
		case strings.HasPrefix(msg, "CONFLICT"):
			return 0, fmt.Errorf("%w (%s)", ErrPluginConflict, msg)
		case strings.HasPrefix(msg, "MISSING"):
			return 0, fmt.Errorf("publish plugin chain: %s", msg)
		}
		return 0, storeError("publish plugin chain", err)
	}
	return v, nil
}
