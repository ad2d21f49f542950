package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/plantgate/plantgate/host/redis/redistest"
)

// webhookReceiver counts the verified requests it gets per webhook-id and
// signals once every id in want has arrived at least once.
type webhookReceiver struct {
	*httptest.Server
	mu     sync.Mutex
	verify *standardwebhooks.Webhook
	seen   map[string]int
	bodies map[string]string
	want   int
	all    chan struct{}
	bad    []string
	// hold, when set, keeps every request waiting until it is closed;
	// held is signalled as each one starts waiting.
	hold chan struct{}
	held chan struct{}
	// mine, when set, tells this test's events from others' on a shared
	// store (an endpoint receives every event still in the outbox): only
	// its events count towards want; the others go to foreign.
	mine    func(body string) bool
	foreign map[string]int
}

func newWebhookReceiver(t *testing.T, want int) *webhookReceiver {
	r := &webhookReceiver{seen: map[string]int{}, bodies: map[string]string{}, foreign: map[string]int{}, want: want, all: make(chan struct{})}
	r.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		if r.hold != nil {
			select {
			case r.held <- struct{}{}:
			default:
			}
			<-r.hold
		}
		r.mu.Lock()
		defer r.mu.Unlock()
		if err := r.verify.Verify(body, req.Header); err != nil {
			r.bad = append(r.bad, err.Error())
			w.WriteHeader(400)
			return
		}
		id := req.Header.Get("webhook-id")
		if r.mine != nil && !r.mine(string(body)) {
			r.foreign[id]++
			w.WriteHeader(200)
			return
		}
		r.seen[id]++
		r.bodies[id] = string(body)
		if len(r.seen) == r.want && r.seen[id] == 1 {
			close(r.all)
		}
		w.WriteHeader(200)
	}))
	t.Cleanup(r.Close)
	return r
}

// addWebhook registers url through the CLI and returns the printed secret.
func addWebhook(t *testing.T, redisURL, url string) (id, secret string) {
	t.Helper()
	out, errOut, code := runCLI(t, "", "webhook", "--redis-url", redisURL, "add", "--url", url, "--allow-private")
	m := regexp.MustCompile(`^id:     (ep_[0-9a-f]{16})\nsecret: (whsec_[A-Za-z0-9+/=]+)\n$`).FindStringSubmatch(out)
	if code != 0 || m == nil {
		t.Fatalf("webhook add: code %d, out %q, err %q", code, out, errOut)
	}
	return m[1], m[2]
}

// registeredReceiver is a receiver for want events, registered as an
// endpoint in srv, and a client to write outbox entries with.
func registeredReceiver(t *testing.T, srv *redistest.Server, want int) (*webhookReceiver, *goredis.Client) {
	t.Helper()
	recv := newWebhookReceiver(t, want)
	_, secret := addWebhook(t, srv.URL(), recv.URL)
	var err error
	if recv.verify, err = standardwebhooks.NewWebhook(secret); err != nil {
		t.Fatal(err)
	}
	rc := goredis.NewClient(&goredis.Options{Addr: srv.Addr()})
	t.Cleanup(func() { rc.Close() })
	return recv, rc
}

// webhookGateway is a gateway on redisURL without auth, delivering to
// receivers on loopback with short retries.
func webhookGateway(t testing.TB, redisURL string, args ...string) *gateway {
	t.Helper()
	return startGateway(t, nil, append([]string{"--redis-url", redisURL, "--insecure-no-auth",
		"--webhook-allow-private", "--webhook-backoff", "50ms", "--webhook-timeout", "1s"}, args...)...)
}

