// Command plantgate-bench is the load benchmark behind `make bench-load` and
// `make soak`. It starts its own redis-server (AOF, appendfsync everysec),
// the built gateway (bin/plantgate) with the bundled plugins and a bootstrap
// token, and a bare Fiber echo of POST /plants (this binary's hidden `echo`
// subcommand) as the ceiling, then drives both with wrk over loopback:
//
//	go build -o bin/plantgate-bench ./cmd/plantgate-bench
//	bin/plantgate-bench -gateway bin/plantgate -plugins bin/plugins
//
// Each round runs the ceiling, then the gateway, then a second gateway on
// the same plugins with "limits": {"interrupt": false} added to their
// sidecars (the cost of deadline enforcement, side by side), for -duration
// each; the report is the median of the rounds. Figures are ratios within one run:
// never compare them with a fixed number from another machine or day.
//
// wrk (C, event-driven) rather than a Go load generator: it spends far less
// CPU per request than the gateway does, so on a small machine it takes
// less from the process it measures, and it has no GC of its own to add to
// the tail. Both still share the machine's cores with the gateway.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == "peer-fiber" {
		if err := runFiberPeer(os.Args[2:]); err != nil {
			fmt.Fprintln(os.Stderr, "plantgate-bench peer-fiber:", err)
			os.Exit(1)
		}
		return
	}
	if len(os.Args) > 1 && os.Args[1] == "echo" {
		if err := runEcho(os.Args[2:]); err != nil {
			fmt.Fprintln(os.Stderr, "plantgate-bench echo:", err)
			os.Exit(1)
		}
		return
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "plantgate-bench:", err)
		stop()
		os.Exit(1)
	}
}

// config is the command line.
type config struct {
	gateway     string
	plugins     string
	redisServer string
	wrk         string
	nginx       string // the nginx + Lua peer's nginx; "" leaves that peer out
	duration    time.Duration
	rounds      int
	connections int
	threads     int
	accessLog   bool
	soak        time.Duration
	interval    time.Duration
	profile     string
	rateLimit   string // plugins/rate-limit's wasm: adds its row (ratelimit.go)
}

func parseFlags(args []string) (config, error) {
	var c config
	fs := flag.NewFlagSet("plantgate-bench", flag.ContinueOnError)
	fs.StringVar(&c.gateway, "gateway", "bin/plantgate", "the gateway binary")
	fs.StringVar(&c.plugins, "plugins", "bin/plugins", "the plugins directory")
	fs.StringVar(&c.redisServer, "redis-server", "redis-server", "the redis-server binary")
	fs.StringVar(&c.wrk, "wrk", "wrk", "the wrk binary")
	fs.StringVar(&c.nginx, "nginx", "nginx", `nginx with libnginx-mod-http-lua, for the nginx + Lua peer ("" leaves it out)`)
	fs.DurationVar(&c.duration, "duration", 8*time.Second, "load per target and round")
	fs.IntVar(&c.rounds, "rounds", 3, "rounds; the report is their median")
	fs.IntVar(&c.connections, "connections", 64, "concurrent connections")
	fs.IntVar(&c.threads, "threads", 2, "wrk threads")
	fs.BoolVar(&c.accessLog, "access-log", true, "run the gateways with their access log on, as serve defaults to (to a file in the run's directory)")
	fs.DurationVar(&c.soak, "soak", 0, "instead of the comparison, load the gateway this long and print a table over time")
	fs.DurationVar(&c.interval, "interval", 30*time.Second, "with -soak: one table row per interval")
	fs.StringVar(&c.profile, "profile", "", "save the gateway's CPU and allocation profiles of the first round's create load into this directory (serves --pprof)")
	fs.StringVar(&c.rateLimit, "rate-limit", "", "plugins/rate-limit's .wasm: add a row for the chain with it (limit never reached)")
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	if c.rounds < 1 || c.connections < 1 || c.threads < 1 || c.duration < time.Second {
		return c, errors.New("-rounds, -connections and -threads must be at least 1, -duration at least 1s")
	}
	return c, nil
}

func run(ctx context.Context, args []string) error {
	cfg, err := parseFlags(args)
	if err != nil {
		return err
	}
	bins := []string{cfg.gateway, cfg.redisServer, cfg.wrk}
	if cfg.nginx != "" && cfg.soak == 0 {
		bins = append(bins, cfg.nginx)
	}
	for _, bin := range bins {
		if _, err := lookPath(bin); err != nil {
			return fmt.Errorf("%s not found: %w (make build; apt-get install redis-server wrk nginx libnginx-mod-http-lua lua-cjson lua-nginx-redis, or -nginx \"\")", bin, err)
		}
	}
	env, err := start(ctx, cfg)
	if err != nil {
		return err
	}
	defer env.close()
	if cfg.soak > 0 {
		return soak(ctx, cfg, env)
	}
	return compare(ctx, cfg, env)
}
