// Command plantgate is the Plant Store gateway: a Fiber server for
// POST /plants whose authorization and validation rules are WebAssembly
// plugins, storing plants in Redis.
//
//	plantgate serve --redis-url redis://127.0.0.1:6379 --plugins ./plugins.d
//	plantgate token create --name ci --scope plants:write --redis-url redis://127.0.0.1:6379
//	plantgate plugin check ./30-tag-denylist.wasm
//	plantgate plugin run ./30-tag-denylist.wasm --phase validate --input plant.json
//
// Every flag has a PLANTGATE_* environment equivalent (--redis-url →
// PLANTGATE_REDIS_URL); run `plantgate help serve` for the list.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/urfave/cli/v3"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := newApp().Run(ctx, os.Args); err != nil {
		code := 1
		var ee *exitError
		if errors.As(err, &ee) {
			code, err = ee.code, ee.err
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "plantgate:", err)
		}
		stop()
		os.Exit(code)
	}
}

func newApp() *cli.Command {
	return &cli.Command{
		Name:     "plantgate",
		Usage:    "a WebAssembly-policy gateway for the Plant Store API",
		Commands: []*cli.Command{serveCommand(), tokenCommand(), webhookCommand(), pluginCommand()},
	}
}

// env names the PLANTGATE_* variable that stands in for a flag.
func env(name string) cli.ValueSourceChain { return cli.EnvVars("PLANTGATE_" + name) }

var redisURLFlag = &cli.StringFlag{
	Name:    "redis-url",
	Usage:   "Redis to store plants and tokens in, as redis://[user:password@]host:port[/db]; empty: an embedded in-memory store that keeps nothing",
	Sources: env("REDIS_URL"),
}