// emitEvents writes n outbox entries spread over the shards, as creates
// do, and returns their webhook-ids.
func emitEvents(t *testing.T, rc *goredis.Client, from, n int) []string {
	t.Helper()
	ids := make([]string, n)
	for i := range n {
		shard := (from + i) % 16
		sid, err := rc.XAdd(context.Background(), &goredis.XAddArgs{
			Stream: fmt.Sprintf("plantgate:{p%02d}:events", shard),
			Values: []any{"type", "plant.created", "ts", strconv.FormatInt(time.Now().UnixMilli(), 10),
				"data", fmt.Sprintf(`{"id":%d,"name":"p%d"}`, from+i, from+i)},
		}).Result()
		if err != nil {
			t.Fatal(err)
		}
		ids[i] = fmt.Sprintf("msg_p%02d_%s", shard, sid)
	}
	return ids
}

func (r *webhookReceiver) wait(t *testing.T, logs ...*syncBuffer) {
	t.Helper()
	select {
	case <-r.all:
	case <-time.After(60 * time.Second):
		r.mu.Lock()
		defer r.mu.Unlock()
		t.Fatalf("receiver saw %d of %d events in 60s (bad: %v)\n%s", len(r.seen), r.want, r.bad, logs)
	}
}

// A gateway SIGKILLed right after a burst of events, with attempts in
// flight, and a gateway started after it under another name deliver every
// event between them: the new one makes the dead one's leased deliveries
// when their lease ends, and takes over any entries it had read but not
// acknowledged (XAUTOCLAIM; TestTakeOverDeadConsumersEntries in host/webhook
// pins that step down).
func TestWebhookGatewayKilledAfterBurst(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t, redistest.WithAppendOnly())
	const n = 300
	recv, rc := registeredReceiver(t, srv, n)
	recv.hold, recv.held = make(chan struct{}), make(chan struct{}, 1)

	first := webhookGateway(t, srv.URL(), "--webhook-consumer", "gw-first")
	ids := emitEvents(t, rc, 0, n)
	// The first gateway is killed while its first attempts are in flight,
	// so it dies holding leased deliveries and unread or unacknowledged entries.
	<-recv.held
	if err := first.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-first.done
	close(recv.hold)
	second := webhookGateway(t, srv.URL(), "--webhook-consumer", "gw-second", "--webhook-claim-idle", "500ms")
	recv.wait(t, first.stderr, second.stderr)

	recv.mu.Lock()
	defer recv.mu.Unlock()
	for i, id := range ids {
		if recv.seen[id] == 0 {
			t.Fatalf("event %s never delivered", id)
		}
		if want := fmt.Sprintf(`"data":{"id":%d,"name":"p%d"}}`, i, i); !strings.HasSuffix(recv.bodies[id], want) {
			t.Fatalf("event %s body %s", id, recv.bodies[id])
		}
	}
	dups := 0
	for _, c := range recv.seen {
		dups += c - 1
	}
	t.Logf("%d events delivered, %d duplicates (a crash may duplicate)", len(recv.seen), dups)
}

// Two gateways on one store deliver each event exactly once.
func TestWebhookTwoGatewaysDeliverOnce(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	const n = 400
	recv, rc := registeredReceiver(t, srv, n)
	a := webhookGateway(t, srv.URL(), "--webhook-consumer", "gw-a")
	b := webhookGateway(t, srv.URL(), "--webhook-consumer", "gw-b")
	ids := emitEvents(t, rc, 0, n)
	recv.wait(t, a.stderr, b.stderr)

	// Every delivery recorded delivered: no attempt is left that could
	// still arrive as a duplicate.
	deadline := time.Now().Add(30 * time.Second)
	for {
		out, _, code := runCLI(t, "", "webhook", "--redis-url", srv.URL(), "deliveries", "--limit", "1000")
		if code != 0 {
			t.Fatal(out)
		}
		if lines := strings.Split(strings.TrimSpace(out), "\n"); len(lines) == n+1 && strings.Count(out, " delivered ") == n {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("deliveries not all recorded delivered:\n%s", out)
		}
		time.Sleep(50 * time.Millisecond) // polling stored state
	}
	for _, g := range []*gateway{a, b} {
		g.cmd.Process.Signal(syscall.SIGTERM)
		if err := <-g.done; err != nil {
			t.Fatalf("gateway exit: %v\n%s", err, g.stderr)
		}
	}
	recv.mu.Lock()
	defer recv.mu.Unlock()
	for _, id := range ids {
		if c := recv.seen[id]; c != 1 {
			t.Fatalf("event %s delivered %d times", id, c)
		}
	}
	if len(recv.seen) != n || len(recv.bad) != 0 {
		t.Fatalf("receiver saw %d ids, %d bad requests", len(recv.seen), len(recv.bad))
	}
}

