package redis

import (
	"context"
	"fmt"
	"log/slog"
	"strings"

	goredis "github.com/redis/go-redis/v9"
)

// SetLogger sends go-redis's own log lines (a pool that cannot dial, a
// reconnect) to l, as warnings: by default go-redis prints them with the
// standard log package, which breaks a JSON log into mixed lines. go-redis
// has one logger per process, so this affects every Store.
func SetLogger(l *slog.Logger) {
	goredis.SetLogger(slogPrinter{l})
}

type slogPrinter struct{ l *slog.Logger }

func (p slogPrinter) Printf(ctx context.Context, format string, v ...any) {
	// go-redis prefixes its messages with "redis: "; the component attribute
	// says so already.
	msg := strings.TrimPrefix(fmt.Sprintf(format, v...), "redis: ")
	p.l.WarnContext(ctx, msg, "component", "go-redis")
}
