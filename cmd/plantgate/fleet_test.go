package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/plantgate/plantgate/host/redis/redistest"
)

// Fleet tests: several `plantgate serve` processes on one real 3-primary
// Redis Cluster (redistest), as an operator runs them.

// fleetCluster is shared by the fleet tests that stop no node; TestMain
// closes it.
var fleetCluster = redistest.NewShared(redistest.ClusterOptions{})

const fleetToken = "fleet-bootstrap-token-0123456789"

// fleetGateway starts a gateway with the bundled auth and rules plugins on
// redisURL, with the fleet's bootstrap token.
func fleetGateway(t *testing.T, redisURL string, args ...string) *gateway {
	t.Helper()
	return startGateway(t, []string{"PLANTGATE_BOOTSTRAP_TOKEN=" + fleetToken},
		append([]string{"--redis-url", redisURL, "--plugins", pluginsDir(t, "10-bearer-auth.wasm", "20-plant-rules.wasm")}, args...)...)
}

var nextLink = regexp.MustCompile(`<([^>]+)>; rel="next"`)

// listAll walks GET /plants page by page (limit per page) and returns the ids.
func listAll(t *testing.T, base, token string, limit int) []int64 {
	t.Helper()
	var ids []int64
	url := fmt.Sprintf("%s/plants?limit=%d", base, limit)
	for url != "" {
		status, body, h := call(t, "GET", url, token)
		if status != 200 {
			t.Fatalf("GET %s: %d %s", url, status, body)
		}
		var page []struct{ ID int64 }
		if err := json.Unmarshal([]byte(body), &page); err != nil {
			t.Fatalf("GET %s: %v: %s", url, err, body)
		}
		for _, p := range page {
			ids = append(ids, p.ID)
		}
		url = ""
		if m := nextLink.FindStringSubmatch(h.Get("Link")); m != nil {
			url = base + m[1]
		}
	}
	return ids
}

// TestFleetSharesOneCluster: a plant created through one gateway is read,
// listed and deleted through the others at once; one gateway is given a
// single node's address and finds the cluster itself.
func TestFleetSharesOneCluster(t *testing.T) {
	t.Parallel()
	c := fleetCluster.Get(t)
	a := fleetGateway(t, c.URL())
	b := fleetGateway(t, "redis://"+c.Nodes[1].Addr())
	for g, want := range map[*gateway]string{a: `mode=cluster addr=`, b: `mode="cluster (detected: the single address given is a cluster node)"`} {
		if !strings.Contains(g.stderr.String(), want) {
			t.Fatalf("start-up log lacks %q:\n%s", want, g.stderr)
		}
	}
	const n = 60
	for i := range int64(n) {
		id := (i + 1) * 1_000_003
		status, created := post(t, a.base, fleetToken, fmt.Sprintf(`{"id":%d,"name":"Fern %d"}`, id, i))
		if status != 200 {
			t.Fatalf("create %d on a: %d %s", id, status, created)
		}
		want := fmt.Sprintf(`{"id":%d,"name":"Fern %d"}`, id, i)
		if status, got, _ := call(t, "GET", fmt.Sprintf("%s/plants/%d", b.base, id), fleetToken); status != 200 || got != want {
			t.Fatalf("GET %d on b: %d %s; want 200 %s", id, status, got, want)
		}
	}
	// Other tests share the cluster (and the key prefix): the list holds
	// their plants too, all in id order, ours among them.
	var got []int64
	all := listAll(t, b.base, fleetToken, 7)
	for i, id := range all {
		if i > 0 && id <= all[i-1] {
			t.Fatalf("list on b: %d after %d: not in id order", id, all[i-1])
		}
		if id%1_000_003 == 0 && id/1_000_003 <= n {
			got = append(got, id)
		}
	}
	if len(got) != n {
		t.Fatalf("list on b: %d of the %d plants", len(got), n)
	}
	for i := range int64(n) {
		id := (i + 1) * 1_000_003
		if status, body, _ := call(t, "DELETE", fmt.Sprintf("%s/plants/%d", b.base, id), fleetToken); status != 204 {
			t.Fatalf("DELETE %d on b: %d %s", id, status, body)
		}
		if status, body, _ := call(t, "GET", fmt.Sprintf("%s/plants/%d", a.base, id), fleetToken); status != 404 ||
			body != fmt.Sprintf(`{"error":40402,"message":"no plant with id %d"}`, id) {
			t.Fatalf("GET %d on a after delete: %d %s", id, status, body)
		}
	}
}

