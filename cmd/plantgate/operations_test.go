package main

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net/http"
	"regexp"
	"strings"
	"testing"

	"github.com/plantgate/plantgate/host/redis/redistest"
)

// call sends method url without a body; see send.
func call(t *testing.T, method, url, token string) (int, string, http.Header) {
	t.Helper()
	req, _ := http.NewRequest(method, url, nil)
	return send(t, req, token)
}

// TestScopesPerOperationAndFleetCursors runs two gateways on one real
// redis-server as an operator would: a token made by `plantgate token
// create --scope plants:delete` may delete but not read; the bootstrap token
// may do everything; and a list cursor from one gateway is accepted by the
// other (the signing key lives in the store).
func TestScopesPerOperationAndFleetCursors(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	const bootstrap = "bootstrap-token-for-tests-0123456789"
	var bases []string
	for range 2 {
		m := &Main{
			Listen: "127.0.0.1:0", RedisURL: srv.URL(), BootstrapToken: bootstrap, CacheDir: sharedCache,
			PluginsDir: pluginsDir(t, "10-bearer-auth.wasm", "20-plant-rules.wasm"),
			Logger:     slog.New(slog.NewTextHandler(io.Discard, nil)),
		}
		if err := m.Run(context.Background()); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { m.Close() })
		bases = append(bases, "http://"+m.Addr().String())
	}
	for _, body := range []string{`{"id":1,"name":"a"}`, `{"id":2,"name":"b"}`, `{"id":3,"name":"c"}`} {
		if status, got := post(t, bases[0], bootstrap, body); status != 200 {
			t.Fatalf("create %s: %d %s", body, status, got)
		}
	}

	app := newApp()
	var out bytes.Buffer
	app.Writer, app.ErrWriter = &out, io.Discard
	if err := app.Run(context.Background(), []string{"plantgate", "token", "--redis-url", srv.URL(), "create", "--name", "janitor", "--scope", "plants:delete"}); err != nil {
		t.Fatal(err)
	}
	janitor := strings.TrimSpace(out.String())

	if status, body, h := call(t, "GET", bases[1]+"/plants/1", janitor); status != 403 ||
		body != `{"error":40350,"message":"token lacks scope plants:read"}` ||
		h.Get("WWW-Authenticate") != `Bearer realm="plantgate", error="insufficient_scope"` {
		t.Fatalf("janitor reads: %d %s %q", status, body, h.Get("WWW-Authenticate"))
	}
	if status, body, _ := call(t, "DELETE", bases[1]+"/plants/1", janitor); status != 204 || body != "" {
		t.Fatalf("janitor deletes: %d %s", status, body)
	}
	if status, body, _ := call(t, "GET", bases[0]+"/plants/1", bootstrap); status != 404 || body != `{"error":40402,"message":"no plant with id 1"}` {
		t.Fatalf("deleted plant through the other gateway: %d %s", status, body)
	}

	status, body, h := call(t, "GET", bases[0]+"/plants?limit=1", bootstrap)
	m := regexp.MustCompile(`^<(/plants\?limit=1&cursor=[A-Za-z0-9_-]+)>; rel="next"$`).FindStringSubmatch(h.Get("Link"))
	if status != 200 || body != `[{"id":2,"name":"b"}]` || m == nil {
		t.Fatalf("first page: %d %s, Link %q", status, body, h.Get("Link"))
	}
	if status, body, h := call(t, "GET", bases[1]+m[1], bootstrap); status != 200 || body != `[{"id":3,"name":"c"}]` || h.Get("Link") != "" {
		t.Fatalf("next page through the other gateway: %d %s, Link %q", status, body, h.Get("Link"))
	}
}
