package main

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/urfave/cli/v3"

	"github.com/plantgate/plantgate/host/fleet"
	"github.com/plantgate/plantgate/host/pluginsig"
	"github.com/plantgate/plantgate/host/redis"
	"github.com/plantgate/plantgate/host/wasm"
)

// exitNotConverged is `plugin status`'s exit code while the fleet has not
// converged on the store's chain (or no gateway is live).
const exitNotConverged = 4

// fleetCommands are the plugin subcommands that work on the fleet's chain
// in the store.
func fleetCommands() []*cli.Command {
	storeFlags := func(more ...cli.Flag) []cli.Flag {
		return append([]cli.Flag{redisURLFlag, redisPasswordFileFlag}, more...)
	}
	return []*cli.Command{
		{
			Name:      "push",
			Usage:     "check a plugin as `plugin check` does, store it and publish a new fleet chain version; gateways with --plugins-from-store load it",
			ArgsUsage: "NN-name.wasm",
			Flags: append(storeFlags(
				&cli.StringFlag{Name: "config", Usage: "sidecar file to push with it (default: NN-name.json beside the plugin, if there)"},
				&cli.BoolFlag{Name: "shadow", Usage: "push it in shadow as NN-name.shadow.wasm: it sees every live request of its phases, its decisions are counted and diffed (plugin diff), never enforced"},
				&cli.IntFlag{Name: "sample", Usage: "with --shadow: the share of requests the shadow sees, in percent (1 to 100; default 100)"},
				&cli.IntFlag{Name: "canary", Usage: "push it as a canary NN-name.canary.wasm, enforced in place of NN-name.wasm for this percent of principals (1 to 100, stable per principal)"},
			), publishFlags()...),
			Action: func(ctx context.Context, cmd *cli.Command) error {
				file, err := oneFile(cmd)
				if err != nil {
					return err
				}
				return withStore(ctx, cmd, func(st *redis.Store) error {
					return pushPlugin(ctx, cmd, st, file)
				})
			},
		},
		{
			Name:      "remove",
			Usage:     "remove a plugin from the fleet chain and publish the new version",
			ArgsUsage: "NN-name",
			Flags:     storeFlags(publishFlags()...),
			Action: func(ctx context.Context, cmd *cli.Command) error {
				if cmd.Args().Len() != 1 {
					return errors.New("want exactly one NN-name argument")
				}
				file := strings.TrimSuffix(cmd.Args().First(), ".wasm") + ".wasm"
				return withStore(ctx, cmd, func(st *redis.Store) error {
					p, err := newPublisher(cmd, st)
					if err != nil {
						return err
					}
					v, err := p.editChain(ctx, func(ps []redis.PluginEntry) ([]redis.PluginEntry, error) {
						for i, p := range ps {
							if p.File == file {
								return append(ps[:i:i], ps[i+1:]...), nil
							}
						}
						return nil, fmt.Errorf("%s is not in the fleet chain", file)
					})
					if err == nil {
						fmt.Fprintf(cmd.Root().Writer, "removed %s: fleet chain version %d\n", file, v)
					}
					return err
				})
			},
		},
		{
			Name:  "status",
			Usage: fmt.Sprintf("list the live gateways and say whether they serve the store's chain; exit %d when not converged", exitNotConverged),
			Flags: storeFlags(&cli.BoolFlag{Name: "json", Usage: "print the status as JSON"}),
			Action: func(ctx context.Context, cmd *cli.Command) error {
				return withStore(ctx, cmd, func(st *redis.Store) error {
					s, err := fleet.Read(ctx, st)
					if err != nil {
						return err
					}
					if cmd.Bool("json") {
						b, _ := json.MarshalIndent(s, "", "  ")
						fmt.Fprintln(cmd.Root().Writer, string(b))
					} else {
						printStatus(cmd.Root().Writer, s)
					}
					if !s.Converged {
						return &exitError{code: exitNotConverged}
					}
					return nil
				})
			},
		},
		{
			Name:      "sign",
			Usage:     "sign a plugin and its sidecar for a plugins directory: writes NN-name.sig beside the module (serve --plugin-trust-key checks it)",
			ArgsUsage: "NN-name.wasm",
			Flags: []cli.Flag{
				&cli.StringFlag{Name: "config", Usage: "the sidecar the plugin will run with (default: NN-name.json beside it, if there)"},
				&cli.StringFlag{Name: "sign-key", Required: true, Usage: "Ed25519 private key from plugin keygen"},
			},
			Action: func(ctx context.Context, cmd *cli.Command) error {
				file, err := oneFile(cmd)
				if err != nil {
					return err
				}
				return signFile(cmd, file)
			},
		},
		{
			Name:  "keygen",
			Usage: "write an Ed25519 key pair for signing plugins: PREFIX.key (private, mode 0600) and PREFIX.pub",
			Flags: []cli.Flag{&cli.StringFlag{Name: "out", Required: true, Usage: "path prefix of the two files"}},
			Action: func(ctx context.Context, cmd *cli.Command) error {
				pub, key, err := pluginsig.GenerateKey(cmd.String("out"))
				if err != nil {
					return fmt.Errorf("keygen: %w", err)
				}
				fmt.Fprintf(cmd.Root().Writer, "private key %s (keep it secret: push --sign-key)\npublic key  %s (give it to gateways: --plugin-trust-key)\n", key, pub)
				return nil
			},
		},
		promoteCommand(storeFlags(publishFlags()...)),
		rollbackCommand(storeFlags(publishFlags()...)),
		diffCommand(storeFlags()),
	}
}

