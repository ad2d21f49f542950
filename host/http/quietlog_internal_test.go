package http

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/plantgate/plantgate/host"
)

// keysMissing refuses every credential as host/oidc does while the
// provider's keys have not arrived, "store-down" as a store outage and
// "flood" as beyond the introspection rate.
type keysMissing struct{}

func (keysMissing) Resolve(_ context.Context, credential string) (host.Token, time.Time, bool, error) {
	switch credential {
	case "store-down":
		return host.Token{}, time.Time{}, false, &host.Error{Code: host.ErrStoreUnavailable, Message: "store unavailable"}
	case "flood":
		return host.Token{}, time.Time{}, false, &host.Error{Code: host.ErrIntrospectBusy, Message: "too many unknown access tokens to ask the identity provider about now; retry later"}
	}
	return host.Token{}, time.Time{}, false, &host.Error{Code: host.ErrKeysUnavailable, Message: "the identity provider's signing keys are not available yet; retry later"}
}

// unreached is a Store and Policy the requests of this test never reach:
// the resolver answers first. Calling one panics (the nil interface).
type unreached struct {
	host.Store
	host.Policy
}

func (unreached) Authorizes() bool { return true }

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) lines(substr string) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for line := range strings.SplitSeq(l.b.String(), "\n") {
		if strings.Contains(line, substr) {
			out = append(out, line)
		}
	}
	return out
}

// TestKeysMissingLoggedOncePerInterval: while the identity provider's keys
// are missing, every access token is answered 503 50305 as before, but the
// error line is written once per interval, the next one counting those
// held back; 50306 (a flood beyond the introspection rate) likewise, on a
// budget of its own; any other 5xx is still logged every time.
func TestKeysMissingLoggedOncePerInterval(t *testing.T) {
	t.Parallel()
	logs := &lockedBuffer{}
	s, err := New(Config{Store: unreached{}, Policy: unreached{}, Credentials: keysMissing{},
		Logger: slog.New(slog.NewTextHandler(logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)
	for _, l := range s.quietLogs {
		l.now = func() time.Time { return now }
	}
	ask := func(credential string) {
		t.Helper()
		req := httptest.NewRequest("GET", "/plants", nil)
		req.Header.Set("Authorization", "Bearer "+credential)
		resp, err := s.App().Test(req, -1)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		want := `{"error":50305,"message":"the identity provider's signing keys are not available yet; retry later"}`
		switch credential {
		case "store-down":
			want = `{"error":50301,"message":"store unavailable"}`
		case "flood":
			want = `{"error":50306,"message":"too many unknown access tokens to ask the identity provider about now; retry later"}`
		}
		if resp.StatusCode != 503 || resp.Header.Get("Retry-After") != "1" || string(body) != want {
			t.Fatalf("%s: %d %q %s", credential, resp.StatusCode, resp.Header.Get("Retry-After"), body)
		}
	}
	const n = 50
	for range n {
		ask("a.b.c")
	}
	got := logs.lines("code=50305")
	if len(got) != 1 || !strings.Contains(got[0], `level=ERROR msg="request failed" method=GET path=/plants code=50305 `) || !strings.HasSuffix(got[0], " suppressed=0") {
		t.Fatalf("%d requests while the keys are missing logged:\n%s", n, strings.Join(got, "\n"))
	}
	for range 3 {
		ask("store-down")
		ask("flood")
	}
	if got := logs.lines("code=50306"); len(got) != 1 || !strings.HasSuffix(got[0], " suppressed=0") {
		t.Fatalf("3 refusals beyond the introspection rate logged:\n%s", strings.Join(got, "\n"))
	}
	if got := logs.lines("code=50301"); len(got) != 3 {
		t.Fatalf("3 store failures logged %d lines, want 3:\n%s", len(got), strings.Join(got, "\n"))
	}

	now = now.Add(quietLogEvery - time.Nanosecond)
	ask("a.b.c")
	if got := logs.lines("code=50305"); len(got) != 1 {
		t.Fatalf("a line before the interval ended:\n%s", strings.Join(got, "\n"))
	}
	now = now.Add(time.Nanosecond)
	ask("a.b.c")
	ask("a.b.c")
	got = logs.lines("code=50305")
	if len(got) != 2 || !strings.HasSuffix(got[1], " suppressed=50") {
		t.Fatalf("after the interval:\n%s", strings.Join(got, "\n"))
	}
}
