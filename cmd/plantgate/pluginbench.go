package main

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"text/tabwriter"
	"time"

	"github.com/urfave/cli/v3"

	"github.com/plantgate/plantgate/host/redis"
	"github.com/plantgate/plantgate/host/wasm"
)

// `plantgate plugin bench` measures what one decision of a plugin costs the
// gateway: the whole host call (encoding, the guest, judging the decision),
// on one warm instance, with an in-memory KV store, beside the bundled
// plugins serving the same phase, measured in the same run on the same
// input so that the figures compare.

// benchWarm calls are made before measuring: the first calls fault in
// memory and grow the guest's heap.
const benchWarm = 1000

func pluginBenchCommand(configFlag, cacheFlag cli.Flag) *cli.Command {
	return &cli.Command{
		Name:  "bench",
		Usage: "measure a plugin's cost per call (mean, p99, guest memory) for each phase it serves, beside the bundled plugins' figures",
		Description: `Calls FILE.wasm's phases on one warm instance, with an in-memory KV store, exactly as the gateway
does (encoding, the call, judging the decision), and prints a row per plugin and phase: calls, mean
and p99 per call (the median beside the mean: a loaded machine's pauses swell the mean), and the
instance's memory at the end. The input is --input for --phase, or a usual
request of each phase the plugin serves. The bundled plugins found in --bundled (default: bin/plugins,
or plugins beside the plantgate binary) that serve the same phase are measured on the same input, in
the same run; compare rows, not runs. A sample input that faults is an error: plugin conformance says why.`,
		ArgsUsage: "FILE.wasm",
		Flags: []cli.Flag{configFlag, cacheFlag,
			&cli.StringFlag{Name: "phase", Usage: "authorize or validate (with --input; default: every phase the plugin serves)"},
			&cli.StringFlag{Name: "input", Usage: `the request to measure, as plugin run --input takes it ("-": standard input)`},
			&cli.IntFlag{Name: "calls", Value: 20000, Usage: "measured calls per row (after 1000 warm-up calls)"},
			&cli.StringFlag{Name: "bundled", Usage: `directory of the bundled plugins to compare with ("none": compare with none)`},
		},
		Action: func(ctx context.Context, cmd *cli.Command) error {
			file, err := oneFile(cmd)
			if err != nil {
				return err
			}
			return benchPlugin(ctx, cmd, file)
		},
	}
}

// benchRow is one measured plugin and phase.
type benchRow struct {
	plugin, phase  string
	calls          int
	mean, p50, p99 time.Duration
	memory         int64
	bundled        bool
}

func benchPlugin(ctx context.Context, cmd *cli.Command, file string) error {
	phase, inputFile := cmd.String("phase"), cmd.String("input")
	if (phase == "") != (inputFile == "") {
		return errors.New("--phase and --input go together: give both, or neither for a usual request of each phase")
	}
	inputs := map[string]string{}
	if phase != "" {
		if err := checkPhase(phase); err != nil {
			return fmt.Errorf("--%w", err)
		}
		b, err := readInput(cmd.Root().Reader, "input", inputFile)
		if err != nil {
			return err
		}
		inputs[phase] = string(b)
	}
	calls := int(cmd.Int("calls"))
	if calls < 100 || calls > 10_000_000 {
		return fmt.Errorf("--calls %d: want 100 to 10000000", calls)
	}
	b := &bench{cacheDir: cmd.String("cache-dir"), calls: calls}
	rows, err := b.measure(ctx, file, cmd.String("config"), inputs, false)
	if err != nil {
		return err
	}
	for _, other := range bundledPlugins(cmd.String("bundled"), file) {
		served := map[string]string{}
		for _, r := range rows {
			served[r.phase] = inputs[r.phase]
			if served[r.phase] == "" {
				served[r.phase] = usualInput[r.phase]
			}
		}
		more, err := b.measure(ctx, other, "", served, true)
		if err != nil {
			return fmt.Errorf("bundled plugin %s: %w", filepath.Base(other), err)
		}
		rows = append(rows, more...)
	}
	return printBench(cmd.Root().Writer, rows)
}

// bench measures plugins alike.
type bench struct {
	cacheDir string
	calls    int
}