// signFile writes file's .sig: one signature line over the module and the
// sidecar serve would read with it.
func signFile(cmd *cli.Command, file string) error {
	if err := wasm.CheckFileName(filepath.Base(file)); err != nil {
		return err
	}
	module, sidecar, err := pluginFiles(file, cmd.String("config"))
	if err != nil {
		return err
	}
	key, err := signKey(cmd)
	if err != nil {
		return err
	}
	sig := wasm.SigPath(file)
	line := pluginsig.Sign(key, strings.TrimSuffix(filepath.Base(file), ".wasm"), module, sidecar)
	if err := os.WriteFile(sig, line, 0o644); err != nil {
		return err
	}
	fmt.Fprintf(cmd.Root().Writer, "wrote %s\n", sig)
	return nil
}

// pluginFiles reads a module and the sidecar serve would read with it (nil:
// none), or the one config names.
func pluginFiles(file, config string) (module, sidecar []byte, err error) {
	if module, err = os.ReadFile(file); err != nil {
		return nil, nil, err
	}
	_, from, err := readSidecar(file, config)
	if err != nil {
		return nil, nil, err
	}
	if from != "" {
		if sidecar, err = os.ReadFile(from); err != nil {
			return nil, nil, err
		}
	}
	return module, sidecar, nil
}

// pushPlugin checks file as serve would load it, stores the module and
// publishes the chain with it in (replacing a plugin of the same file name).
func pushPlugin(ctx context.Context, cmd *cli.Command, st *redis.Store, file string) error {
	out := cmd.Root().Writer
	p, err := newPublisher(cmd, st)
	if err != nil {
		return err
	}
	if err := checkPlugin(ctx, out, file, cmd.String("config"), p.opts.CacheDir, pluginLogger(cmd)); err != nil {
		return fmt.Errorf("not pushed: %w", err)
	}
	module, sidecar, err := pluginFiles(file, cmd.String("config"))
	if err != nil {
		return err
	}
	name, sidecar, err := rolloutName(cmd, filepath.Base(file), sidecar)
	if err != nil {
		return err
	}
	entry := redis.PluginEntry{File: name, Sidecar: sidecar}
	if p.key != nil {
		entry.Sig = pluginsig.Sign(p.key, strings.TrimSuffix(name, ".wasm"), module, sidecar)
	}
	if entry.Module, err = st.PutPluginModule(ctx, module); err != nil {
		return err
	}
	v, err := p.editChain(ctx, func(ps []redis.PluginEntry) ([]redis.PluginEntry, error) {
		for i, p := range ps {
			if p.File == name {
				ps[i] = entry
				return ps, nil
			}
		}
		return insertByName(ps, entry), nil
	})
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "pushed %s (sha256 %s, %s): fleet chain version %d\n", name, entry.Module, signedWord(entry.Sig), v)
	return nil
}

// signKey reads --sign-key; nil when not given.
func signKey(cmd *cli.Command) (ed25519.PrivateKey, error) {
	file := cmd.String("sign-key")
	if file == "" {
		return nil, nil
	}
	key, err := pluginsig.ReadPrivateKey(file)
	if err != nil {
		return nil, fmt.Errorf("--sign-key: %w", err)
	}
	return key, nil
}

func printStatus(out io.Writer, s fleet.Status) {
	fmt.Fprintf(out, "fleet chain version %d, digest %s\n", s.Version, short(s.Digest))
	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "ID\tHOST\tADDR\tSTARTED\tVERSION\tDIGEST\tLAST BEAT\tSTATE")
	for _, g := range s.Gateways {
		state := "converged"
		if !g.Converged {
			state = g.Lag
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%d\t%s\t%s ago\t%s\n", g.ID, g.Host, g.Addr, g.Started.UTC().Format(time.RFC3339),
			g.Version, short(g.Digest), time.Since(g.Beat).Round(100*time.Millisecond), state)
	}
	_ = w.Flush()
	switch {
	case len(s.Gateways) == 0:
		fmt.Fprintln(out, "not converged: no live gateway follows the store (serve --plugins-from-store)")
	case s.Converged:
		fmt.Fprintf(out, "converged: %d gateways serve version %d\n", len(s.Gateways), s.Version)
	default:
		fmt.Fprintln(out, "not converged")
	}
}

func short(digest string) string {
	if len(digest) > 12 {
		return digest[:12]
	}
	return digest
}
