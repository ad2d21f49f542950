package http_test

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestSmuggling sends every framing that two HTTP parsers could read
// differently, each with a second request hidden where one reading would
// find it. Each is answered 400 with its Error body and the connection
// closed, so neither the hidden request nor the follow-up is ever answered.
// The framings that are not ambiguous keep the connection.
func TestSmuggling(t *testing.T) {
	t.Parallel()
	g := newGateway(t, gatewayOptions{})
	addr := g.serve(t)
	const body = `{"id":970,"name":"frame"}`
	const hidden = "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"
	head := "POST /plants HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + writerToken + "\r\nContent-Type: application/json\r\n"
	cl := "Content-Length: " + itoa(len(body)) + "\r\n"
	chunked := chunk(body) + "0\r\n\r\n"
	var (
		malformed = errorBody(40011, "malformed HTTP request")
		both      = errorBody(40014, "Content-Length and Transfer-Encoding together")
		twoCL     = errorBody(40014, "more than one Content-Length")
		badCL     = errorBody(40014, "Content-Length is not a decimal number")
		badTE     = errorBody(40014, "Transfer-Encoding must be chunked alone, once, in HTTP/1.1")
		badChunk  = errorBody(40014, "malformed chunked body")
		fold      = errorBody(40011, "obsolete line folding in a header")
		method    = errorBody(40011, "unknown HTTP method")
		version   = errorBody(40011, "unsupported HTTP version")
	)
	cases := []struct {
		name, raw string
		status    int
		body      string
	}{
		// Content-Length and Transfer-Encoding together (CL.TE and TE.CL).
		{"CL then TE", head + "Content-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n" + hidden, 400, both},
		{"TE then CL", head + "Transfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n" + chunked + hidden, 400, both},
		{"CL with TE identity", head + cl + "Transfer-Encoding: identity\r\n\r\n" + body + hidden, 400, badTE},
		{"CL of 0 with chunked", head + "Content-Length: 0\r\nTransfer-Encoding: chunked\r\n\r\n" + chunked + hidden, 400, both},
		// Content-Length alone, but twice or not one number.
		{"two equal Content-Lengths", head + cl + cl + "\r\n" + body + hidden, 400, twoCL},
		{"two different Content-Lengths", head + "Content-Length: 5\r\n" + cl + "\r\n" + body + hidden, 400, twoCL},
		{"Content-Length list", head + "Content-Length: " + itoa(len(body)) + ", " + itoa(len(body)) + "\r\n\r\n" + body + hidden, 400, badCL},
		{"Content-Length with plus", head + "Content-Length: +" + itoa(len(body)) + "\r\n\r\n" + body + hidden, 400, badCL},
		{"Content-Length negative", head + "Content-Length: -" + itoa(len(body)) + "\r\n\r\n" + body + hidden, 400, badCL},
		{"Content-Length hex", head + "Content-Length: 0x19\r\n\r\n" + body + hidden, 400, badCL},
		{"Content-Length with inner space", head + "Content-Length: 2 5\r\n\r\n" + body + hidden, 400, badCL},
		{"Content-Length empty", head + "Content-Length:\r\n\r\n" + body + hidden, 400, badCL},
		{"Content-Length past int64", head + "Content-Length: 99999999999999999999999\r\n\r\n" + body + hidden, 400, badCL},
		{"Content-Length folded", head + "Content-Length: 2\r\n 5\r\n\r\n" + body + hidden, 400, badCL},
		{"space before the colon", head + "Content-Length : " + itoa(len(body)) + "\r\n\r\n" + body + hidden, 400, malformed},
		// Transfer-Encoding other than chunked alone, once.
		{"gzip, chunked", head + "Transfer-Encoding: gzip, chunked\r\n\r\n" + chunked + hidden, 400, badTE},
		{"chunked, chunked", head + "Transfer-Encoding: chunked, chunked\r\n\r\n" + chunked + hidden, 400, badTE},
		{"chunked twice in two fields", head + "Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n" + chunked + hidden, 400, badTE},
		{"identity", head + "Transfer-Encoding: identity\r\n\r\n" + body + hidden, 400, badTE},
		{"gzip", head + "Transfer-Encoding: gzip\r\n\r\n" + body + hidden, 400, badTE},
		{"xchunked", head + "Transfer-Encoding: xchunked\r\n\r\n" + chunked + hidden, 400, badTE},
		{"chunked in HTTP/1.0", strings.Replace(head, "HTTP/1.1", "HTTP/1.0", 1) + "Connection: keep-alive\r\nTransfer-Encoding: chunked\r\n\r\n" + chunked + hidden, 400, badTE},
		{"Transfer-Encoding folded", head + "Transfer-Encoding:\r\n chunked\r\n\r\n" + chunked + hidden, 400, badTE},
		{"obs-fold in another header", head + "X-A: a\r\n chunked\r\n" + cl + "\r\n" + body + hidden, 400, fold},
		// Chunk sizes.
		{"chunk size not hex", head + "Transfer-Encoding: chunked\r\n\r\nzz\r\n" + body + "\r\n0\r\n\r\n" + hidden, 400, badChunk},
		{"chunk size negative", head + "Transfer-Encoding: chunked\r\n\r\n-1\r\n" + body + "\r\n0\r\n\r\n" + hidden, 400, badChunk},
		{"chunk size with 0x", head + "Transfer-Encoding: chunked\r\n\r\n0x19\r\n" + body + "\r\n0\r\n\r\n" + hidden, 400, badChunk},
		{"chunk size after a space", head + "Transfer-Encoding: chunked\r\n\r\n 19\r\n" + body + "\r\n0\r\n\r\n" + hidden, 400, badChunk},
		{"chunk size past int64", head + "Transfer-Encoding: chunked\r\n\r\n10000000000000000019\r\n" + body + "\r\n0\r\n\r\n" + hidden, 400, badChunk},
		{"chunk size ended by bare LF", head + "Transfer-Encoding: chunked\r\n\r\n19\n" + body + "\r\n0\r\n\r\n" + hidden, 400, badChunk},
		{"chunk longer than its size", head + "Transfer-Encoding: chunked\r\n\r\n5\r\n" + body + "\r\n0\r\n\r\n" + hidden, 400, badChunk},
		// Request line.
		{"lower-case method", "post /plants HTTP/1.1\r\nHost: x\r\n" + cl + "\r\n" + body + hidden, 400, method},
		{"unknown method", "PLANT /plants HTTP/1.1\r\nHost: x\r\n" + cl + "\r\n" + body + hidden, 400, method},
		{"HTTP/2.0 on an HTTP/1 connection", "POST /plants HTTP/2.0\r\nHost: x\r\n" + cl + "\r\n" + body + hidden, 400, version},
		{"HTTP/1.2", "POST /plants HTTP/1.2\r\nHost: x\r\n" + cl + "\r\n" + body + hidden, 400, version},
		{"two spaces after the method", "POST  /plants HTTP/1.1\r\nHost: x\r\n" + cl + "\r\n" + body + hidden, 400, malformed},
		{"space after the version", "POST /plants HTTP/1.1 \r\nHost: x\r\n" + cl + "\r\n" + body + hidden, 400, malformed},
		{"space in the target", "POST /pla nts HTTP/1.1\r\nHost: x\r\n" + cl + "\r\n" + body + hidden, 400, malformed},
		{"relative target", "POST plants HTTP/1.1\r\nHost: x\r\n" + cl + "\r\n" + body + hidden, 400, malformed},
		{"no Host", "POST /plants HTTP/1.1\r\n" + cl + "\r\n" + body + hidden, 400, malformed},
		{"two Hosts", "POST /plants HTTP/1.1\r\nHost: x\r\nHost: y\r\n" + cl + "\r\n" + body + hidden, 400, malformed},
		{"header line starting with a space", "POST /plants HTTP/1.1\r\n Host: x\r\n" + cl + "\r\n" + body + hidden, 400, malformed},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			r := rawExchange(t, addr, c.raw)
			if r.status != c.status || r.body != c.body || r.after != "closed" {
				t.Fatalf("got %d %s, then %.100s\nwant %d %s, then closed", r.status, r.body, r.after, c.status, c.body)
			}
			if id := r.header.Get("X-Request-ID"); id == "" {
				t.Fatal("no X-Request-ID")
			}
		})
	}

	// Framings that are not ambiguous are served and keep the connection.
	accepted := []struct{ name, raw string }{
		{"Content-Length", head + cl + "\r\n" + body},
		{"chunked", head + "Transfer-Encoding: chunked\r\n\r\n" + chunked},
		{"Chunked in another case", head + "Transfer-Encoding: Chunked\r\n\r\n" + chunked},
		{"chunk extension", head + "Transfer-Encoding: chunked\r\n\r\n" + strings.Replace(chunk(body), "\r\n", ";ext=1\r\n", 1) + "0\r\n\r\n"},
		{"Content-Length with spaces around", head + "Content-Length:   " + itoa(len(body)) + "  \r\n\r\n" + body},
		{"absolute-form target", strings.Replace(head, "/plants", "http://x/plants", 1) + cl + "\r\n" + body},
	}
	for _, c := range accepted {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			r := rawExchange(t, addr, c.raw)
			if r.status != 200 || r.body != `{"name":"frame"}` || r.after != healthy {
				t.Fatalf("got %d %s, then %.100s; want 200 and a connection still serving", r.status, r.body, r.after)
			}
		})
	}
}

