package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/urfave/cli/v3"

	"github.com/plantgate/plantgate/host/redis"
)

func serveCommand() *cli.Command {
	return &cli.Command{
		Name:        "serve",
		Usage:       "serve the Plant Store API through the plugin chain",
		Description: secretsHelp,
		Flags: append([]cli.Flag{
			&cli.StringFlag{Name: "listen", Value: "127.0.0.1:8080", Usage: "address to serve HTTP on", Sources: env("LISTEN")},
			redisURLFlag,
			redisPasswordFileFlag,
			&cli.IntFlag{Name: "redis-wait-replicas", Usage: "acknowledge a create or delete only once this many Redis replicas have it (WAIT), so it survives a failover, and answer a read only once that many confirm its primary still leads them; fewer within the deadline answer 503 50304 (0: once the primary has it, reads unconfirmed)", Sources: env("REDIS_WAIT_REPLICAS")},
			&cli.StringFlag{Name: "plugins", Usage: "drop-in directory of NN-name.wasm policy plugins (and NN-name.json configs), run in file-name order", Sources: env("PLUGINS")},
			&cli.StringFlag{Name: "bootstrap-token", Usage: "ensure this bearer token exists with every scope at start-up, as the one active token named bootstrap (tests, demos, containers); prefer the environment variable or --bootstrap-token-file", Sources: env("BOOTSTRAP_TOKEN")},
			bootstrapTokenFileFlag,
			&cli.BoolFlag{Name: "insecure-no-auth", Usage: "serve without any authorize plugin: every request is allowed through", Sources: env("INSECURE_NO_AUTH")},
			&cli.IntFlag{Name: "body-limit", Value: 1 << 20, Usage: "largest request body in bytes", Sources: env("BODY_LIMIT")},
			&cli.DurationFlag{Name: "request-timeout", Value: 5 * time.Second, Usage: "deadline for the plugins and the store on one request", Sources: env("REQUEST_TIMEOUT")},
			&cli.DurationFlag{Name: "shutdown-timeout", Value: 15 * time.Second, Usage: "how long in-flight requests may take to finish on SIGTERM", Sources: env("SHUTDOWN_TIMEOUT")},
			&cli.StringFlag{Name: "cache-dir", Usage: "plugin compilation cache (default: the user cache directory's plantgate folder; \"off\" disables it)", Sources: env("CACHE_DIR")},
			&cli.StringFlag{Name: "log-level", Value: "info", Usage: "debug, info, warn or error", Sources: env("LOG_LEVEL")},
			&cli.StringFlag{Name: "log-format", Value: "text", Usage: "text or json", Sources: env("LOG_FORMAT")},
			&cli.BoolFlag{Name: "access-log", Value: true, Usage: "log one line per request", Sources: env("ACCESS_LOG")},
			&cli.DurationFlag{Name: "log-flush", Value: 100 * time.Millisecond, Usage: "hold log lines this long and write them together (a line at warn or above, and every line before it, at once); 0 writes each line as it comes", Sources: env("LOG_FLUSH")},
			&cli.DurationFlag{Name: "stats-interval", Usage: "log each plugin's instances, calls and guest memory this often (0: never)", Sources: env("STATS_INTERVAL")},
			&cli.StringFlag{Name: "admin-listen", Usage: "address of the admin listener serving the read-only console at /, /metrics, /healthz and /readyz, e.g. 127.0.0.1:9090; empty: off. Keep it off the public network", Sources: env("ADMIN_LISTEN")},
			&cli.DurationFlag{Name: "token-cache-ttl", Value: time.Second, Usage: "keep each token the store found this long, so a busy token is read about once per TTL; a revoked token may still pass for up to this long (0: read the store on every request)", Sources: env("TOKEN_CACHE_TTL")},
			&cli.BoolFlag{Name: "pprof", Usage: "also serve Go's profiler (/debug/pprof/) on the admin listener; needs --admin-listen", Sources: env("PPROF")},
			&cli.BoolFlag{Name: "plugins-from-store", Usage: "follow the fleet's plugin chain in the store (plantgate plugin push): load each new version within about a second, keep the old chain when the new one fails here; not with --plugins", Sources: env("PLUGINS_FROM_STORE")},
			&cli.StringSliceFlag{Name: "plugin-trust-key", Usage: "Ed25519 public key file (plugin keygen; repeatable, for rotation): every plugin, from the store or the directory, must be signed by one of them", Sources: env("PLUGIN_TRUST_KEY")},
			&cli.IntFlag{Name: "memory-limit-mib", Value: defaultMemoryLimitMiB, Usage: "soft memory limit of the process in MiB, which keeps a loaded gateway's memory down at some GC cost (0: none); GOMEMLIMIT, when set, wins", Sources: env("MEMORY_LIMIT_MIB")},
			&cli.BoolFlag{Name: "watch", Value: true, Usage: "reload the plugin chain when the plugins directory changes (SIGHUP reloads it too)", Sources: env("WATCH")},
		}, append(append(append(webhookServeFlags(), observabilityFlags()...), transportFlags()...), oidcFlags()...)...),
		Action: func(ctx context.Context, cmd *cli.Command) error {
			logger, flushLog, err := newLogger(cmd.String("log-level"), cmd.String("log-format"), cmd.Duration("log-flush"))
			if err != nil {
				return err
			}
			defer flushLog()
			redis.SetLogger(logger)
			if cmd.Int("redis-wait-replicas") < 0 {
				return fmt.Errorf("--redis-wait-replicas %d: want 0 or more", cmd.Int("redis-wait-replicas"))
			}
			if err := applyMemoryLimit(int64(cmd.Int("memory-limit-mib"))); err != nil {
				return err
			}
			redisURL, err := redisURL(cmd)
			if err != nil {
				return err
			}
			bootstrap, err := bootstrapToken(cmd)
			if err != nil {
				return err
			}
			decisions, err := decisionLogConfig(cmd)
			if err != nil {
				return err
			}
			transport, err := transportOptions(cmd)
			if err != nil {
				return err
			}
			trustTraceparent, err := traceIncoming(cmd)
			if err != nil {
				return err
			}
			oidcOpts, err := oidcOptions(cmd)
			if err != nil {
				return err
			}
			m := &Main{
				Listen:          cmd.String("listen"),
				RedisURL:        redisURL,
				WaitReplicas:    int(cmd.Int("redis-wait-replicas")),
				PluginsDir:      cmd.String("plugins"),
				BootstrapToken:  bootstrap,
				InsecureNoAuth:  cmd.Bool("insecure-no-auth"),
				BodyLimit:       int(cmd.Int("body-limit")),
				RequestTimeout:  cmd.Duration("request-timeout"),
				ShutdownTimeout: cmd.Duration("shutdown-timeout"),
				CacheDir:        cmd.String("cache-dir"),
				AccessLog:       cmd.Bool("access-log"),
				StatsInterval:   cmd.Duration("stats-interval"),
				AdminListen:     cmd.String("admin-listen"),
				Pprof:           cmd.Bool("pprof"),
				TokenCacheTTL:   cmd.Duration("token-cache-ttl"),
				Watch:           cmd.Bool("watch"),
				Webhooks:        webhookOptions(cmd),
				Transport:       transport,
				Logger:          logger,
				DecisionLog:     decisions,
				OTelEnv:         os.LookupEnv,

				TrustTraceparent: trustTraceparent,
				OIDC:             oidcOpts,
			}
			m.PluginsFromStore, m.TrustKeys = cmd.Bool("plugins-from-store"), cmd.StringSlice("plugin-trust-key")
			// Before Run: a SIGHUP must never fall back to its default,
			// which ends the process.
			hup := make(chan os.Signal, 1)
			signal.Notify(hup, syscall.SIGHUP)
			defer signal.Stop(hup)
			if err := m.Run(ctx); err != nil {
				m.Close()
				return err
			}
			if err := serveUntil(ctx, m, hup); err != nil {
				// Exiting beats staying half-alive: a supervisor restarts
				// a process that exits, not one that only stopped accepting.
				logger.Error("a listener stopped by itself: shutting down, exit 1", "err", err)
				m.Close()
				return &exitError{code: 1, err: err}
			}
			logger.Info("shutting down", "timeout", m.ShutdownTimeout)
			return m.Close()
		},
	}
}

// newLogger returns serve's logger on stderr and the function that writes
// out what it still holds (see logBuffer), to call before exiting.
func newLogger(level, format string, flush time.Duration) (*slog.Logger, func(), error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(level)); err != nil {
		return nil, nil, fmt.Errorf("--log-level %q: want debug, info, warn or error", level)
	}
	if flush < 0 {
		return nil, nil, fmt.Errorf("--log-flush %s: want 0 or more", flush)
	}
	opts := &slog.HandlerOptions{Level: l}
	var w io.Writer = os.Stderr
	var buf *logBuffer
	if flush > 0 {
		buf = newLogBuffer(os.Stderr, flush)
		w = buf
	}
	var h slog.Handler
	switch format {
	case "text":
		h = slog.NewTextHandler(w, opts)
	case "json":
		h = slog.NewJSONHandler(w, opts)
	default:
		return nil, nil, fmt.Errorf("--log-format %q: want text or json", format)
	}
	if buf == nil {
		return slog.New(h), func() {}, nil
	}
	return slog.New(flushingHandler{h, buf}), func() { _ = buf.Flush() }, nil
}
