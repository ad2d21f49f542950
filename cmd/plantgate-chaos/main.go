// Command plantgate-chaos runs Plantgate against faults and checks what it
// answered (issue 23): a real Redis Cluster (3 primaries, 1 replica each,
// AOF always), 3 `plantgate serve` processes with --redis-wait-replicas 1,
// clients creating, reading, deleting and listing plants through all of
// them, a webhook receiver, and a nemesis killing, pausing and restarting
// nodes and gateways on a schedule drawn from -seed. Every operation is
// recorded and the history is checked with porcupine against a model of
// the store, one plant id at a time; list walks, webhook deliveries, a
// revoked token and the shape of every error answer are checked too.
//
//	bin/plantgate-chaos -gateway bin/plantgate -plugins bin/plugins -duration 10m -seed 7
//
// It prints a report and exits 1 on any anomaly (2 when it could not run).
// The same seed draws the same schedule of faults and the same operations
// per client; the interleaving is the machine's.
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"math/rand/v2"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/plantgate/plantgate/host/redis/redistest"
)

type config struct {
	gateway, plugins, out string
	duration              time.Duration
	seed                  uint64
	gateways, clients     int
	ids                   int
	demoRewriteWindow     bool
	skipPause             bool
}

func main() {
	var c config
	flag.StringVar(&c.gateway, "gateway", "bin/plantgate", "the plantgate binary to run")
	flag.StringVar(&c.plugins, "plugins", "bin/plugins", "the bundled plugins directory (bearer-auth and plant-rules)")
	flag.StringVar(&c.out, "out", "", "directory for the report's files (porcupine visualizations); default: a new temporary directory")
	flag.DurationVar(&c.duration, "duration", 10*time.Minute, "how long the workload and the nemesis run")
	flag.Uint64Var(&c.seed, "seed", 0, "seed of the fault schedule and the operations (0: a random one, printed)")
	flag.IntVar(&c.gateways, "gateways", 3, "gateway processes")
	flag.IntVar(&c.clients, "clients", 8, "concurrent clients")
	flag.IntVar(&c.ids, "ids", 300, "plant ids the clients share (fewer: more repeats and contention)")
	flag.BoolVar(&c.demoRewriteWindow, "demo-rewrite-window", false,
		"inject the one fault Redis 7.0 cannot survive with WAIT 1 (a replica restarted during the AOF rewrite after its full sync, then its primary killed) instead of the random schedule; the checker must find the loss")
	flag.BoolVar(&c.skipPause, "skip-pause", false,
		"leave out the SIGSTOP of a primary, to tell its effects from the other faults' (a primary resumed after its failover answered reads from a write it then lost, until the gateway fenced reads under --redis-wait-replicas; docs/reliability.md)")
	flag.Parse()
	if c.seed == 0 {
		c.seed = rand.Uint64()%1_000_000 + 1
	}
	if c.out == "" {
		dir, err := os.MkdirTemp("", "plantgate-chaos-")
		if err != nil {
			fatal(err)
		}
		c.out = dir
	}
	os.Exit(run(c))
}

func fatal(err error) {
	fmt.Fprintln(os.Stderr, "plantgate-chaos:", err)
	os.Exit(2)
}

// run returns the exit code: 0 clean, 1 anomalies, 2 could not run.
func run(c config) int {
	fmt.Printf("plantgate-chaos: seed %d, duration %v, %d gateways, %d clients, %d ids (replay: -seed %d)\n",
		c.seed, c.duration, c.gateways, c.clients, c.ids, c.seed)
	if c.skipPause {
		fmt.Println("faults: the SIGSTOP of a primary is left out (-skip-pause)")
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	fmt.Println("netem:", probeNetem())
	cl, err := redistest.LaunchCluster(redistest.ClusterOptions{Primaries: 3, Replicas: 1, AppendOnly: true, NodeTimeout: nodeTimeout})
	if err != nil {
		fmt.Fprintln(os.Stderr, "plantgate-chaos: cluster:", err)
		return 2
	}
	defer cl.Close()
	env, err := setup(ctx, c, cl)
	if env != nil {
		defer env.close()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "plantgate-chaos:", err)
		return 2
	}

	rec := newRecorder()
	// net/http's client logs an answer that came on a connection with no
	// request outstanding: the gateway answered something the client never
	// asked, and a client that had just sent its next request would have
	// taken that answer for its own.
	log.SetOutput(logAnomalies{rec})
	wctx, wstop := context.WithCancel(ctx)
	done := startWorkload(wctx, c, env, rec)
	kinds := faultKinds
	if c.skipPause {
		kinds = slices.DeleteFunc(slices.Clone(kinds), func(k string) bool { return k == faultPausePrimary })
	}
	nem := &nemesis{kinds: kinds, env: env, cl: cl, rng: rand.New(rand.NewPCG(c.seed, 0x6e656d65)), rec: rec}
	var nerr error
	if c.demoRewriteWindow {
		nerr = nem.rewriteWindow(ctx)
	} else {
		nerr = nem.run(ctx, time.Now().Add(c.duration))
	}
	// A last quiet stretch, with every fault healed, so that each plant is
	// read and listed after its last fault.
	if nerr == nil {
		nerr = nem.heal(ctx)
		sleepCtx(ctx, 3*time.Second)
	}
	wstop()
	done()
	env.recv.settle(ctx, rec, 60*time.Second)

	r := check(c, rec, env, nem)
	r.print(os.Stdout)
	if f, err := os.Create(filepath.Join(c.out, "report.txt")); err == nil {
		r.print(f)
		_ = f.Close()
	}
	if nerr != nil {
		fmt.Fprintln(os.Stderr, "plantgate-chaos: nemesis:", nerr)
		return 2
	}
	if len(r.anomalies) > 0 {
		fmt.Printf("FAIL: %d anomalies (files in %s)\n", len(r.anomalies), c.out)
		return 1
	}
	fmt.Printf("PASS: no anomaly (report in %s)\n", c.out)
	return 0
}

// logAnomalies turns what the standard logger prints (net/http's client
// only, here) into anomalies.
type logAnomalies struct{ rec *recorder }

func (l logAnomalies) Write(p []byte) (int, error) {
	l.rec.anomaly("unsolicited-response", -1, "net/http client: %s", strings.TrimSpace(string(p)))
	return len(p), nil
}

// sleepCtx sleeps for d or until ctx ends.
func sleepCtx(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}
