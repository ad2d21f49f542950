package http_test

import (
	"strings"
	"testing"
)

// TestRequestIDAndAccessLog: each request gets one access line with its
// id, status, error, principal and the plugin that denied; a sane
// incoming X-Request-ID is kept, another is replaced.
func TestRequestIDAndAccessLog(t *testing.T) {
	t.Parallel()
	g := newGateway(t, gatewayOptions{extra: []string{"30-deny.wasm=deny.wasm"}})

	req := newPost(`{"id":1,"name":"a"}`, "Bearer "+writerToken, "application/json")
	req.Header.Set("X-Request-ID", "trace-42.a:b_c")
	r := g.do(req)
	if r.status != 403 || r.header.Get("X-Request-ID") != "trace-42.a:b_c" {
		t.Fatalf("got %d, id %q", r.status, r.header.Get("X-Request-ID"))
	}
	line := findLine(t, g.logText(), "request_id=trace-42.a:b_c")
	for _, want := range []string{"msg=request", "status=403", "error=40355", "principal=writer", "plugin=deny", "phase=authorize", "path=/plants", "latency="} {
		if !strings.Contains(line, want) {
			t.Errorf("access line lacks %q: %s", want, line)
		}
	}
	if strings.Contains(g.logText(), writerToken) {
		t.Fatal("the log holds the token")
	}

	for _, bad := range []string{"has space", strings.Repeat("x", 129), "new\nline", "é"} {
		req := newPost(`{}`, "", "application/json")
		req.Header.Set("X-Request-ID", bad)
		id := g.do(req).header.Get("X-Request-ID")
		if id == "" || id == bad || strings.ContainsAny(id, " \n") {
			t.Errorf("incoming id %q: answered with %q", bad, id)
		}
	}
	a, b := g.do(newPost(`{}`, "", "")).header.Get("X-Request-ID"), g.do(newPost(`{}`, "", "")).header.Get("X-Request-ID")
	if a == "" || a == b {
		t.Fatalf("generated ids %q and %q", a, b)
	}
	line = findLine(t, g.logText(), "request_id="+a)
	if !strings.Contains(line, "status=401") || !strings.Contains(line, "error=40101") || strings.Contains(line, "plugin=") {
		t.Fatalf("access line of a request without credential: %s", line)
	}
}

func findLine(t *testing.T, logs, substr string) string {
	t.Helper()
	for line := range strings.SplitSeq(logs, "\n") {
		if strings.Contains(line, substr) && strings.Contains(line, "msg=request") {
			return line
		}
	}
	t.Fatalf("no access line with %q in\n%s", substr, logs)
	return ""
}