// The CLI lists, refuses what it must, replays and removes.
func TestWebhookCLI(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	url := srv.URL()
	// The refusal names add's own flag: add has no --webhook-allow-private.
	if _, errOut, code := runCLI(t, "", "webhook", "--redis-url", url, "add", "--url", "http://127.0.0.1:9/hook"); code != 1 || errOut != `plantgate: webhook url "http://127.0.0.1:9/hook": address not allowed for webhooks (loopback, private, link-local or metadata); register it with --allow-private (gateways deliver there only with serve --webhook-allow-private)`+"\n" {
		t.Fatalf("add loopback without --allow-private: %d %q", code, errOut)
	}
	if _, errOut, code := runCLI(t, "", "webhook", "--redis-url", url, "add", "--url", "http://localhost:9/hook"); code != 1 || !strings.Contains(errOut, "resolves to") {
		t.Fatalf("add localhost without --allow-private: %d %q", code, errOut)
	}
	if _, errOut, code := runCLI(t, "", "webhook", "--redis-url", url, "add", "--url", "http://127.0.0.1:9/", "--allow-private", "--event", "plant.updated"); code != 1 || !strings.Contains(errOut, `unknown event "plant.updated"`) {
		t.Fatalf("unknown event: %d %q", code, errOut)
	}
	id, secret := addWebhook(t, url, "http://127.0.0.1:9/hook")
	out, _, code := runCLI(t, "", "webhook", "--redis-url", url, "list")
	if code != 0 || !strings.Contains(out, id+"  http://127.0.0.1:9/hook  plant.created plant.deleted  active") || strings.Contains(out, secret) {
		t.Fatalf("list: %d\n%s", code, out)
	}
	if _, errOut, code := runCLI(t, "", "webhook", "--redis-url", url, "replay", "msg_p00_1-0_"+id); code != 1 || !strings.Contains(errOut, "no such delivery") {
		t.Fatalf("replay unknown: %d %q", code, errOut)
	}
	if out, _, code := runCLI(t, "", "webhook", "--redis-url", url, "remove", id); code != 0 || out != "removed "+id+"\n" {
		t.Fatalf("remove: %d %q", code, out)
	}
	if _, errOut, code := runCLI(t, "", "webhook", "--redis-url", url, "remove", id); code != 1 || !strings.Contains(errOut, "no endpoint") {
		t.Fatalf("remove again: %d %q", code, errOut)
	}
	out, _, _ = runCLI(t, "", "webhook", "--redis-url", url, "list")
	if lines := strings.Split(strings.TrimSpace(out), "\n"); !slices.Equal(lines, []string{"ID  URL  EVENTS  STATE  CREATED"}) {
		t.Fatalf("list after remove:\n%s", out)
	}
}

// The start-up line names the consumer the gateway reads the outbox as,
// the default (hostname-pid) included: an operator giving each gateway of a
// fleet its own name checks it there.
func TestWebhookConsumerLogged(t *testing.T) {
	t.Parallel()
	var logs syncBuffer
	startMain(t, pluginsDir(t, "10-bearer-auth.wasm"), &logs)
	host, err := os.Hostname()
	if err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf(`msg="delivering webhooks" consumer=%s-%d allow_private=false`, host, os.Getpid())
	if !strings.Contains(logs.String(), want) {
		t.Fatalf("logs lack %q:\n%s", want, logs.String())
	}
}
