package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/urfave/cli/v3"

	"github.com/plantgate/plantgate/host"
	"github.com/plantgate/plantgate/host/redis"
	"github.com/plantgate/plantgate/host/wasm"
)

// Exit codes of `plugin run`, beside 0 (allow) and 1 (the plugin could not
// be loaded or the input is wrong).
const (
	exitDeny  = 2
	exitFault = 3
)

// exitError ends the process with code after printing err, when err is not
// nil.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string {
	if e.err == nil {
		return fmt.Sprintf("exit status %d", e.code)
	}
	return e.err.Error()
}

func pluginCommand() *cli.Command {
	configFlag := &cli.StringFlag{Name: "config", Usage: "sidecar file to use (default: NN-name.json beside the plugin, as serve reads it)"}
	cacheFlag := &cli.StringFlag{Name: "cache-dir", Usage: "compilation cache directory, as serve's --cache-dir (default: none, so check reports the real compile time)"}
	return &cli.Command{
		Name:  "plugin",
		Usage: "start a policy plugin project, check or dry-run a plugin exactly as serve would load it, or push it to the fleet",
		Commands: append([]*cli.Command{
			pluginNewCommand(),
			pluginConformanceCommand(configFlag, cacheFlag),
			pluginBenchCommand(configFlag, cacheFlag),
			{
				Name:      "check",
				Usage:     "compile, check and instantiate a plugin; exit 1 with the reason when serve would refuse it",
				ArgsUsage: "FILE.wasm",
				Flags:     []cli.Flag{configFlag, cacheFlag},
				Action: func(ctx context.Context, cmd *cli.Command) error {
					file, err := oneFile(cmd)
					if err != nil {
						return err
					}
					return checkPlugin(ctx, cmd.Root().Writer, file, cmd.String("config"), cmd.String("cache-dir"), pluginLogger(cmd))
				},
			},
			{
				Name:  "run",
				Usage: "run one decision of a plugin, or a sequence of them, and print each as a JSON line; exit 0 allow, 2 deny, 3 fault (the worst of a sequence), 1 error",
				Description: `A dry run: FILE.wasm may have any name here, while serve, plugin check and plugin conformance
want NN-name.wasm (two digits, a dash, then a-z, 0-9 or -; docs/abi.md#the-module). Rename the file
before dropping it into the plugins directory.`,
				ArgsUsage: "FILE.wasm",
				Flags: []cli.Flag{
					configFlag, cacheFlag,
					&cli.StringFlag{Name: "phase", Usage: "authorize or validate (with --input)"},
					&cli.StringFlag{Name: "input", Usage: `request as JSON ("-": standard input): authorize {"method","path","credential"} plus optional "request_id", "client" (an IP address), "headers" {"Name":"value"} and "caller" {"name","scopes"}; validate a NewPlant body {"id","name","tag"}, plus an optional "allowed_as" (a string; "principal" is its former name) and "caller" {"name","scopes"}`},
					&cli.StringFlag{Name: "requests", Usage: `a sequence instead of --phase and --input: a JSON lines file ("-": standard input), {"name","phase","input"} a line (an expect table's "want" is ignored), run in order against one instance and one KV store`},
					&cli.StringFlag{Name: "tokens", Usage: `JSON file of fake tokens for token lookups: [{"token","name","scopes","expires","revoked"}]`},
					&cli.StringFlag{Name: "redis-url", Usage: "answer token lookups from this Redis (read only); without it or --tokens every lookup answers unavailable"},
					redisPasswordFileFlag,
				},
				Action: func(ctx context.Context, cmd *cli.Command) error {
					file, err := oneFile(cmd)
					if err != nil {
						return err
					}
					return runPlugin(ctx, cmd, file)
				},
			},
		}, fleetCommands()...),
	}
}

func oneFile(cmd *cli.Command) (string, error) {
	if cmd.Args().Len() != 1 {
		return "", errors.New("want exactly one FILE.wasm argument")
	}
	return cmd.Args().First(), nil
}

// pluginLogger writes the plugin's log lines and faults to standard error.
func pluginLogger(cmd *cli.Command) *slog.Logger {
	return slog.New(slog.NewTextHandler(cmd.Root().ErrWriter, nil))
}

// readSidecar reads the sidecar serve would use, or the one given.
func readSidecar(file, config string) (sc wasm.Sidecar, from string, err error) {
	if config == "" {
		config = wasm.SidecarPath(file)
		if _, err := os.Stat(config); errors.Is(err, os.ErrNotExist) {
			return wasm.Sidecar{}, "", nil
		}
	}
	data, err := os.ReadFile(config)
	if err != nil {
		return sc, "", err
	}
	if sc, err = wasm.ParseSidecar(data); err != nil {
		return sc, "", fmt.Errorf("plugin %s: %w", filepath.Base(config), err)
	}
	return sc, config, nil
}

