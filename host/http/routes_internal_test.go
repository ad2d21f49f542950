package http

import (
	"bufio"
	"strconv"
	"strings"
	"testing"

	"github.com/valyala/fasthttp"
)

// TestMatchPath pins the route matcher behind metrics labels and Allow,
// including the :parameter segments that the list/get/delete routes use.
func TestMatchPath(t *testing.T) {
	t.Parallel()
	cases := []struct {
		pattern, path string
		want          bool
	}{
		{"/plants", "/plants", true},
		{"/plants", "/plants/", false},
		{"/plants", "/PLANTS", false},
		{"/plants", "//plants", false},
		{"/plants", "/plants/1", false},
		{"/plants/:id", "/plants/1", true},
		{"/plants/:id", "/plants/abc", true},
		{"/plants/:id", "/plants/", false},
		{"/plants/:id", "/plants", false},
		{"/plants/:id", "/plants/1/", false},
		{"/plants/:id", "/plants/1/x", false},
		{"/", "/", true},
		{"/", "/plants", false},
	}
	for _, c := range cases {
		if got := matchPath(c.pattern, c.path); got != c.want {
			t.Errorf("matchPath(%q, %q) = %v, want %v", c.pattern, c.path, got, c.want)
		}
	}
}

// TestTemplatePath pins the metrics label of a route pattern: the OpenAPI
// document's form of the path.
func TestTemplatePath(t *testing.T) {
	t.Parallel()
	for pattern, want := range map[string]string{
		"/plants":       "/plants",
		"/plants/:id":   "/plants/{id}",
		"/a/:x/b/:y":    "/a/{x}/b/{y}",
		"/healthz":      "/healthz",
		"/":             "/",
		"/openapi.yaml": "/openapi.yaml",
	} {
		if got := templatePath(pattern); got != want {
			t.Errorf("templatePath(%q) = %q, want %q", pattern, got, want)
		}
	}
}

// BenchmarkScreen is the framing screen on a typical POST /plants header
// block; it runs for every request, before Fiber.
//
//	go test -run '^$' -bench Screen -benchmem ./host/http/
func BenchmarkScreen(b *testing.B) {
	var req fasthttp.Request
	const body = `{"id":1,"name":"fern","tag":"green"}`
	raw := "POST /plants HTTP/1.1\r\nHost: 127.0.0.1:8080\r\nUser-Agent: wrk\r\nAuthorization: Bearer 0123456789abcdef0123456789abcdef\r\n" +
		"Content-Type: application/json\r\nContent-Length: " + strconv.Itoa(len(body)) + "\r\n\r\n" + body
	if err := req.Read(bufioReader(raw)); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if e := screen(&req.Header); e != nil {
			b.Fatal(e)
		}
	}
}

func bufioReader(s string) *bufio.Reader { return bufio.NewReader(strings.NewReader(s)) }