// measure loads file and measures each phase of inputs it serves (every
// phase it serves, on the usual input, when inputs is empty and only is
// false; only those of inputs, silently skipping the rest, when only).
func (b *bench) measure(ctx context.Context, file, config string, inputs map[string]string, only bool) ([]benchRow, error) {
	sc, _, err := readSidecar(file, config)
	if err != nil {
		return nil, err
	}
	st, closeKV, err := redis.Embedded(ctx, redis.Options{})
	if err != nil {
		return nil, fmt.Errorf("plugin KV store: %w", err)
	}
	defer closeKV()
	faults := &faultLog{}
	limits := sc.Limits.Or(wasm.DefaultLimits())
	limits.Instances = 1
	limits.MaxCalls = max(limits.MaxCalls, 2*(b.calls+benchWarm))
	limits.Timeout = max(limits.Timeout, kitTimeout) // a slow call is measured, not failed
	p, err := wasm.LoadPlugin(ctx, file, sc.Config,
		wasm.Options{Logger: slog.New(faults), Limits: limits, KV: st, Tokens: conformanceTokens(), CacheDir: b.cacheDir}.WithRequestHeaders(sc.Headers))
	if err != nil {
		return nil, err
	}
	defer p.Close(ctx)
	info := p.Info()
	var rows []benchRow
	for _, phase := range info.Phases {
		input, given := inputs[phase]
		switch {
		case !given && (only || len(inputs) > 0):
			continue
		case !given:
			input = usualInput[phase]
		}
		call, err := decisionCall(ctx, p, phase, []byte(input), slog.New(slog.DiscardHandler))
		if err != nil {
			return nil, err
		}
		took := make([]time.Duration, b.calls)
		for i := range benchWarm + b.calls {
			start := time.Now()
			d := call()
			if i >= benchWarm {
				took[i-benchWarm] = time.Since(start)
			}
			if d.Decision == "fault" {
				return nil, fmt.Errorf("plugin %s: the %s input %s faults (%s): plantgate plugin conformance says what is wrong", info.File, phase, shorten(input), faults.take())
			}
		}
		var sum time.Duration
		for _, d := range took {
			sum += d
		}
		slices.Sort(took)
		rows = append(rows, benchRow{plugin: info.Name, phase: phase, calls: b.calls, mean: sum / time.Duration(b.calls),
			p50: took[len(took)/2], p99: took[len(took)*99/100], memory: p.Memory()})
	}
	for i := range rows {
		rows[i].bundled = only
	}
	if len(rows) == 0 && !only {
		return nil, fmt.Errorf("plugin %s does not serve the %s phase (it serves: %v)", info.File, firstKey(inputs), info.Phases)
	}
	return rows, nil
}

func firstKey(m map[string]string) string {
	for k := range m {
		return k
	}
	return ""
}

// bundledPlugins lists the bundled plugins to compare with: dir's, or
// bin/plugins, or plugins beside the running binary; never file itself.
func bundledPlugins(dir, file string) []string {
	if dir == "none" {
		return nil
	}
	if dir == "" {
		dir = "bin/plugins"
		if _, err := os.Stat(dir); err != nil {
			exe, err := os.Executable()
			if err != nil {
				return nil
			}
			dir = filepath.Join(filepath.Dir(exe), "plugins")
		}
	}
	found, _ := filepath.Glob(filepath.Join(dir, "[0-9][0-9]-*.wasm"))
	self := fileDigest(file)
	var out []string
	for _, f := range found {
		if fileDigest(f) != self {
			out = append(out, f)
		}
	}
	return out
}

func fileDigest(file string) [32]byte {
	b, _ := os.ReadFile(file)
	return sha256.Sum256(b)
}

func printBench(out io.Writer, rows []benchRow) error {
	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "plugin\tphase\tcalls\tmean\tp50\tp99\tmemory\t")
	for _, r := range rows {
		note := ""
		if r.bundled {
			note = "bundled"
		}
		fmt.Fprintf(w, "%s\t%s\t%d\t%s\t%s\t%s\t%d KiB\t%s\n", r.plugin, r.phase, r.calls,
			r.mean.Round(10*time.Nanosecond), r.p50.Round(10*time.Nanosecond), r.p99.Round(10*time.Nanosecond), r.memory>>10, note)
	}
	return w.Flush()
}