// checkPlugin loads the plugin as serve would (file name, sidecar, limits,
// every instance of its pool) and describes it.
func checkPlugin(ctx context.Context, out io.Writer, file, config, cacheDir string, log *slog.Logger) error {
	if err := wasm.CheckFileName(filepath.Base(file)); err != nil {
		return err
	}
	sc, from, err := readSidecar(file, config)
	if err != nil {
		return err
	}
	limits := sc.Limits.Or(wasm.DefaultLimits())
	start := time.Now()
	p, err := wasm.LoadPlugin(ctx, file, sc.Config, wasm.Options{Logger: log, Limits: limits, CacheDir: cacheDir}.WithRequestHeaders(sc.Headers))
	if err != nil {
		return err
	}
	total := time.Since(start)
	defer p.Close(ctx)
	if err := p.ProbeBuffer(ctx, probeBufferSize); err != nil {
		return fmt.Errorf("%w: serve would load it, but every request would fail closed (docs/abi.md#the-request-buffer)", err)
	}
	info := p.Info()
	configured := "none"
	if from != "" {
		configured = filepath.Base(from)
		if !info.HasConfig {
			configured += " (limits only)"
		}
	}
	if info.ConfigRequired {
		configured += "; the plugin requires a config"
	}
	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintf(w, "plugin\t%s\n", info.Name)
	fmt.Fprintf(w, "file\t%s\n", info.File)
	fmt.Fprintf(w, "phases\t%s\n", strings.Join(info.Phases, " "))
	if info.Kind == wasm.KindRego {
		fmt.Fprintf(w, "abi version\tOPA Wasm %s (a Rego policy: input and data as JSON, docs/abi.md#rego-policies)\n", info.OPAABI)
		builtins := strings.Join(info.Builtins, " ")
		if builtins == "" {
			builtins = "none"
		}
		fmt.Fprintf(w, "host builtins\t%s\n", builtins)
	} else {
		fmt.Fprintf(w, "abi version\t%d (%s)\n", info.ABIVersion, abiSpeaks[info.ABIVersion])
	}
	fmt.Fprintf(w, "size\t%d bytes\n", info.Size)
	fmt.Fprintf(w, "sha256\t%s\n", hex.EncodeToString(info.SHA256[:]))
	fmt.Fprintf(w, "sidecar\t%s\n", configured)
	fmt.Fprintf(w, "limits\tmemory_mib=%d timeout_ms=%d instances=%d max_calls=%d interrupt=%t\n",
		limits.MemoryMiB, limits.Timeout.Milliseconds(), limits.Instances, limits.MaxCalls, limits.Interrupt == wasm.InterruptOn)
	fmt.Fprintf(w, "compile time\t%s\n", info.CompileTime.Round(time.Microsecond))
	fmt.Fprintf(w, "instantiate time\t%s per instance (%d instances)\n",
		((total - info.CompileTime) / time.Duration(limits.Instances)).Round(time.Microsecond), limits.Instances)
	fmt.Fprintln(w, "ok\tserve would load this plugin")
	return w.Flush()
}

// probeBufferSize is the request buffer `plugin check` asks for: a
// usual request's size.
const probeBufferSize = 256

// abiSpeaks says, for `plugin check`, what a module of each ABI version
// can use: sdk/abi documents each field.
var abiSpeaks = map[uint32]string{
	1: "request line, operation and credential; no request context, KV or response headers",
	2: "request context and principal, KV, response headers",
}

// runTokens answers token lookups for `plugin run`: from a file of fake
// tokens, from Redis, or not at all (nil: every lookup is unavailable).
func runTokens(ctx context.Context, file, redisURL string) (wasm.TokenSource, func(), error) {
	switch {
	case file != "" && redisURL != "":
		return nil, nil, errors.New("--tokens and --redis-url: give one or the other")
	case redisURL != "":
		st, err := redis.Open(ctx, redisURL, redis.Options{})
		if err != nil {
			return nil, nil, err
		}
		return st, func() { st.Close() }, nil
	case file != "":
		ft, err := readFakeTokens(file)
		return ft, func() {}, err
	}
	return nil, func() {}, nil
}

// fakeTokens answers lookups from a --tokens file.
type fakeTokens map[[32]byte]host.Token

func (f fakeTokens) Token(_ context.Context, digest [32]byte) (host.Token, error) {
	t, ok := f[digest]
	if !ok {
		return host.Token{}, host.Errorf(host.ErrTokenNotFound, "token not found")
	}
	return t, nil
}

func readFakeTokens(file string) (fakeTokens, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("--tokens: %w", err)
	}
	var list []struct {
		Token   string    `json:"token"`
		Name    string    `json:"name"`
		Scopes  []string  `json:"scopes"`
		Expires time.Time `json:"expires"`
		Revoked bool      `json:"revoked"`
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&list); err != nil {
		return nil, fmt.Errorf("--tokens %s: want [{\"token\",\"name\",\"scopes\",\"expires\",\"revoked\"}]: %w", file, err)
	}
	ft := fakeTokens{}
	for _, t := range list {
		if t.Token == "" || t.Name == "" {
			return nil, fmt.Errorf("--tokens %s: every token needs \"token\" and \"name\"", file)
		}
		d := sha256.Sum256([]byte(t.Token))
		ft[d] = host.Token{Digest: d, Name: t.Name, Scopes: t.Scopes, Created: time.Now(), Expires: t.Expires, Revoked: t.Revoked}
	}
	return ft, nil
}
