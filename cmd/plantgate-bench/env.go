package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// env is what a run starts: redis-server, the gateway (twice: the plugins
// as given, and the same plugins with limits.interrupt off) and the echo
// ceiling.
type env struct {
	dir       string
	token     string
	redis     *proc
	gateway   *proc // the plugins directory as given
	trusted   *proc // the same plugins with limits.interrupt off; nil in a soak
	echo      *proc
	coldStart time.Duration // the gateway's start, compilation cache warm, to /readyz 200
	gwLog     *os.File      // the gateway's stderr
	trLog     *os.File      // the trusted gateway's stderr
	limited   *proc         // the plugins plus plugins/rate-limit; nil unless -rate-limit
	lmLog     *os.File      // its stderr
	bare      *proc         // no plugins at all (--insecure-no-auth): the store path alone; nil in a soak
	bareLog   *os.File      // its stderr
	fiberPeer *proc         // the hand-written Fiber + go-redis peer (peerfiber.go); nil in a soak
	nginxPeer *proc         // the nginx + Lua peer (peernginx.go); nil in a soak or with -nginx ""
	oidc      *proc         // the plugins, also accepting idp's access tokens (oidc.go); nil in a soak
	oidcLog   *os.File      // its stderr
	idp       *benchIdP     // the identity provider the oidc gateway trusts, in this process
}

// proc is a child process listening on addr (and, for a gateway, with its
// admin listener on admin).
type proc struct {
	cmd      *exec.Cmd
	addr     string
	admin    string
	children []int // processes whose CPU counts as this one's (nginx's workers)
}

func (p *proc) pid() int { return p.cmd.Process.Pid }

// cpuTicks is the CPU time of the process and its counted children.
func (p *proc) cpuTicks() (int64, error) {
	sum, err := cpuTicks(p.pid())
	for _, c := range p.children {
		n, cerr := cpuTicks(c)
		if cerr != nil {
			return 0, fmt.Errorf("worker %d of %d: %w", c, p.pid(), cerr)
		}
		sum += n
	}
	return sum, err
}

// stop sends SIGTERM and waits, then kills after 10s.
func (p *proc) stop() {
	if p == nil || p.cmd.Process == nil {
		return
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan struct{})
	go func() { _ = p.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		_ = p.cmd.Process.Kill()
		<-done
	}
}

func (e *env) close() {
	e.gateway.stop()
	e.trusted.stop()
	e.limited.stop()
	e.bare.stop()
	e.echo.stop()
	e.fiberPeer.stop()
	e.nginxPeer.stop()
	e.oidc.stop()
	e.idp.close()
	e.redis.stop()
	for _, f := range []*os.File{e.gwLog, e.trLog, e.lmLog, e.bareLog, e.oidcLog} {
		if f != nil {
			_ = f.Close()
		}
	}
	_ = os.RemoveAll(e.dir)
}