// TestSmugglingOnPlantRoutes: the framing screen stands in front of the
// list, get and delete routes as it does for create. An ambiguously framed
// DELETE (with a second DELETE hidden behind it) is answered 400 40014 and
// closed, reported under the route's bounded label, and deletes nothing.
func TestSmugglingOnPlantRoutes(t *testing.T) {
	t.Parallel()
	var (
		mu     sync.Mutex
		labels []string
	)
	g := newGateway(t, gatewayOptions{observe: func(route string, _ int, _ time.Duration) {
		mu.Lock()
		labels = append(labels, route)
		mu.Unlock()
	}})
	addr := g.serve(t)
	for _, id := range []string{"971", "972"} {
		if r := g.post(`{"id":` + id + `,"name":"kept"}`); r.status != 200 {
			t.Fatalf("create %s: %d %s", id, r.status, r.body)
		}
	}
	both := errorBody(40014, "Content-Length and Transfer-Encoding together")
	hidden := "DELETE /plants/972 HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + deleterToken + "\r\n\r\n"
	cases := []struct{ name, raw, label string }{
		{"delete", "DELETE /plants/971 HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + deleterToken +
			"\r\nContent-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n" + hidden, "/plants/{id}"},
		{"get", "GET /plants/971 HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + readerToken +
			"\r\nTransfer-Encoding: chunked\r\nContent-Length: 5\r\n\r\n0\r\n\r\n" + hidden, "/plants/{id}"},
		{"list", "GET /plants?limit=1 HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + readerToken +
			"\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n" + hidden, "/plants"},
	}
	for _, c := range cases {
		mu.Lock()
		labels = labels[:0]
		mu.Unlock()
		r := rawExchange(t, addr, c.raw)
		if r.status != 400 || r.body != both || r.after != "closed" {
			t.Fatalf("%s: got %d %s, then %.100s; want 400 %s, then closed", c.name, r.status, r.body, r.after, both)
		}
		mu.Lock()
		got := slices.Clone(labels)
		mu.Unlock()
		if len(got) != 1 || got[0] != c.label {
			t.Fatalf("%s: Observe labels %v, want [%s]", c.name, got, c.label)
		}
	}
	for _, id := range []string{"971", "972"} {
		if v := g.stored(id); v == "" {
			t.Fatalf("plant %s was deleted by a refused or hidden request", id)
		}
	}
}

