// Command plantgate is the Plant Store gateway: a Fiber server for
// POST /plants whose authorization and validation rules are WebAssembly
// plugins, storing plants in Redis.
//
//	plantgate serve --redis-url redis://127.0.0.1:6379 --plugins ./plugins.d
//	plantgate token create --name ci --scope plants:write --redis-url redis://127.0.0.1:6379
//	plantgate plugin check ./30-tag-denylist.wasm
//	plantgate plugin run ./30-tag-denylist.wasm --phase validate --input plant.json
//	plantgate plugin push ./30-tag-denylist.wasm --sign-key ops.key --redis-url redis://127.0.0.1:6379
//
// Every flag has a PLANTGATE_* environment equivalent (--redis-url →
// PLANTGATE_REDIS_URL); run `plantgate help serve` for the list.
package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/urfave/cli/v3"

	"github.com/plantgate/plantgate/host/buildinfo"
	"github.com/plantgate/plantgate/host/redis"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	// go-redis logs each failed dial with the standard log package. A
	// one-shot command (token, webhook, plugin run) reports the store's
	// error itself, once; serve replaces this with its own logger.
	redis.SetLogger(slog.New(slog.DiscardHandler))
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
	app := &cli.Command{
		Name:     "plantgate",
		Usage:    "a WebAssembly-policy gateway for the Plant Store API",
		Version:  buildinfo.Get().String(),
		Commands: []*cli.Command{serveCommand(), tokenCommand(), webhookCommand(), pluginCommand(), helpCommand()},
	}
	refuseUnknownCommands(app)
	return app
}

// refuseUnknownCommands gives each command that only groups others an
// action naming them: left alone, urfave/cli takes a mistyped command for
// a help topic and answers "No help topic for 'x'".
func refuseUnknownCommands(c *cli.Command) {
	for _, sub := range c.Commands {
		refuseUnknownCommands(sub)
	}
	if len(c.Commands) == 0 || c.Action != nil {
		return
	}
	c.Action = func(ctx context.Context, cmd *cli.Command) error {
		if !cmd.Args().Present() {
			return cli.ShowSubcommandHelp(cmd)
		}
		var names []string
		for _, sub := range cmd.VisibleCommands() {
			names = append(names, sub.Name)
		}
		path := strings.TrimPrefix(cmd.FullName()+" ", cmd.Root().Name+" ")
		return &exitError{code: 2, err: fmt.Errorf("unknown command %q: the commands are %s (%s --help describes them)",
			path+cmd.Args().First(), strings.Join(names, ", "), cmd.FullName())}
	}
}

// helpCommand is `plantgate help [COMMAND...]`: urfave/cli's own goes one
// level down only, so `help plugin conformance` showed the plugin group.
func helpCommand() *cli.Command {
	return &cli.Command{
		Name:      "help",
		Aliases:   []string{"h"},
		Usage:     "show the commands, or the help of one: plantgate help plugin conformance",
		ArgsUsage: "[COMMAND...]",
		HideHelp:  true,
		Action: func(ctx context.Context, cmd *cli.Command) error {
			c := cmd.Root()
			for i, name := range cmd.Args().Slice() {
				sub := c.Command(name)
				if sub == nil {
					path := strings.Join(cmd.Args().Slice()[:i+1], " ")
					return &exitError{code: 2, err: fmt.Errorf("no command %q: %s --help lists the commands", path, c.FullName())}
				}
				if len(sub.Commands) == 0 {
					return cli.ShowCommandHelp(ctx, c, name)
				}
				c = sub
			}
			if c == cmd.Root() {
				return cli.ShowRootCommandHelp(c)
			}
			return cli.ShowSubcommandHelp(c)
		},
	}
}

// env names the PLANTGATE_* variable that stands in for a flag.
func env(name string) cli.ValueSourceChain { return cli.EnvVars("PLANTGATE_" + name) }

var redisURLFlag = &cli.StringFlag{
	Name:    "redis-url",
	Usage:   "Redis to store plants and tokens in: redis://[user:password@]host:port[/db] (a cluster node is detected), a cluster as redis://h1:p1?addr=h2:p2&addr=h3:p3, or Sentinel as redis+sentinel://[user:password@]s1:p1?addr=s2:p2&master_name=NAME; empty: an embedded in-memory store that keeps nothing",
	Sources: env("REDIS_URL"),
}
