package http_test

import (
	nethttp "net/http"
	"path/filepath"
	"testing"
)

// TestABI1Plugins loads the bundled plugins as built for ABI 1
// (testdata/abi1, committed binaries) on this host and checks that they
// answer exactly as the plugins built from today's sources: same status,
// same body, same stored state.
func TestABI1Plugins(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, method, path, auth, body string
		status                         int
		want                           string
	}{
		{"no credential", "POST", "/plants", "", `{"id":1,"name":"fern"}`, 401, errorBody(40101, "a bearer credential is required")},
		{"unknown token", "POST", "/plants", "Bearer nobody-0123456789", `{"id":1,"name":"fern"}`, 401, errorBody(40151, "invalid token")},
		{"lacks scope", "POST", "/plants", "Bearer " + readerToken, `{"id":1,"name":"fern"}`, 403, errorBody(40350, "token lacks scope plants:write")},
		{"rule breaks", "POST", "/plants", "Bearer " + writerToken, `{"id":0,"name":"fern"}`, 400, errorBody(40050, "id must be at least 1, got 0")},
		{"create", "POST", "/plants", "Bearer " + writerToken, `{"id":7,"name":"fern","tag":"green"}`, 200, `{"name":"fern","tag":"green"}`},
		{"read", "GET", "/plants/7", "Bearer " + readerToken, "", 200, `{"id":7,"name":"fern","tag":"green"}`},
		{"delete lacks scope", "DELETE", "/plants/7", "Bearer " + readerToken, "", 403, errorBody(40350, "token lacks scope plants:delete")},
	}
	for _, dir := range []struct{ name, path string }{
		{"abi1", filepath.Join(moduleRoot, "testdata", "abi1")},
		{"today", ""},
	} {
		t.Run(dir.name, func(t *testing.T) {
			t.Parallel()
			g := newGateway(t, gatewayOptions{bundled: dir.path})
			for _, c := range cases {
				req := newPost(c.body, c.auth, "application/json")
				req.Method = c.method
				req.URL.Path = c.path
				if c.body == "" {
					req.Body = nethttp.NoBody
					req.ContentLength = 0
					req.Header.Del("Content-Type")
				}
				got := g.do(req)
				if got.status != c.status || got.body != c.want {
					t.Errorf("%s: got %d %s, want %d %s", c.name, got.status, got.body, c.status, c.want)
				}
			}
			if got, want := g.stored("7"), `{"id":7,"name":"fern","tag":"green"}`; got != want {
				t.Errorf("stored plant 7 = %q, want %q", got, want)
			}
		})
	}
}