func start(ctx context.Context, cfg config) (_ *env, err error) {
	dir, err := os.MkdirTemp("", "plantgate-bench-")
	if err != nil {
		return nil, err
	}
	e := &env{dir: dir}
	defer func() {
		if err != nil {
			e.close()
		}
	}()
	b := make([]byte, 24)
	_, _ = rand.Read(b)
	e.token = hex.EncodeToString(b)

	port, err := freePort()
	if err != nil {
		return nil, err
	}
	e.redis = &proc{addr: "127.0.0.1:" + port}
	e.redis.cmd = exec.CommandContext(ctx, cfg.redisServer, "--bind", "127.0.0.1", "--port", port, "--dir", dir,
		"--save", "", "--appendonly", "yes", "--appendfsync", "everysec", "--daemonize", "no", "--logfile", filepath.Join(dir, "redis.log"))
	if err := e.redis.cmd.Start(); err != nil {
		return nil, fmt.Errorf("start redis-server: %w", err)
	}
	if err := waitTCP(ctx, e.redis.addr, 10*time.Second); err != nil {
		return nil, fmt.Errorf("redis-server: %w", err)
	}

	// The report gives the second start's time to ready: the cold start
	// with a warm compilation cache.
	cacheDir := filepath.Join(dir, "cache")
	if e.gateway, e.gwLog, e.coldStart, err = startWarm(ctx, cfg, e, cfg.plugins, cacheDir, "", "gateway", 30*time.Second); err != nil {
		return nil, err
	}
	if cfg.soak == 0 {
		trusted, err := trustedPlugins(cfg.plugins, filepath.Join(dir, "plugins-trusted"))
		if err != nil {
			return nil, err
		}
		// Warm as well: its modules are not loop-guarded, so they are not
		// in the cache yet.
		if e.trusted, e.trLog, _, err = startWarm(ctx, cfg, e, trusted, cacheDir, "trusted", "gateway, interrupt off", 60*time.Second); err != nil {
			return nil, err
		}
		if cfg.rateLimit != "" {
			if err := startLimited(ctx, cfg, e, cacheDir); err != nil {
				return nil, err
			}
		}
		if e.bare, e.bareLog, err = startReady(ctx, cfg, e, "", cacheDir, "bare", "gateway without plugins", 30*time.Second); err != nil {
			return nil, err
		}
		if err := startOIDC(ctx, cfg, e, cacheDir); err != nil {
			return nil, err
		}
	}

	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	if port, err = freePort(); err != nil {
		return nil, err
	}
	e.echo = &proc{addr: "127.0.0.1:" + port}
	e.echo.cmd = exec.CommandContext(ctx, self, "echo", "-listen", e.echo.addr)
	e.echo.cmd.Stderr = os.Stderr
	if err := e.echo.cmd.Start(); err != nil {
		return nil, fmt.Errorf("start echo: %w", err)
	}
	if err := waitReady(ctx, "http://"+e.echo.addr+"/healthz", 10*time.Second); err != nil {
		return nil, fmt.Errorf("echo: %w", err)
	}
	if cfg.soak == 0 {
		if err := startPeers(ctx, cfg, e, self); err != nil {
			return nil, err
		}
		for _, p := range []*proc{e.gateway, e.fiberPeer, e.nginxPeer} {
			if p == nil {
				continue
			}
			if err := seedPlant(ctx, e, p); err != nil {
				return nil, err
			}
		}
	}
	return e, nil
}

// trustedPlugins copies the plugins directory src to dst with
// "limits": {"interrupt": false} added to every plugin's sidecar (made
// when there is none; its other keys kept).
func trustedPlugins(src, dst string) (string, error) {
	if err := os.MkdirAll(dst, 0o755); err != nil {
		return "", err
	}
	wasms, err := filepath.Glob(filepath.Join(src, "*.wasm"))
	if err != nil {
		return "", err
	}
	for _, w := range wasms {
		bin, err := os.ReadFile(w)
		if err != nil {
			return "", err
		}
		if err := os.WriteFile(filepath.Join(dst, filepath.Base(w)), bin, 0o644); err != nil {
			return "", err
		}
		side := strings.TrimSuffix(w, ".wasm") + ".json"
		sc := map[string]json.RawMessage{}
		if b, err := os.ReadFile(side); err == nil {
			if err := json.Unmarshal(b, &sc); err != nil {
				return "", fmt.Errorf("%s: %w", side, err)
			}
		} else if !errors.Is(err, os.ErrNotExist) {
			return "", err
		}
		limits := map[string]json.RawMessage{}
		if raw, ok := sc["limits"]; ok {
			if err := json.Unmarshal(raw, &limits); err != nil {
				return "", fmt.Errorf("%s: limits: %w", side, err)
			}
		}
		limits["interrupt"] = json.RawMessage("false")
		sc["limits"], _ = json.Marshal(limits)
		out, _ := json.Marshal(sc)
		if err := os.WriteFile(filepath.Join(dst, filepath.Base(side)), out, 0o644); err != nil {
			return "", err
		}
	}
	return dst, nil
}

// startWarm starts a gateway twice and keeps the second: the first start
// fills the compilation cache, so the second's peak RSS, which the report
// gives, excludes compiling. It returns the second start's time to ready.
func startWarm(ctx context.Context, cfg config, e *env, plugins, cacheDir, name, what string, timeout time.Duration) (*proc, *os.File, time.Duration, error) {
	p, logf, err := startReady(ctx, cfg, e, plugins, cacheDir, name+"0", what, timeout)
	if err != nil {
		return nil, nil, 0, err
	}
	p.stop()
	_ = logf.Close()
	t0 := time.Now()
	p, logf, err = startReady(ctx, cfg, e, plugins, cacheDir, name+"1", what, timeout)
	return p, logf, time.Since(t0), err
}

// startReady starts a gateway and waits for its /readyz; what names it in
// an error. A gateway that is not ready in time is stopped.
func startReady(ctx context.Context, cfg config, e *env, plugins, cacheDir, name, what string, timeout time.Duration, extra ...string) (*proc, *os.File, error) {
	p, logf, err := startGateway(ctx, cfg, e, plugins, cacheDir, name, extra...)
	if err != nil {
		return nil, nil, err
	}
	if err := waitReady(ctx, "http://"+p.addr+"/readyz", timeout); err != nil {
		p.stop()
		_ = logf.Close()
		return nil, nil, fmt.Errorf("%s (log in %s): %w", what, logf.Name(), err)
	}
	return p, logf, nil
}