// TestFleetRevocation: a token revoked with the CLI is refused by every
// gateway once --token-cache-ttl has passed since the revocation.
func TestFleetRevocation(t *testing.T) {
	t.Parallel()
	c := fleetCluster.Get(t)
	const ttl = 500 * time.Millisecond
	var gws []*gateway
	for range 3 {
		gws = append(gws, fleetGateway(t, c.URL(), "--token-cache-ttl", ttl.String()))
	}
	out, errOut, code := runCLI(t, "", "token", "--redis-url", c.URL(), "create", "--name", "fleet-revoke", "--scope", "plants:read")
	if code != 0 {
		t.Fatalf("token create: %d %s", code, errOut)
	}
	token := strings.TrimSpace(out)
	for i, g := range gws { // every gateway caches the token as valid
		if status, body, _ := call(t, "GET", g.base+"/plants/1", token); status != 404 {
			t.Fatalf("gateway %d before revoke: %d %s", i, status, body)
		}
	}
	if _, errOut, code := runCLI(t, "", "token", "--redis-url", c.URL(), "revoke", "--name", "fleet-revoke"); code != 0 {
		t.Fatalf("token revoke: %d %s", code, errOut)
	}
	// Waiting out the TTL is the promise under test, not an ordering.
	time.Sleep(ttl)
	for i, g := range gws {
		if status, body, _ := call(t, "GET", g.base+"/plants/1", token); status != 401 {
			t.Fatalf("gateway %d a TTL after revoke: %d %s; want 401", i, status, body)
		}
	}
}

// TestFleetWebhookOnce: creates through three gateways on the cluster, each
// event delivered exactly once across them.
func TestFleetWebhookOnce(t *testing.T) {
	t.Parallel()
	c := fleetCluster.Get(t)
	const n = 150
	recv := newWebhookReceiver(t, n)
	_, secret := addWebhook(t, c.URL(), recv.URL)
	var err error
	if recv.verify, err = standardwebhooks.NewWebhook(secret); err != nil {
		t.Fatal(err)
	}
	var gws []*gateway
	for i := range 3 {
		gws = append(gws, fleetGateway(t, c.URL(), "--webhook-allow-private", "--webhook-backoff", "50ms",
			"--webhook-consumer", fmt.Sprint("gw-", i)))
	}
	// Ids far from those of the other tests on the shared cluster.
	for i := range n {
		id := 90_000_000_000 + i
		if status, body := post(t, gws[i%3].base, fleetToken, fmt.Sprintf(`{"id":%d,"name":"Hook %d"}`, id, i)); status != 200 {
			t.Fatalf("create %d: %d %s", id, status, body)
		}
	}
	recv.wait(t, gws[0].stderr, gws[1].stderr, gws[2].stderr)
	// Every delivery recorded delivered: no attempt is left that could
	// still arrive as a duplicate.
	eventually(t, func() bool {
		out, _, code := runCLI(t, "", "webhook", "--redis-url", c.URL(), "deliveries", "--limit", "1000")
		return code == 0 && strings.Count(out, " delivered ") == n
	})
	for _, g := range gws {
		g.stop(t)
	}
	recv.mu.Lock()
	defer recv.mu.Unlock()
	if len(recv.seen) != n || len(recv.bad) != 0 {
		t.Fatalf("receiver saw %d events (want %d), %d bad requests", len(recv.seen), n, len(recv.bad))
	}
	for id, k := range recv.seen {
		if k != 1 {
			t.Fatalf("event %s delivered %d times", id, k)
		}
	}
}

// eventually polls cond (state held by other processes) for up to a minute.
func eventually(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within a minute")
		}
		time.Sleep(20 * time.Millisecond) // polling another process's state
	}
}

// load posts creates through the gateways from 8 clients until stop is
// called, and tallies the answers: the ids acknowledged (200), the 503s by
// code (each must carry Retry-After), and anything else.
type load struct {
	mu       sync.Mutex
	acked    []int64
	refused  map[int32]int
	other    []string
	n        atomic.Int64
	stopping chan struct{}
	wg       sync.WaitGroup
}

func startLoad(t *testing.T, gws []*gateway, requestTimeout time.Duration) *load {
	l := &load{refused: map[int32]int{}, stopping: make(chan struct{})}
	// Far beyond the request deadline: a gateway that hangs past it shows
	// up as a client timeout, counted as "other".
	client := &http.Client{Timeout: 4 * requestTimeout}
	var next atomic.Int64
	for w := range 8 {
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			for {
				select {
				case <-l.stopping:
					return
				default:
				}
				id := 9_000_000 + next.Add(1)
				req, _ := http.NewRequest("POST", gws[w%len(gws)].base+"/plants", strings.NewReader(fmt.Sprintf(`{"id":%d,"name":"Load"}`, id)))
				req.Header.Set("Content-Type", "application/json")
				resp, err := client.Do(req)
				if err != nil {
					l.mu.Lock()
					l.other = append(l.other, err.Error())
					l.mu.Unlock()
					continue
				}
				var e struct{ Error int32 }
				_ = json.NewDecoder(resp.Body).Decode(&e)
				resp.Body.Close()
				l.mu.Lock()
				switch {
				case resp.StatusCode == 200:
					l.acked = append(l.acked, id)
				case resp.StatusCode == 503 && resp.Header.Get("Retry-After") == "1":
					l.refused[e.Error]++
				default:
					l.other = append(l.other, fmt.Sprintf("%d %d", resp.StatusCode, e.Error))
				}
				l.mu.Unlock()
				l.n.Add(1)
			}
		}()
	}
	return l
}

