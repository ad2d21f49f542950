package main

import (
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"

	"github.com/urfave/cli/v3"

	"github.com/plantgate/plantgate/host/fleet"
	"github.com/plantgate/plantgate/host/pluginsig"
	"github.com/plantgate/plantgate/host/redis"
	"github.com/plantgate/plantgate/host/wasm"
)

// Every command that changes the fleet's chain (push, remove, promote,
// rollback) publishes through a publisher, which signs only what verified
// and publishes only what the gateways would accept: someone who can write
// the store but holds no trusted key cannot have the operator's key sign
// their chain, and an operator's mistake is refused here, not by every
// gateway (running ones keep the old chain, restarted ones do not start).

var (
	signKeyFlag = &cli.StringFlag{Name: "sign-key", Usage: "Ed25519 private key (from plugin keygen) to sign with: the plugin's module and sidecar, and the new chain version as a whole; " +
		"what the new version keeps from the store must verify with its public half or a --plugin-trust-key first"}
	publishTrustFlag = &cli.StringSliceFlag{Name: "plugin-trust-key", Usage: "Ed25519 public key file the fleet's gateways trust (repeatable, for rotation): " +
		"what the new version keeps must verify with one of them or the --sign-key's public half; without --sign-key, an unsigned chain is refused as those gateways refuse it"}
	publishCacheFlag   = &cli.StringFlag{Name: "cache-dir", Usage: "compilation cache for checking the new chain as the gateways load it, as serve's --cache-dir (default: the user cache directory's plantgate folder; \"off\": none)"}
	publishNoAuthFlag  = &cli.BoolFlag{Name: "insecure-no-auth", Usage: "the fleet's gateways run serve --insecure-no-auth: check the new chain as they do (an authorize plugin refused, none required)"}
	signUnverifiedFlag = &cli.BoolFlag{Name: "sign-unverified", Usage: "with --sign-key: sign the new version although what it keeps from the store did not verify " +
		"(unsigned, signed by another key, or older than a live gateway's version): once, to start signing an unsigned fleet or to recover a store someone wrote to; read the printed list"}
)

// publishFlags are the flags of the commands that publish a chain.
func publishFlags() []cli.Flag {
	return []cli.Flag{signKeyFlag, publishTrustFlag, publishCacheFlag, publishNoAuthFlag, signUnverifiedFlag}
}

// publisher publishes new versions of the store's chain.
type publisher struct {
	st         *redis.Store
	out        io.Writer
	key        ed25519.PrivateKey // nil: publish unsigned
	trust      *pluginsig.Keyring // key's public half and --plugin-trust-key
	unverified bool
	opts       wasm.Options       // as a gateway loads the chain
	ropts      wasm.ReloadOptions // as a gateway's flags make it refuse a chain
}

func newPublisher(cmd *cli.Command, st *redis.Store) (*publisher, error) {
	key, err := signKey(cmd)
	if err != nil {
		return nil, err
	}
	var own, gateways []ed25519.PublicKey
	if key != nil {
		own = append(own, key.Public().(ed25519.PublicKey))
	}
	for _, f := range cmd.StringSlice("plugin-trust-key") {
		pub, err := pluginsig.ReadPublicKey(f)
		if err != nil {
			return nil, fmt.Errorf("--plugin-trust-key: %w", err)
		}
		gateways = append(gateways, pub)
	}
	p := &publisher{st: st, out: cmd.Root().Writer, key: key, trust: pluginsig.NewKeyring(append(own, gateways...)...), unverified: cmd.Bool("sign-unverified")}
	if p.unverified && key == nil {
		return nil, errors.New("--sign-unverified signs what the store holds: give --sign-key")
	}
	noAuth := cmd.Bool("insecure-no-auth")
	p.ropts = wasm.ReloadOptions{RequireAuthorize: !noAuth, ForbidAuthorize: noAuth}
	p.opts = wasm.Options{
		CacheDir: cacheDirOf(cmd.String("cache-dir")),
		Logger:   slog.New(slog.NewTextHandler(cmd.Root().ErrWriter, &slog.HandlerOptions{Level: slog.LevelWarn})),
		// One instance each unless a sidecar says otherwise: the check
		// loads and instantiates every module, it serves nothing.
		Limits: wasm.Limits{Instances: 1},
	}
	// The new chain is checked with the keys the gateways trust, when
	// named: a signing key they do not trust is refused here, as there.
	switch {
	case p.unverified:
	case len(gateways) > 0:
		p.opts.Trust = pluginsig.NewKeyring(gateways...)
	default:
		p.opts.Trust = p.trust
	}
	return p, nil
}

// editChain publishes the chain edit makes of a copy of the store's.
func (p *publisher) editChain(ctx context.Context, edit func([]redis.PluginEntry) ([]redis.PluginEntry, error)) (uint64, error) {
	return p.publish(ctx, false, func(m redis.PluginManifest) ([]redis.PluginEntry, error) {
		return edit(slices.Clone(m.Plugins)) // m stays the chain it replaces (PublishPlugins)
	})
}

