package console

import (
	"context"
	"errors"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/plantgate/plantgate/host/fleet"
	"github.com/plantgate/plantgate/host/metrics"
	"github.com/plantgate/plantgate/host/redis"
)

// TestConsoleFleet: the fleet view lists each live gateway from its
// heartbeat, marks this one, and says who lags and why.
func TestConsoleFleet(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC)
	st := fleet.Status{Version: 4, Digest: "d4d4d4d4d4d4d4d4", Gateways: []fleet.Gateway{
		{Heartbeat: redis.Heartbeat{ID: "gw-a", Host: "h1", Addr: "10.0.0.1:8080", Started: at, Beat: at.Add(time.Minute), Version: 4, Digest: "d4d4d4d4d4d4d4d4", State: fleet.StateServing}, Converged: true},
		{Heartbeat: redis.Heartbeat{ID: "gw-b", Host: "h2", Addr: "10.0.0.2:8080", Started: at, Beat: at.Add(time.Minute), Version: 3, Digest: "d3d3d3d3d3d3d3d3", State: fleet.StateRefused, Refused: 4},
			Lag: "refused version 4, serves version 3: plugin 40-trap.wasm: boom"},
	}}
	var readErr error
	c := New(Config{Gatherer: metrics.New().Registry(), Self: "gw-a", Fleet: func(context.Context) (fleet.Status, error) { return st, readErr }})
	srv := httptest.NewServer(c)
	defer srv.Close()
	_, _, body := fetch(t, "GET", srv.URL+"/")
	wantIn(t, body,
		`Store chain version <strong id="fleet-version">4</strong>, digest <code>d4d4d4d4d4d4</code>:`,
		`<strong id="fleet-converged" class="bad">not converged</strong>`,
		`<tr><td>gw-a (this one)</td><td>h1</td><td>10.0.0.1:8080</td><td>2026-11-23 10:00:00 UTC</td><td>4</td><td><code>d4d4d4d4d4d4</code></td><td>2026-11-23 10:01:00 UTC</td><td>converged</td></tr>`,
		`<tr><td>gw-b</td><td>h2</td><td>10.0.0.2:8080</td><td>2026-11-23 10:00:00 UTC</td><td>3</td><td><code>d3d3d3d3d3d3</code></td><td>2026-11-23 10:01:00 UTC</td><td>refused version 4, serves version 3: plugin 40-trap.wasm: boom</td></tr>`,
	)
	readErr = errors.New("plant store unavailable")
	_, _, body = fetch(t, "GET", srv.URL+"/")
	wantIn(t, body, `<p id="fleet-error">Fleet unknown: plant store unavailable</p>`)
}
