package webhook_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	goredis "github.com/redis/go-redis/v9"

	"github.com/plantgate/plantgate/host"
	"github.com/plantgate/plantgate/host/redis"
	"github.com/plantgate/plantgate/host/redis/redistest"
	"github.com/plantgate/plantgate/host/webhook"
)

// backend is one store under test with a raw client on the same server,
// to write outbox entries the way the create and delete scripts do.
type backend struct {
	store  *redis.Store
	raw    goredis.UniversalClient
	prefix string
}

var prefixes atomic.Int64

// backends runs fn against miniredis and against a real redis-server.
func backends(t *testing.T, fn func(t *testing.T, newB func(t *testing.T) backend)) {
	t.Run("miniredis", func(t *testing.T) {
		t.Parallel()
		fn(t, func(t *testing.T) backend {
			mr := miniredis.RunT(t)
			return open(t, "redis://"+mr.Addr(), goredis.NewClient(&goredis.Options{Addr: mr.Addr()}))
		})
	})
	t.Run("redis-server", func(t *testing.T) {
		t.Parallel()
		srv := redistest.Start(t)
		fn(t, func(t *testing.T) backend {
			return open(t, srv.URL(), goredis.NewClient(&goredis.Options{Addr: srv.Addr()}))
		})
	})
	// Each outbox shard's stream, consumer group, XAUTOCLAIM and XTRIM on
	// the primary of its slot; the {webhooks} scripts in one slot.
	t.Run("redis-cluster", func(t *testing.T) {
		t.Parallel()
		c := cluster.Get(t)
		fn(t, func(t *testing.T) backend {
			co, err := goredis.ParseClusterURL(c.URL())
			if err != nil {
				t.Fatal(err)
			}
			return open(t, c.URL(), goredis.NewClusterClient(co))
		})
	})
}

// open opens a store on url with a fresh key prefix; raw is a plain client
// on the same data, closed when the test ends.
func open(t *testing.T, url string, raw goredis.UniversalClient) backend {
	t.Helper()
	t.Cleanup(func() { raw.Close() })
	prefix := "w" + strconv.FormatInt(prefixes.Add(1), 10) + ":"
	st, err := redis.Open(context.Background(), url, redis.Options{KeyPrefix: prefix})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return backend{store: st, raw: raw, prefix: prefix}
}

// emit writes one outbox entry as the create/delete scripts do and returns
// its webhook-id.
func (b backend) emit(t *testing.T, shard int, typ, data string) string {
	t.Helper()
	id, err := b.raw.XAdd(context.Background(), &goredis.XAddArgs{
		Stream: fmt.Sprintf("%s{p%02d}:events", b.prefix, shard),
		Values: []any{"type", typ, "ts", strconv.FormatInt(time.Now().UnixMilli(), 10), "data", data},
	}).Result()
	if err != nil {
		t.Fatal(err)
	}
	return redis.EventID(shard, id)
}

func (b backend) addEndpoint(t *testing.T, url string, events ...string) host.Endpoint {
	t.Helper()
	if len(events) == 0 {
		events = host.AllEvents
	}
	secret, err := webhook.NewSecret()
	if err != nil {
		t.Fatal(err)
	}
	ep := host.Endpoint{ID: "ep_" + strconv.FormatInt(prefixes.Add(1), 10), URL: url, Events: events, Secret: secret, Created: time.Now()}
	if err := b.store.AddEndpoint(context.Background(), ep); err != nil {
		t.Fatal(err)
	}
	return ep
}

// start runs a deliverer tuned for tests: receivers on loopback, short waits.
func (b backend) start(t *testing.T, mod func(*webhook.Options)) *webhook.Deliverer {
	t.Helper()
	o := webhook.Options{AllowPrivate: true, Timeout: 2 * time.Second, Backoff: 5 * time.Millisecond, Poll: 20 * time.Millisecond, Consumer: "gw-" + strconv.FormatInt(prefixes.Add(1), 10)}
	if mod != nil {
		mod(&o)
	}
	d := webhook.New(b.store, o)
	if err := d.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := d.Close(ctx); err != nil {
			t.Error(err)
		}
	})
	return d
}

// delivery waits for the delivery's record to reach state.
func (b backend) delivery(t *testing.T, id, state string) host.Delivery {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		ds, err := b.store.Deliveries(context.Background(), false, 1000)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range ds {
			if d.ID == id && d.State == state {
				return d
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("delivery %s never reached %s; deliveries: %+v", id, state, ds)
		}
		time.Sleep(10 * time.Millisecond) // polling stored state, not ordering events
	}
}

// hit is one request a receiver got.
type hit struct {
	header http.Header
	body   []byte
}

// receiver answers each request with answer(n) (n counts from 1) and
// reports every request on the returned channel.
func receiver(t *testing.T, answer func(n int) int) (*httptest.Server, chan hit) {
	t.Helper()
	hits := make(chan hit, 1000)
	var mu sync.Mutex
	n := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		mu.Lock()
		n++
		status := answer(n)
		mu.Unlock()
		hits <- hit{header: r.Header.Clone(), body: body}
		w.WriteHeader(status)
	}))
	t.Cleanup(srv.Close)
	return srv, hits
}

func next(t *testing.T, hits <-chan hit) hit {
	t.Helper()
	select {
	case h := <-hits:
		return h
	case <-time.After(15 * time.Second):
		t.Fatal("no webhook request within 15s")
		return hit{}
	}
}

func ok(int) int { return http.StatusNoContent }
