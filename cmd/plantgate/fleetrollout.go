package main

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/urfave/cli/v3"

	"github.com/plantgate/plantgate/host"
	"github.com/plantgate/plantgate/host/pluginsig"
	"github.com/plantgate/plantgate/host/redis"
	"github.com/plantgate/plantgate/host/wasm"
)

// Sidecar keys of a rollout (wasm.Sidecar): a shadow's sampling rate and a
// canary's share. Promote takes them out.
const (
	keySample = "sample_percent"
	keyCanary = "canary_percent"
)

// rolloutName is the file name and sidecar push stores a plugin under:
// NN-name.wasm, or with --shadow NN-name.shadow.wasm (--sample into its
// sidecar), with --canary NN-name.canary.wasm (the share into its sidecar).
func rolloutName(cmd *cli.Command, name string, sidecar []byte) (string, []byte, error) {
	shadow, canary := cmd.Bool("shadow"), cmd.IsSet("canary")
	switch {
	case shadow && canary:
		return "", nil, errors.New("--shadow and --canary: give one (a shadow is never enforced, a canary is enforced for a share of principals)")
	case cmd.IsSet("sample") && !shadow:
		return "", nil, errors.New("--sample is a shadow's sampling rate: give --shadow too")
	case !shadow && !canary:
		return name, sidecar, nil
	}
	slot, role := wasm.FileRole(name)
	if role != wasm.RoleLive {
		return "", nil, fmt.Errorf("%s is already named as a %s; push it as NN-name.wasm with --shadow or --canary", name, role)
	}
	key, pct, role := keyCanary, cmd.Int("canary"), wasm.RoleCanary
	if shadow {
		key, pct, role = keySample, cmd.Int("sample"), wasm.RoleShadow
		if !cmd.IsSet("sample") {
			pct = 0 // the shadow's default
		}
	}
	if (cmd.IsSet("sample") || canary) && (pct < 1 || pct > 100) {
		return "", nil, fmt.Errorf("--%s must be a percent from 1 to 100, got %d", map[bool]string{true: "sample", false: "canary"}[shadow], pct)
	}
	sidecar, err := setSidecarKeys(sidecar, map[string]int{key: pct})
	if err != nil {
		return "", nil, err
	}
	return slot + "." + role + ".wasm", sidecar, nil
}

// setSidecarKeys returns sidecar with each key set to its value, or taken
// out for 0; nil when nothing is left. The sidecar's other keys keep their
// values as written (the object's key order becomes sorted).
func setSidecarKeys(sidecar []byte, keys map[string]int) ([]byte, error) {
	obj := map[string]json.RawMessage{}
	if sidecar != nil {
		if err := json.Unmarshal(sidecar, &obj); err != nil {
			return nil, fmt.Errorf("sidecar: %w", err)
		}
	}
	for k, v := range keys {
		if v == 0 {
			delete(obj, k)
		} else {
			obj[k] = json.RawMessage(fmt.Sprint(v))
		}
	}
	if len(obj) == 0 {
		return nil, nil
	}
	b, err := json.Marshal(obj)
	if err != nil {
		return nil, err
	}
	if _, err := wasm.ParseSidecar(b); err != nil {
		return nil, fmt.Errorf("sidecar: %w", err)
	}
	return b, nil
}

// slotOf finds the slot NAME names: "20-policy", "policy" or a file name.
func slotOf(ps []redis.PluginEntry, name string) (string, error) {
	name, _ = wasm.FileRole(strings.TrimSuffix(name, ".wasm") + ".wasm")
	var found []string
	for _, p := range ps {
		slot, _ := wasm.FileRole(p.File)
		if (slot == name || (len(slot) > 3 && slot[3:] == name)) && !contains(found, slot) {
			found = append(found, slot)
		}
	}
	switch len(found) {
	case 0:
		return "", fmt.Errorf("no plugin %s in the fleet chain", name)
	case 1:
		return found[0], nil
	}
	return "", fmt.Errorf("%s names %s: give the NN-name", name, strings.Join(found, " and "))
}

func contains(xs []string, x string) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}