func startGateway(ctx context.Context, cfg config, e *env, plugins, cacheDir, name string, extra ...string) (*proc, *os.File, error) {
	port, err := freePort()
	if err != nil {
		return nil, nil, err
	}
	adminPort, err := freePort()
	if err != nil {
		return nil, nil, err
	}
	p := &proc{addr: "127.0.0.1:" + port, admin: "127.0.0.1:" + adminPort}
	logf, err := os.Create(filepath.Join(e.dir, "gateway-"+name+".log"))
	if err != nil {
		return nil, nil, err
	}
	args := []string{"serve",
		"--listen", p.addr,
		"--redis-url", "redis://" + e.redis.addr,
		"--cache-dir", cacheDir,
		"--access-log=" + strconv.FormatBool(cfg.accessLog),
		"--log-format", "json",
		// Its /metrics gives the allocations per request; idle otherwise.
		"--admin-listen", p.admin,
	}
	if plugins != "" {
		args = append(args, "--plugins", plugins)
	} else {
		args = append(args, "--insecure-no-auth")
	}
	if cfg.profile != "" {
		args = append(args, "--pprof")
	}
	if cfg.soak > 0 {
		args = append(args, "--stats-interval", cfg.interval.String())
	}
	args = append(args, extra...)
	p.cmd = exec.CommandContext(ctx, cfg.gateway, args...)
	p.cmd.Env = append(os.Environ(), "PLANTGATE_BOOTSTRAP_TOKEN="+e.token)
	p.cmd.Stderr = logf
	if err := p.cmd.Start(); err != nil {
		_ = logf.Close()
		return nil, nil, fmt.Errorf("start gateway: %w", err)
	}
	return p, logf, nil
}

// seedPlantID is the plant the read loads get; the create loads' ids start
// far above it.
const seedPlantID = 7

// startPeers starts the hand-written peers: the Fiber one (this binary's
// hidden peer-fiber subcommand) and, unless -nginx is "", the nginx one.
func startPeers(ctx context.Context, cfg config, e *env, self string) error {
	port, err := freePort()
	if err != nil {
		return err
	}
	e.fiberPeer = &proc{addr: "127.0.0.1:" + port}
	e.fiberPeer.cmd = exec.CommandContext(ctx, self, "peer-fiber", "-listen", e.fiberPeer.addr, "-redis", e.redis.addr)
	e.fiberPeer.cmd.Env = append(os.Environ(), "PEER_TOKEN="+e.token)
	e.fiberPeer.cmd.Stderr = os.Stderr
	if err := e.fiberPeer.cmd.Start(); err != nil {
		return fmt.Errorf("start the Fiber peer: %w", err)
	}
	if err := waitReady(ctx, "http://"+e.fiberPeer.addr+"/healthz", 10*time.Second); err != nil {
		return fmt.Errorf("the Fiber peer: %w", err)
	}
	if cfg.nginx == "" {
		return nil
	}
	e.nginxPeer, err = startNginxPeer(ctx, cfg.nginx, e.dir, e.redis.addr, e.token)
	return err
}

// seedPlant creates the plant the read loads get, through target.
func seedPlant(ctx context.Context, e *env, target *proc) error {
	body := strings.NewReader(fmt.Sprintf(`{"id":%d,"name":"Monstera deliciosa","tag":"tropical"}`, seedPlantID))
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+target.addr+"/plants", body)
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+e.token)
	resp, err := (&http.Client{Timeout: 10 * time.Second}).Do(req)
	if err != nil {
		return fmt.Errorf("seed plant: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return fmt.Errorf("seed plant: %d %s", resp.StatusCode, b)
	}
	return nil
}

func freePort() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	_, port, err := net.SplitHostPort(ln.Addr().String())
	return port, err
}

func waitTCP(ctx context.Context, addr string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			return c.Close()
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("not listening on %s: %w", addr, err)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func waitReady(ctx context.Context, url string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	client := &http.Client{Timeout: time.Second}
	for {
		resp, err := client.Get(url)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			err = fmt.Errorf("%s answered %d", url, resp.StatusCode)
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return errors.Join(errors.New("not ready"), err)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

func lookPath(bin string) (string, error) { return exec.LookPath(bin) }
