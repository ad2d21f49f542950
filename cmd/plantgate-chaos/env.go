package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/plantgate/plantgate/host/redis/redistest"
)

// nodeTimeout is the cluster's cluster-node-timeout: a pause longer than
// this fails a primary over.
const nodeTimeout = time.Second

// requestTimeout is the gateways' --request-timeout; an answer later than
// requestTimeout+answerSlack is a hang.
const (
	requestTimeout = 2 * time.Second
	answerSlack    = 3 * time.Second
)

const bootstrapToken = "chaos-bootstrap-token-0123456789abcdef"

// env is what the workload runs against.
type env struct {
	cfg      config
	redisURL string
	gws      []*gateway
	recv     *receiver
	revoked  string // a token revoked before the workload starts
	plugins  string // the gateways' plugins directory
}

// gateway is one `plantgate serve` process, restartable on its port.
type gateway struct {
	i     int
	bin   string
	base  string
	port  string
	args  []string
	log   *os.File
	mu    sync.Mutex
	cmd   *exec.Cmd
	kills atomic.Int64 // bumped on each kill: a request that spans one may hang up
	down  atomic.Bool  // from a kill until ready again: requests are refused
}

func setup(ctx context.Context, c config, cl *redistest.Cluster) (*env, error) {
	e := &env{cfg: c, redisURL: cl.URL()}
	if _, err := os.Stat(c.gateway); err != nil {
		return e, fmt.Errorf("gateway binary: %w (make build)", err)
	}
	// The revoked token: created and revoked through the CLI, as an
	// operator would.
	out, err := e.cli(ctx, "token", "--redis-url", e.redisURL, "create", "--name", "chaos-revoked", "--scope", "plants:read")
	if err != nil {
		return e, err
	}
	e.revoked = strings.TrimSpace(out)
	if _, err := e.cli(ctx, "token", "--redis-url", e.redisURL, "revoke", "--name", "chaos-revoked"); err != nil {
		return e, err
	}
	e.recv = newReceiver()
	out, err = e.cli(ctx, "webhook", "--redis-url", e.redisURL, "add", "--url", e.recv.url, "--allow-private")
	if err != nil {
		return e, err
	}
	m := regexp.MustCompile(`secret: (whsec_\S+)`).FindStringSubmatch(out)
	if m == nil {
		return e, fmt.Errorf("webhook add printed no secret: %q", out)
	}
	if e.recv.verify, err = standardwebhooks.NewWebhook(m[1]); err != nil {
		return e, err
	}
	if err := os.MkdirAll(filepath.Join(c.out, "gateways"), 0o755); err != nil {
		return e, err
	}
	if e.plugins, err = pluginsWithDeadline(c); err != nil {
		return e, err
	}
	for i := range c.gateways {
		g, err := e.newGateway(i)
		if err != nil {
			return e, err
		}
		e.gws = append(e.gws, g)
		if err := g.start(ctx); err != nil {
			return e, err
		}
	}
	return e, nil
}

// pluginDeadline is the harness's plugin call deadline (timeout_ms). The
// default, 100 ms, includes bearer-auth's token lookup in the store: on a
// loaded 2-core machine a gateway just restarted ran past it and answered
// 500 50001 (as documented for a plugin timeout), which says more about the
// machine than about the store under faults that this harness checks.
const pluginDeadline = "1000"

// pluginsWithDeadline copies the bundled chain into the run's directory,
// each plugin with a sidecar that sets its deadline to pluginDeadline.
func pluginsWithDeadline(c config) (string, error) {
	dir := filepath.Join(c.out, "plugins")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	for _, name := range []string{"10-bearer-auth", "20-plant-rules"} {
		b, err := os.ReadFile(filepath.Join(c.plugins, name+".wasm"))
		if err != nil {
			return "", fmt.Errorf("bundled plugin: %w (make build)", err)
		}
		if err := os.WriteFile(filepath.Join(dir, name+".wasm"), b, 0o644); err != nil {
			return "", err
		}
		sidecar := `{"limits": {"timeout_ms": ` + pluginDeadline + `}}`
		if err := os.WriteFile(filepath.Join(dir, name+".json"), []byte(sidecar), 0o644); err != nil {
			return "", err
		}
	}
	return dir, nil
}

func (e *env) cli(ctx context.Context, args ...string) (string, error) {
	var out, errOut bytes.Buffer
	cmd := exec.CommandContext(ctx, e.cfg.gateway, args...)
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("plantgate %s: %v: %s", strings.Join(args[:1], " "), err, errOut.String())
	}
	return out.String(), nil
}

