package redistest_test

import (
	"context"
	"strings"
	"testing"

	goredis "github.com/redis/go-redis/v9"

	"github.com/plantgate/plantgate/host/redis/redistest"
)

func TestServer(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name        string
		opts        []redistest.Option
		wantRestore bool // a key written before Kill is back after Restart
	}{
		{"in memory", nil, false},
		{"append only", []redistest.Option{redistest.WithAppendOnly()}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			srv := redistest.Start(t, tt.opts...)
			if !strings.HasPrefix(srv.URL(), "redis://127.0.0.1:") || !strings.HasSuffix(srv.URL(), "/0") {
				t.Fatalf("URL = %q", srv.URL())
			}
			ctx := context.Background()
			opts, err := goredis.ParseURL(srv.URL())
			if err != nil {
				t.Fatal(err)
			}
			opts.MaxRetries = -1
			c := goredis.NewClient(opts)
			t.Cleanup(func() { _ = c.Close() })
			if err := c.Set(ctx, "k", "v", 0).Err(); err != nil {
				t.Fatal(err)
			}

			srv.Kill()
			if err := c.Ping(ctx).Err(); err == nil {
				t.Fatal("PING after Kill succeeded")
			}
			srv.Kill() // a second Kill does nothing

			srv.Restart(t)
			got, err := c.Get(ctx, "k").Result()
			if restored := err == nil && got == "v"; restored != tt.wantRestore {
				t.Fatalf("after restart GET k = %q, %v; want restored=%v", got, err, tt.wantRestore)
			}

			srv.Stop()
			if err := c.Ping(ctx).Err(); err == nil {
				t.Fatal("PING after Stop succeeded")
			}
		})
	}
}

func TestWithArgs(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t, redistest.WithArgs("--maxmemory", "12345678"))
	c := goredis.NewClient(&goredis.Options{Addr: srv.Addr()})
	t.Cleanup(func() { _ = c.Close() })
	got, err := c.ConfigGet(context.Background(), "maxmemory").Result()
	if err != nil || got["maxmemory"] != "12345678" {
		t.Fatalf("maxmemory = %v, %v", got, err)
	}
}