func promoteCommand(flags []cli.Flag) *cli.Command {
	return &cli.Command{
		Name:      "promote",
		Usage:     "make a plugin's shadow (or canary) its live version fleet-wide: NN-name.shadow.wasm replaces NN-name.wasm, signed with --sign-key",
		ArgsUsage: "NAME",
		Flags:     flags,
		Action: func(ctx context.Context, cmd *cli.Command) error {
			if cmd.Args().Len() != 1 {
				return errors.New("want exactly one NAME argument: the plugin (\"policy\" or \"20-policy\") whose shadow or canary to promote")
			}
			return withStore(ctx, cmd, func(st *redis.Store) error {
				p, err := newPublisher(cmd, st)
				if err != nil {
					return err
				}
				var from, to redis.PluginEntry
				v, err := p.editChain(ctx, func(ps []redis.PluginEntry) ([]redis.PluginEntry, error) {
					slot, err := slotOf(ps, cmd.Args().First())
					if err != nil {
						return nil, err
					}
					if from, err = candidate(ps, slot); err != nil {
						return nil, err
					}
					if to, err = promoted(ctx, st, from, slot, p.key); err != nil {
						return nil, err
					}
					out := make([]redis.PluginEntry, 0, len(ps))
					placed := false
					for _, p := range ps {
						switch p.File {
						case from.File:
							continue
						case to.File:
							p, placed = to, true
						}
						out = append(out, p)
					}
					if !placed {
						out = insertByName(out, to)
					}
					return out, nil
				})
				if err != nil {
					return err
				}
				fmt.Fprintf(cmd.Root().Writer, "promoted %s to %s (sha256 %s, %s): fleet chain version %d\n", from.File, to.File, to.Module, signedWord(to.Sig), v)
				return nil
			})
		},
	}
}

// candidate is the slot's shadow or canary; an error when it has none, or
// both.
func candidate(ps []redis.PluginEntry, slot string) (redis.PluginEntry, error) {
	var got []redis.PluginEntry
	for _, p := range ps {
		if s, role := wasm.FileRole(p.File); s == slot && role != wasm.RoleLive {
			got = append(got, p)
		}
	}
	switch len(got) {
	case 0:
		return redis.PluginEntry{}, fmt.Errorf("%s has no shadow or canary to promote (push one with plugin push --shadow or --canary)", slot)
	case 1:
		return got[0], nil
	}
	return redis.PluginEntry{}, fmt.Errorf("%s has both %s and %s: remove one (plugin remove) before promoting the other", slot, got[0].File, got[1].File)
}

// promoted is from as the slot's live plugin: its module, its sidecar
// without the rollout keys, signed again under its live name.
func promoted(ctx context.Context, st *redis.Store, from redis.PluginEntry, slot string, key ed25519.PrivateKey) (redis.PluginEntry, error) {
	sidecar, err := setSidecarKeys(from.Sidecar, map[string]int{keySample: 0, keyCanary: 0})
	if err != nil {
		return redis.PluginEntry{}, err
	}
	to := redis.PluginEntry{File: slot + ".wasm", Module: from.Module, Sidecar: sidecar}
	switch {
	case key != nil:
		// The signature names the file: the shadow's does not cover the live name.
		module, err := st.PluginModule(ctx, from.Module)
		if err != nil {
			return redis.PluginEntry{}, err
		}
		to.Sig = pluginsig.Sign(key, slot, module, sidecar)
	case from.Sig != nil:
		return redis.PluginEntry{}, fmt.Errorf("%s is signed: promote signs it again under its live name %s; give --sign-key", from.File, to.File)
	}
	return to, nil
}

// insertByName adds e in file-name order, as a directory orders a chain.
func insertByName(ps []redis.PluginEntry, e redis.PluginEntry) []redis.PluginEntry {
	ps = append(ps, e)
	for i := len(ps) - 1; i > 0 && ps[i].File < ps[i-1].File; i-- {
		ps[i], ps[i-1] = ps[i-1], ps[i]
	}
	return ps
}

func signedWord(sig []byte) string {
	if sig != nil {
		return "signed"
	}
	return "unsigned"
}