func (l *load) counts() (acked, refused int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, k := range l.refused {
		refused += k
	}
	return len(l.acked), refused
}

func (l *load) stop() {
	close(l.stopping)
	l.wg.Wait()
}

// checkAcked fails unless every acknowledged create is readable through g.
func (l *load) checkAcked(t *testing.T, g *gateway) {
	t.Helper()
	for _, id := range l.acked {
		if status, body, _ := call(t, "GET", fmt.Sprintf("%s/plants/%d", g.base, id), ""); status != 200 {
			t.Fatalf("acknowledged plant %d: %d %s", id, status, body)
		}
	}
}

// TestFleetPrimaryStoppedUnderLoad: two gateways under create load while a
// primary stops and comes back: the creates on its shards answer 503 with
// Retry-After (never hang past the deadline), the others go on, and the
// gateways serve every shard again without a restart, with every
// acknowledged create readable.
func TestFleetPrimaryStoppedUnderLoad(t *testing.T) {
	t.Parallel()
	c := redistest.StartCluster(t, redistest.ClusterOptions{AppendOnly: true, NodeTimeout: 5 * time.Second})
	const deadline = 2 * time.Second
	var gws []*gateway
	for range 2 {
		gws = append(gws, startGateway(t, nil, "--redis-url", c.URL(), "--insecure-no-auth", "--request-timeout", deadline.String()))
	}
	victim := c.Primaries(t)[1]
	l := startLoad(t, gws, deadline)
	eventually(t, func() bool { a, _ := l.counts(); return a >= 300 })

	victim.Stop()
	stopped := time.Now()
	_, r0 := l.counts()
	a0, _ := l.counts()
	eventually(t, func() bool { a, r := l.counts(); return r >= r0+50 && a >= a0+300 })
	victim.Restart(t) // returns once it answers PING
	back := time.Now()
	// A list reads every shard: once it answers, every primary is served.
	eventually(t, func() bool { s, _, _ := call(t, "GET", gws[0].base+"/plants?limit=1", ""); return s == 200 })
	eventually(t, func() bool { s, _, _ := call(t, "GET", gws[1].base+"/plants?limit=1", ""); return s == 200 })
	recovered := time.Now()
	c.WaitHealthy(t)
	l.stop()

	if len(l.other) > 0 {
		t.Fatalf("%d answers neither 200 nor 503+Retry-After, e.g. %s", len(l.other), l.other[0])
	}
	for code := range l.refused {
		if code != 50301 {
			t.Fatalf("503 with code %d, want 50301: %v", code, l.refused)
		}
	}
	l.checkAcked(t, gws[1])
	t.Logf("%d creates acknowledged, %d refused (%v); down %v; served again %v after the primary answered",
		len(l.acked), l.refused[50301], l.refused, back.Sub(stopped).Round(time.Millisecond), recovered.Sub(back).Round(time.Millisecond))
}

// TestFleetFailoverWaitReplicas: gateways with --redis-wait-replicas 1
// under create load while a primary is killed and its replica takes over:
// every acknowledged create is there afterwards; the refusals meanwhile
// are 50301 (primary down) or 50304 (no replica to confirm).
func TestFleetFailoverWaitReplicas(t *testing.T) {
	t.Parallel()
	c := redistest.StartCluster(t, redistest.ClusterOptions{Replicas: 1, AppendOnly: true})
	const deadline = 2 * time.Second
	var gws []*gateway
	for range 2 {
		gws = append(gws, startGateway(t, nil, "--redis-url", c.URL(), "--insecure-no-auth",
			"--request-timeout", deadline.String(), "--redis-wait-replicas", "1"))
	}
	victim := c.Primaries(t)[0]
	replica := c.ReplicasOf(t, victim)[0]
	l := startLoad(t, gws, deadline)
	eventually(t, func() bool { a, _ := l.counts(); return a >= 300 })

	victim.Kill()
	c.AwaitPrimary(t, replica)
	victim.Restart(t) // back as the new primary's replica
	c.WaitHealthy(t)
	a0, _ := l.counts()
	eventually(t, func() bool { a, _ := l.counts(); return a >= a0+300 })
	eventually(t, func() bool { s, _, _ := call(t, "GET", gws[0].base+"/plants?limit=1", ""); return s == 200 })
	l.stop()

	if len(l.other) > 0 {
		t.Fatalf("%d answers neither 200 nor 503+Retry-After, e.g. %s", len(l.other), l.other[0])
	}
	for code := range l.refused {
		if code != 50301 && code != 50304 {
			t.Fatalf("503 with code %d: %v", code, l.refused)
		}
	}
	l.checkAcked(t, gws[1])
	t.Logf("%d creates acknowledged, refused: %v", len(l.acked), l.refused)
}
