package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"time"

	"github.com/plantgate/plantgate/host/buildinfo"
	"github.com/plantgate/plantgate/host/console"
	"github.com/plantgate/plantgate/host/fleet"
)

// adminServer serves the console at /, /metrics, /healthz and /readyz (with
// the build) (and with --pprof /debug/pprof/) on --admin-listen,
// apart from the public listener: metrics name plugins and routes, and
// are for the operator's scraper only.
type adminServer struct {
	srv  *http.Server
	addr net.Addr
}

func (m *Main) serveAdmin() (*adminServer, error) {
	mux := http.NewServeMux()
	mux.Handle("/", m.console())
	mux.Handle("GET /metrics", m.metrics.Handler())
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"status":"ok"}`))
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
		defer cancel()
		w.Header().Set("Content-Type", "application/json")
		err := m.ready(ctx)
		if err == nil {
			err = m.observed.Ping(ctx)
		}
		status := "ready"
		if err != nil {
			status = "not ready"
			w.WriteHeader(http.StatusServiceUnavailable)
		}
		// Which build answers: for the operator comparing gateways after a
		// rollout. Not on the public /readyz, which tells the internet
		// nothing about the release.
		bi := buildinfo.Get()
		// The identity provider's state does not make the gateway unready:
		// its own tokens work, and a provider down at start is the case
		// the detail is for (docs/identity-providers.md).
		body, _ := json.Marshal(struct {
			Status   string `json:"status"`
			Version  string `json:"version"`
			Revision string `json:"revision"`
			OIDC     string `json:"oidc,omitempty"`
		}{status, bi.Version, bi.Revision, m.oidcStatus()})
		_, _ = w.Write(body)
	})
	if m.Pprof {
		// Profiles show no request data, but they cost CPU on demand and
		// name internals: admin listener only, and only when asked for.
		mux.HandleFunc("GET /debug/pprof/", pprof.Index)
		// No cmdline: argv may hold the bootstrap token or a Redis
		// password. Said explicitly, since Index would serve any name.
		mux.HandleFunc("GET /debug/pprof/cmdline", http.NotFound)
		mux.HandleFunc("GET /debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("GET /debug/pprof/symbol", pprof.Symbol)
		mux.HandleFunc("GET /debug/pprof/trace", pprof.Trace)
	}
	ln, err := net.Listen("tcp", m.AdminListen)
	if err != nil {
		return nil, errors.New("admin listener: " + err.Error())
	}
	a := &adminServer{
		srv:  &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second, WriteTimeout: 30 * time.Second},
		addr: ln.Addr(),
	}
	go func() { m.listenerStopped("admin", ln.Addr(), a.srv.Serve(ln)) }()
	return a, nil
}

// console reads the gateway's registry and, with a plugins directory, its
// reloader.
func (m *Main) console() *console.Console {
	cfg := console.Config{Gatherer: m.metrics.Registry(), Diffs: m.store.ShadowDiffs}
	if m.reloader != nil {
		cfg.Chain = m.reloader.Snapshot
	}
	if m.member != nil {
		cfg.Fleet, cfg.Self = (&fleet.Reader{Store: m.store}).Read, m.member.ID()
	}
	return console.New(cfg)
}

// AdminAddr is the admin listener's address, once Run has returned; nil
// without --admin-listen.
func (m *Main) AdminAddr() net.Addr {
	if m.admin == nil {
		return nil
	}
	return m.admin.addr
}

// listenerStopped reports a listener's Serve returning while the gateway
// is not stopping: it no longer accepts, whatever the error (fasthttp
// returns nil when its listener is closed under it).
func (m *Main) listenerStopped(which string, addr net.Addr, err error) {
	if m.stopping.Load() {
		return
	}
	if err == nil {
		err = errors.New("stopped accepting connections")
	}
	m.failed <- fmt.Errorf("%s listener on %s stopped: %w", which, addr, err)
}

// Failed receives an error when a listener stops by itself, the gateway
// not stopping: the process should then exit rather than serve half.
func (m *Main) Failed() <-chan error { return m.failed }

// serveUntil reloads the plugin chain on each SIGHUP until ctx is done
// (nil) or a listener stops by itself (its error).
func serveUntil(ctx context.Context, m *Main, hup <-chan os.Signal) error {
	for {
		select {
		case <-ctx.Done():
			return nil
		case err := <-m.Failed():
			return err
		case <-hup:
			m.Logger.Info("SIGHUP: reloading the plugin chain")
			_ = m.Reload(ctx) // a refusal is logged by the reloader
		}
	}
}