func rollbackCommand(flags []cli.Flag) *cli.Command {
	return &cli.Command{
		Name: "rollback",
		Usage: "publish the chain the last push, remove, promote or rollback replaced, as a new fleet chain version " +
			"(twice: back again); gateways follow within 2 s",
		Flags: flags,
		Action: func(ctx context.Context, cmd *cli.Command) error {
			return withStore(ctx, cmd, func(st *redis.Store) error {
				p, err := newPublisher(cmd, st)
				if err != nil {
					return err
				}
				var from, to uint64
				var files []string
				v, err := p.publish(ctx, true, func(m redis.PluginManifest) ([]redis.PluginEntry, error) {
					if m.Previous == nil || m.Previous.Version == 0 {
						return nil, fmt.Errorf("nothing to roll back to: the fleet chain at version %d replaced no earlier version", m.Version)
					}
					from, to, files = m.Version, m.Previous.Version, nil
					for _, p := range m.Previous.Plugins {
						files = append(files, p.File)
					}
					return m.Previous.Plugins, nil
				})
				if err != nil {
					// MISSING: from the publish script; "not in the store": from
					// the check of what is rolled back to.
					if msg := err.Error(); strings.Contains(msg, "MISSING") || strings.Contains(msg, "is not in the store") {
						return fmt.Errorf("%w: a module of version %d expired %s after it was replaced; push its plugins again", err, to, redis.ModuleGrace)
					}
					return err
				}
				fmt.Fprintf(cmd.Root().Writer, "rolled back from version %d to the chain of version %d (%s): fleet chain version %d\n",
					from, to, strings.Join(files, ", "), v)
				return nil
			})
		},
	}
}

func diffCommand(flags []cli.Flag) *cli.Command {
	return &cli.Command{
		Name:  "diff",
		Usage: "show the fleet's latest shadow decisions that disagreed with the live chain (newest first)",
		Flags: append(flags,
			&cli.IntFlag{Name: "limit", Value: 20, Usage: "how many to show (the store keeps about 1000)"},
			&cli.StringFlag{Name: "plugin", Usage: "only this shadow (\"policy\")"},
			&cli.BoolFlag{Name: "json", Usage: "print JSON lines"},
		),
		Action: func(ctx context.Context, cmd *cli.Command) error {
			if n := cmd.Int("limit"); n < 1 || n > redis.ShadowDiffCap {
				return fmt.Errorf("--limit must be from 1 to %d, got %d", redis.ShadowDiffCap, n)
			}
			return withStore(ctx, cmd, func(st *redis.Store) error {
				n := cmd.Int("limit")
				if cmd.String("plugin") != "" {
					n = redis.ShadowDiffCap // filter from everything kept
				}
				ds, err := st.ShadowDiffs(ctx, n)
				if err != nil {
					return err
				}
				kept := ds[:0]
				for _, d := range ds {
					if p := cmd.String("plugin"); (p == "" || d.Plugin == p) && len(kept) < cmd.Int("limit") {
						kept = append(kept, d)
					}
				}
				out := cmd.Root().Writer
				if cmd.Bool("json") {
					enc := json.NewEncoder(out)
					for _, d := range kept {
						if err := enc.Encode(d); err != nil {
							return err
						}
					}
					return nil
				}
				printDiffs(out, kept)
				return nil
			})
		},
	}
}

func printDiffs(out io.Writer, ds []redis.ShadowDiff) {
	if len(ds) == 0 {
		fmt.Fprintln(out, "no shadow disagreements logged")
		return
	}
	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "TIME\tREQUEST\tPLUGIN\tPHASE\tOUTCOME\tLIVE\tSHADOW\tPRINCIPAL\tINPUT")
	for _, d := range ds {
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", d.At.Format("15:04:05.000"), orDash(d.RequestID), d.Plugin, d.Phase,
			d.Outcome, d.Live, d.Shadow, orDash(d.Principal), diffInput(d))
	}
	_ = w.Flush()
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// diffInput is the input's non-secret fields on one line, each bounded
// (host.Shown).
func diffInput(d redis.ShadowDiff) string {
	if p := d.Plant; p != nil {
		s := fmt.Sprintf("plant id=%d name=%s", p.ID, host.Shown(p.Name, p.NameBytes, host.RecordNameBytes, true))
		if p.Tag != nil {
			s += " tag=" + host.Shown(*p.Tag, p.TagBytes, host.RecordNameBytes, true)
		}
		return s
	}
	return host.ClipString(d.Method, host.RecordTextBytes) + " " + host.Shown(d.Path, d.PathBytes, host.RecordPathBytes, false)
}
