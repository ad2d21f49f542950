package redis

import (
	"context"
	"errors"
	"net"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/plantgate/plantgate/host/redis/redistest"
)

// These tests need a redis-server binary; redistest skips them without one
// unless PLANTGATE_REQUIRE_REDIS=1.

var prefixes atomic.Int64

// serverFixture shares one server between subtests; a key prefix per
// subtest keeps them apart.
func serverFixture(srv *redistest.Server) newFixture {
	return func(t *testing.T) fixture {
		t.Helper()
		prefix := "t" + strconv.FormatInt(prefixes.Add(1), 10) + ":"
		s, err := Open(context.Background(), srv.URL(), Options{KeyPrefix: prefix})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = s.Close() })
		s.now = fixedNow
		raw := goredis.NewClient(&goredis.Options{Addr: srv.Addr()})
		t.Cleanup(func() { _ = raw.Close() })
		return fixture{store: s, raw: raw, prefix: prefix}
	}
}

func TestStoreRedisServer(t *testing.T) {
	t.Parallel()
	runStoreSuite(t, serverFixture(redistest.Start(t)))
}

func TestPersistenceRedisServer(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		opts []redistest.Option
		want string // the description's start; the rest has a timestamp
	}{
		{"no aof", nil, `aof=off rdb_save="" rdb_last_save=`},
		{"aof always", []redistest.Option{redistest.WithAppendOnly()}, `aof=on appendfsync=always rdb_save="" rdb_last_save=`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := serverFixture(redistest.Start(t, tt.opts...))(t)
			got, err := f.store.Persistence(context.Background())
			if err != nil || !strings.HasPrefix(got, tt.want) || !strings.Contains(got, " rdb_last_bgsave=ok") {
				t.Fatalf("Persistence = %q, %v; want it to start %q", got, err, tt.want)
			}
		})
	}
}

// TestRedisServerDown: a crashed server means 503 within the timeouts, for
// every call, and the same Store works again once the server is back; with
// AOF (appendfsync always) an acknowledged create survives the crash.
func TestRedisServerDown(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t, redistest.WithAppendOnly())
	f := serverFixture(srv)(t)
	ctx := context.Background()
	if created, err := f.store.CreatePlant(ctx, plant(1, "Fern")); !created || err != nil {
		t.Fatalf("created=%v err=%v", created, err)
	}

	srv.Kill()
	_, err := f.store.CreatePlant(ctx, plant(2, "Moss"))
	wantUnavailable(t, err)
	// Found dead from the socket (refused, reset, closed), not by waiting
	// out a timeout.
	if ne := net.Error(nil); errors.As(err, &ne) && ne.Timeout() {
		t.Fatalf("CreatePlant on a dead server waited for a timeout: %v", err)
	}
	for name, err := range storeCalls(ctx, f.store) {
		t.Run(name, func(t *testing.T) { wantUnavailable(t, err) })
	}

	srv.Restart(t)
	// go-redis stops dialling after PoolSize failed dials and probes in the
	// background once a second, so allow a few seconds to reconnect.
	deadline := time.Now().Add(5 * time.Second)
	for f.store.Ping(ctx) != nil {
		if time.Now().After(deadline) {
			t.Fatalf("store did not reconnect: %v", f.store.Ping(ctx))
		}
		time.Sleep(50 * time.Millisecond)
	}
	if created, err := f.store.CreatePlant(ctx, plant(1, "Fern")); created || err != nil {
		t.Fatalf("re-create after restart: created=%v err=%v; want the plant kept by the AOF", created, err)
	}
	if created, err := f.store.CreatePlant(ctx, plant(2, "Moss")); !created || err != nil {
		t.Fatalf("create after restart: created=%v err=%v", created, err)
	}
}