// TestRefusedReadsReported checks that a request refused before any route
// (by fasthttp's reader or the framing screen) is reported like a routed
// one: an X-Request-ID on the answer, a code that names the limit it hit,
// one Observe call and one access line carrying the id and the code.
func TestRefusedReadsReported(t *testing.T) {
	t.Parallel()
	type call struct {
		route  string
		status int
	}
	var (
		mu    sync.Mutex
		calls []call
	)
	g := newGateway(t, gatewayOptions{bodyLimit: 64, readTimeout: 300 * time.Millisecond, observe: func(route string, status int, _ time.Duration) {
		mu.Lock()
		calls = append(calls, call{route, status})
		mu.Unlock()
	}})
	addr := g.serve(t)
	head := "POST /plants HTTP/1.1\r\nHost: x\r\nX-Request-ID: %s\r\nContent-Type: application/json\r\n"
	cases := []struct {
		name, raw string
		code      int32
		msg       string
		keepsID   bool // the headers were read, so the client's id is kept
	}{
		{"headers too large", head + "X-Big: " + strings.Repeat("a", 9000) + "\r\n\r\n", 40012, "request headers are too large", false},
		{"body too large", head + "Content-Length: 65\r\n\r\n" + strings.Repeat(" ", 65), 40005, "request body is larger than the limit", true},
		{"too slow", head + "Content-Length: 10\r\n\r\n{", 40013, "request was not received in time", false},
		{"ambiguous framing", head + "Content-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", 40014, "Content-Length and Transfer-Encoding together", true},
		{"malformed framing", head + "Content-Length: 1\r\nContent-Length: 2\r\n\r\n{}", 40014, "more than one Content-Length", false},
		{"malformed header", head + "NoColon\r\n\r\n", 40011, "malformed HTTP request", false},
	}
	for i, c := range cases {
		sent := fmt.Sprintf("refused-%d", i)
		r := rawExchange(t, addr, fmt.Sprintf(c.raw, sent))
		if want := errorBody(c.code, c.msg); r.status != 400 || r.body != want || r.after != "closed" {
			t.Fatalf("%s: got %d %s, then %s; want 400 %s, then closed", c.name, r.status, r.body, r.after, want)
		}
		id := r.header.Get("X-Request-ID")
		if id == "" || c.keepsID && id != sent {
			t.Fatalf("%s: X-Request-ID %q (sent %q)", c.name, id, sent)
		}
		mu.Lock()
		n := len(calls)
		last := calls[max(n-1, 0):]
		mu.Unlock()
		if n != i+1 || last[0].status != 400 {
			t.Fatalf("%s: Observe calls %v", c.name, calls)
		}
		line := "request_id=" + id + " "
		var found string
		for _, l := range strings.Split(g.logText(), "\n") {
			if strings.Contains(l, line) {
				found = l
			}
		}
		if !strings.Contains(found, "msg=request ") || !strings.Contains(found, "status=400 ") || !strings.HasSuffix(found, fmt.Sprintf("error=%d", c.code)) {
			t.Fatalf("%s: access line %q", c.name, found)
		}
	}
}