func (e *env) newGateway(i int) (*gateway, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	_, port, _ := net.SplitHostPort(l.Addr().String())
	_ = l.Close()
	f, err := os.Create(filepath.Join(e.cfg.out, "gateways", fmt.Sprintf("gw-%d.log", i)))
	if err != nil {
		return nil, err
	}
	return &gateway{i: i, bin: e.cfg.gateway, port: port, base: "http://127.0.0.1:" + port, log: f, args: []string{
		"serve", "--listen", "127.0.0.1:" + port, "--redis-url", e.redisURL, "--plugins", e.plugins,
		"--redis-wait-replicas", "1", "--request-timeout", requestTimeout.String(),
		"--webhook-allow-private", "--webhook-backoff", "100ms", "--webhook-consumer", fmt.Sprintf("chaos-gw-%d", i),
		"--access-log=false", "--watch=false",
	}}, nil
}

// start runs the gateway and waits for /readyz.
func (g *gateway) start(ctx context.Context) error {
	cmd := exec.Command(g.bin, g.args...)
	cmd.Env = append(os.Environ(), "PLANTGATE_BOOTSTRAP_TOKEN="+bootstrapToken)
	cmd.Stdout, cmd.Stderr = g.log, g.log
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("gateway %d: %w", g.i, err)
	}
	g.mu.Lock()
	g.cmd = cmd
	g.mu.Unlock()
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		resp, err := http.Get(g.base + "/readyz")
		if err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == 200 {
				g.down.Store(false)
				return nil
			}
		}
		time.Sleep(50 * time.Millisecond) // polling another process's readiness
	}
	return fmt.Errorf("gateway %d not ready within 60s (log: %s)", g.i, g.log.Name())
}

// kill ends the gateway with SIGKILL, mid-request if a request is running.
func (g *gateway) kill() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.kills.Add(1)
	g.down.Store(true)
	if g.cmd != nil {
		_ = g.cmd.Process.Kill()
		_ = g.cmd.Wait()
		g.cmd = nil
	}
}

func (e *env) close() {
	for _, g := range e.gws {
		g.kill()
		_ = g.log.Close()
	}
	if e.recv != nil {
		e.recv.srv.Close()
	}
}

// receiver is the webhook endpoint: it verifies each delivery's signature
// and records, per plant id, the webhook-ids of its plant.created events.
type receiver struct {
	srv    *http.Server
	url    string
	verify *standardwebhooks.Webhook

	mu         sync.Mutex
	created    map[int64]map[string]string // plant id → webhook-id → name
	deliveries int
	duplicates int // deliveries of a webhook-id already seen (at least once allows them)
	seenIDs    map[string]int
	bad        []string
}

func newReceiver() *receiver {
	r := &receiver{created: map[int64]map[string]string{}, seenIDs: map[string]int{}}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fatal(err)
	}
	r.url = "http://" + l.Addr().String() + "/hook"
	r.srv = &http.Server{Handler: http.HandlerFunc(r.serve), ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = r.srv.Serve(l) }()
	return r
}

func (r *receiver) serve(w http.ResponseWriter, req *http.Request) {
	body, _ := io.ReadAll(req.Body)
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.verify == nil || r.verify.Verify(body, req.Header) != nil {
		r.bad = append(r.bad, fmt.Sprintf("unverified delivery %s: %.200s", req.Header.Get("webhook-id"), body))
		w.WriteHeader(400)
		return
	}
	var ev struct {
		Type string `json:"type"`
		Data struct {
			ID   int64  `json:"id"`
			Name string `json:"name"`
		} `json:"data"`
	}
	if err := json.Unmarshal(body, &ev); err != nil {
		r.bad = append(r.bad, fmt.Sprintf("undecodable event: %v: %.200s", err, body))
		w.WriteHeader(400)
		return
	}
	id := req.Header.Get("webhook-id")
	r.deliveries++
	r.seenIDs[id]++
	if r.seenIDs[id] > 1 {
		r.duplicates++
	}
	if ev.Type == "plant.created" {
		if r.created[ev.Data.ID] == nil {
			r.created[ev.Data.ID] = map[string]string{}
		}
		r.created[ev.Data.ID][id] = ev.Data.Name
	}
	w.WriteHeader(204)
}

// settle waits, up to within, until every plant that an acknowledged create
// made has a plant.created event.
func (r *receiver) settle(ctx context.Context, rec *recorder, within time.Duration) {
	deadline := time.Now().Add(within)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		if len(r.missing(rec)) == 0 {
			return
		}
		time.Sleep(200 * time.Millisecond) // waiting for deliveries from other processes
	}
}

// missing are the plant ids with an acknowledged create and no event.
func (r *receiver) missing(rec *recorder) []int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	var ids []int64
	for _, id := range rec.ackedCreateIDs() {
		if len(r.created[id]) == 0 {
			ids = append(ids, id)
		}
	}
	return ids
}