// publish publishes the chain edit makes of the store's manifest as its
// next version, signed with p.key when given, again on a fresh read when
// another publisher got in first. Refused, with the reason, when:
//   - the store's chain is signed and p.key is nil;
//   - p.key is given and what the new version keeps does not verify with
//     p.trust: the store's chain, or with fromPrevious (rollback) the chain
//     it replaced; or the store's chain is older than one a live gateway
//     serves (someone put an older chain back);
//   - a gateway with p.trust would refuse the new chain (wasm.Check).
func (p *publisher) publish(ctx context.Context, fromPrevious bool, edit func(redis.PluginManifest) ([]redis.PluginEntry, error)) (uint64, error) {
	for attempt := 0; ; attempt++ {
		m, err := p.st.PluginManifest(ctx)
		if err != nil {
			return 0, err
		}
		if m.Sig != nil && p.key == nil {
			return 0, fmt.Errorf("the fleet chain is signed (version %d): gateways that trust keys refuse an unsigned chain; give --sign-key", m.Version)
		}
		// Above every version a live gateway serves: gateways that trust
		// keys refuse anything not newer than what they serve.
		gws, err := p.st.Gateways(ctx)
		if err != nil {
			return 0, err
		}
		var served uint64
		for _, g := range gws {
			served = max(served, g.Version)
		}
		if p.key != nil && served > m.Version && !p.unverified {
			return 0, fmt.Errorf("refusing to sign: the fleet chain in the store is version %d, older than version %d a live gateway serves: "+
				"someone put an older chain back (plugin status names the gateways refusing it); --sign-unverified signs over it", m.Version, served)
		}
		kept, err := p.verifyKept(ctx, m, fromPrevious)
		if err != nil {
			return 0, err
		}
		ps, err := edit(m)
		if err != nil {
			return 0, err
		}
		next := redis.PluginManifest{Plugins: ps, Version: max(m.Version, served) + 1}
		if p.key != nil {
			next.Sig = pluginsig.SignChain(p.key, next.Version, pluginsig.ChainDigest(chainEntries(ps)))
		}
		snap, err := fleet.SnapshotOf(ctx, p.st, next)
		if err != nil {
			return 0, err
		}
		if _, err := wasm.Check(ctx, snap, p.opts, p.ropts, "the new fleet chain"); err != nil {
			return 0, fmt.Errorf("not published: gateways would refuse this chain: %w", err)
		}
		v, err := p.st.PublishPlugins(ctx, m, next)
		if errors.Is(err, redis.ErrPluginConflict) && attempt < 10 {
			continue
		}
		if err == nil && p.key != nil {
			p.printSigned(v, ps, kept)
		}
		return v, err
	}
}

// keptEntries are the entries of the chain a new version starts from, by
// entryKey, and whether they verified (false: --sign-unverified).
type keptEntries struct {
	entries  map[string]bool
	verified bool
}

// verifyKept verifies, before p.key signs anything, the chain the new
// version keeps entries of: m, or m.Previous for a rollback.
func (p *publisher) verifyKept(ctx context.Context, m redis.PluginManifest, fromPrevious bool) (keptEntries, error) {
	src, what := m, fmt.Sprintf("refusing to sign: the fleet chain in the store (version %d) does not verify", m.Version)
	if fromPrevious {
		if m.Previous == nil {
			return keptEntries{}, nil // nothing to roll back to: the edit says so
		}
		src, what = *m.Previous, fmt.Sprintf("refusing to sign the chain of version %d (the rollback target)", m.Previous.Version)
	}
	kept := keptEntries{entries: map[string]bool{}, verified: !p.unverified}
	for _, e := range src.Plugins {
		kept.entries[entryKey(e)] = true
	}
	// Nothing published yet: nothing to vouch for. A writer who empties the
	// store this way is caught by the gateways' versions (publish).
	if p.key == nil || p.unverified || (src.Version == 0 && len(src.Plugins) == 0 && src.Sig == nil) {
		return kept, nil
	}
	snap, err := fleet.SnapshotOf(ctx, p.st, src)
	if err == nil {
		err = wasm.Verify(p.trust, snap)
	}
	if err != nil {
		return kept, fmt.Errorf("%s: %w; it was not published by a holder of a trusted key: "+
			"plugin rollback --sign-key publishes the version before it if that one verifies, --sign-unverified signs over it", what, err)
	}
	return kept, nil
}

// printSigned says what the command signed: every plugin of the new
// version, and whether its signature was verified or made now.
func (p *publisher) printSigned(version uint64, ps []redis.PluginEntry, kept keptEntries) {
	fmt.Fprintf(p.out, "signed fleet chain version %d:\n", version)
	for _, e := range ps {
		how := "signed now"
		switch {
		case kept.entries[entryKey(e)] && kept.verified:
			how = "signature verified"
		case kept.entries[entryKey(e)]:
			how = "NOT verified: --sign-unverified"
		}
		fmt.Fprintf(p.out, "  %s module %s (%s)\n", e.File, short(e.Module), how)
	}
}

// entryKey identifies an entry with its signature.
func entryKey(e redis.PluginEntry) string {
	return fmt.Sprintf("%s %s %x %s", e.File, e.Module, sha256.Sum256(e.Sidecar), e.Sig)
}

func chainEntries(ps []redis.PluginEntry) []pluginsig.ChainEntry {
	entries := make([]pluginsig.ChainEntry, len(ps))
	for i, p := range ps {
		entries[i] = pluginsig.ChainEntry{File: p.File, Module: p.Module, Sidecar: p.Sidecar}
	}
	return entries
}
