package http_test

import (
	"context"
	"fmt"
	"io"
	nethttp "net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/plantgate/plantgate/host"
)

// call sends method path with the token as bearer credential ("" for none).
func (g *gateway) call(method, path, token string) response {
	g.t.Helper()
	req, _ := nethttp.NewRequest(method, "http://plantgate.test"+path, nil)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	return g.do(req)
}

// mustCreate creates plants through POST /plants as the writer.
func (g *gateway) mustCreate(bodies ...string) {
	g.t.Helper()
	for _, b := range bodies {
		if r := g.post(b); r.status != 200 {
			g.t.Fatalf("create %s: %d %s", b, r.status, r.body)
		}
	}
}

// TestPlantOperationsContract walks get, delete and list through the real
// stack (Fiber, the bundled wasm plugins, Redis), scopes per operation
// included.
func TestPlantOperationsContract(t *testing.T) {
	t.Parallel()
	g := newGateway(t, gatewayOptions{authOnly: true})
	g.mustCreate(`{"id":3,"name":"Fern","tag":"indoor"}`, `{"id":-7,"name":"Moss"}`, `{"id":12,"name":"Ivy","tag":""}`)
	bad := func(code int32, msg string) string { return errorBody(code, msg) }
	lacks := func(scope string) string { return bad(40350, "token lacks scope "+scope) }
	const insufficient = `Bearer realm="plantgate", error="insufficient_scope"`
	type tc struct {
		name         string
		method, path string
		token        string
		status       int
		body         string
		header       map[string]string
	}
	// Ordered: later cases see what earlier ones deleted and created.
	cases := []tc{
		{name: "get", method: "GET", path: "/plants/3", token: readerToken, status: 200, body: `{"id":3,"name":"Fern","tag":"indoor"}`,
			header: map[string]string{"Content-Type": "application/json"}},
		{name: "get without tag", method: "GET", path: "/plants/-7", token: readerToken, status: 200, body: `{"id":-7,"name":"Moss"}`},
		{name: "get with empty tag", method: "GET", path: "/plants/12", token: readerToken, status: 200, body: `{"id":12,"name":"Ivy","tag":""}`},
		{name: "get absent", method: "GET", path: "/plants/99", token: readerToken, status: 404, body: bad(40402, "no plant with id 99")},
		{name: "get non-integer id", method: "GET", path: "/plants/abc", token: readerToken, status: 400,
			body: bad(40017, "plant id must be an integer from -9223372036854775808 to 9223372036854775807")},
		{name: "get id beyond int64", method: "GET", path: "/plants/9223372036854775808", token: readerToken, status: 400,
			body: bad(40017, "plant id must be an integer from -9223372036854775808 to 9223372036854775807")},
		{name: "get fractional id", method: "GET", path: "/plants/1.5", token: readerToken, status: 400,
			body: bad(40017, "plant id must be an integer from -9223372036854775808 to 9223372036854775807")},
		{name: "credential before id", method: "GET", path: "/plants/abc", status: 401, body: bad(40101, "a bearer credential is required"),
			header: map[string]string{"WWW-Authenticate": `Bearer realm="plantgate"`}},
		{name: "unknown token", method: "GET", path: "/plants/3", token: "nope", status: 401, body: bad(40151, "invalid token"),
			header: map[string]string{"WWW-Authenticate": `Bearer realm="plantgate", error="invalid_token"`}},
		{name: "get needs plants:read", method: "GET", path: "/plants/3", token: writerToken, status: 403, body: lacks("plants:read"),
			header: map[string]string{"WWW-Authenticate": insufficient}},
		{name: "list needs plants:read", method: "GET", path: "/plants", token: deleterToken, status: 403, body: lacks("plants:read"),
			header: map[string]string{"WWW-Authenticate": insufficient}},
		{name: "delete needs plants:delete (reader)", method: "DELETE", path: "/plants/3", token: readerToken, status: 403, body: lacks("plants:delete"),
			header: map[string]string{"WWW-Authenticate": insufficient}},
		{name: "delete needs plants:delete (writer)", method: "DELETE", path: "/plants/3", token: writerToken, status: 403, body: lacks("plants:delete")},
		{name: "create needs plants:write", method: "POST", path: "/plants", token: deleterToken, status: 403, body: lacks("plants:write")},
		{name: "still there after refused deletes", method: "GET", path: "/plants/3", token: readerToken, status: 200, body: `{"id":3,"name":"Fern","tag":"indoor"}`},
		{name: "delete", method: "DELETE", path: "/plants/3", token: deleterToken, status: 204, body: ""},
		{name: "gone", method: "GET", path: "/plants/3", token: readerToken, status: 404, body: bad(40402, "no plant with id 3")},
		{name: "delete again", method: "DELETE", path: "/plants/3", token: deleterToken, status: 404, body: bad(40402, "no plant with id 3")},
		{name: "delete absent", method: "DELETE", path: "/plants/-99", token: adminToken, status: 404, body: bad(40402, "no plant with id -99")},
		{name: "delete non-integer id", method: "DELETE", path: "/plants/x", token: deleterToken, status: 400,
			body: bad(40017, "plant id must be an integer from -9223372036854775808 to 9223372036854775807")},
		{name: "list", method: "GET", path: "/plants", token: readerToken, status: 200, body: `[{"id":-7,"name":"Moss"},{"id":12,"name":"Ivy","tag":""}]`,
			header: map[string]string{"Content-Type": "application/json", "Link": ""}},
		{name: "limit 0", method: "GET", path: "/plants?limit=0", token: readerToken, status: 400, body: bad(40015, "limit must be an integer from 1 to 100")},
		{name: "limit 101", method: "GET", path: "/plants?limit=101", token: readerToken, status: 400, body: bad(40015, "limit must be an integer from 1 to 100")},
		{name: "limit 300", method: "GET", path: "/plants?limit=300", token: readerToken, status: 400, body: bad(40015, "limit must be an integer from 1 to 100")},
		{name: "limit negative", method: "GET", path: "/plants?limit=-1", token: readerToken, status: 400, body: bad(40015, "limit must be an integer from 1 to 100")},
		{name: "limit text", method: "GET", path: "/plants?limit=ten", token: readerToken, status: 400, body: bad(40015, "limit must be an integer from 1 to 100")},
		{name: "limit empty", method: "GET", path: "/plants?limit=", token: readerToken, status: 400, body: bad(40015, "limit must be an integer from 1 to 100")},
		{name: "limit twice", method: "GET", path: "/plants?limit=1&limit=2", token: readerToken, status: 400, body: bad(40015, "limit must be an integer from 1 to 100")},
		{name: "limit 100", method: "GET", path: "/plants?limit=100", token: readerToken, status: 200, body: `[{"id":-7,"name":"Moss"},{"id":12,"name":"Ivy","tag":""}]`},
		{name: "cursor garbage", method: "GET", path: "/plants?cursor=abc", token: readerToken, status: 400,
			body: bad(40016, "cursor is not valid: pass the cursor of a Link header unchanged")},
		{name: "cursor empty", method: "GET", path: "/plants?cursor=", token: readerToken, status: 400,
			body: bad(40016, "cursor is not valid: pass the cursor of a Link header unchanged")},
		{name: "limit checked after the scope", method: "GET", path: "/plants?limit=0", token: writerToken, status: 403, body: lacks("plants:read")},
		{name: "deleted id created again", method: "POST", path: "/plants", token: writerToken, status: 200, body: `{"name":"Palm"}`},
		{name: "and read back", method: "GET", path: "/plants/3", token: adminToken, status: 200, body: `{"id":3,"name":"Palm"}`},
		{name: "put is not allowed", method: "PUT", path: "/plants/3", token: adminToken, status: 405, body: bad(40501, "method not allowed on this route"),
			header: map[string]string{"Allow": "GET, HEAD, DELETE"}},
		{name: "delete of the collection is not allowed", method: "DELETE", path: "/plants", token: adminToken, status: 405, body: bad(40501, "method not allowed on this route"),
			header: map[string]string{"Allow": "GET, HEAD, POST"}},
		{name: "deeper path", method: "GET", path: "/plants/3/x", token: adminToken, status: 404, body: bad(40401, "no such route")},
	}
	for _, c := range cases {
		var r response
		if c.method == "POST" {
			r = g.do(newPost(`{"id":3,"name":"Palm"}`, "Bearer "+c.token, "application/json"))
		} else {
			r = g.call(c.method, c.path, c.token)
		}
		if r.status != c.status || r.body != c.body {
			t.Errorf("%s: %s %s → %d %s\nwant %d %s", c.name, c.method, c.path, r.status, r.body, c.status, c.body)
		}
		for k, v := range c.header {
			if got := r.header.Get(k); got != v {
				t.Errorf("%s: header %s = %q, want %q", c.name, k, got, v)
			}
		}
		if c.status == 204 && (r.header.Get("Content-Type") != "" || r.header.Get("Content-Length") != "" && r.header.Get("Content-Length") != "0") {
			t.Errorf("%s: 204 with Content-Type %q, Content-Length %q", c.name, r.header.Get("Content-Type"), r.header.Get("Content-Length"))
		}
	}
}

var linkRE = regexp.MustCompile(`^</plants\?limit=(\d+)&cursor=([A-Za-z0-9_-]+)>; rel="next"$`)

// walkPlants follows the Link headers from first and returns the ids of
// each page; between pages it calls between.
func walkPlants(g *gateway, first, token string, between func()) [][]int64 {
	g.t.Helper()
	var pages [][]int64
	path := first
	for {
		r := g.call("GET", path, token)
		if r.status != 200 {
			g.t.Fatalf("GET %s: %d %s", path, r.status, r.body)
		}
		pages = append(pages, idsOf(g.t, r.body))
		link := r.header.Get("Link")
		if link == "" {
			return pages
		}
		m := linkRE.FindStringSubmatch(link)
		if m == nil {
			g.t.Fatalf("Link %q is not a next link", link)
		}
		path = strings.TrimSuffix(strings.TrimPrefix(link, "<"), `>; rel="next"`)
		if len(pages) > 10000 {
			g.t.Fatal("walk does not end")
		}
		if between != nil {
			between()
		}
	}
}

// idsOf reads the ids of a list body, which must be exactly the encoding
// of {"id":N,"name":"nN"} objects.
func idsOf(t testing.TB, body string) []int64 {
	t.Helper()
	var ids []int64
	for _, m := range regexp.MustCompile(`\{"id":(-?\d+),"name":"[^"]*"\}`).FindAllStringSubmatch(body, -1) {
		id, _ := strconv.ParseInt(m[1], 10, 64)
		ids = append(ids, id)
	}
	var want strings.Builder
	want.WriteByte('[')
	for i, id := range ids {
		if i > 0 {
			want.WriteByte(',')
		}
		fmt.Fprintf(&want, `{"id":%d,"name":"n%d"}`, id, id)
	}
	want.WriteByte(']')
	if body != want.String() {
		t.Fatalf("list body %s, want %s", body, want.String())
	}
	return ids
}

func TestListPaging(t *testing.T) {
	t.Parallel()
	g := newGateway(t, gatewayOptions{authOnly: true})
	var want []int64
	for i := int64(-22); i < 23; i++ { // 45 ids, negatives included
		id := i * 1000003
		want = append(want, id)
	}
	for _, i := range []int{44, 0, 22, 7, 31} { // some out of order first
		g.mustCreate(fmt.Sprintf(`{"id":%d,"name":"n%d"}`, want[i], want[i]))
	}
	for _, id := range want {
		r := g.post(fmt.Sprintf(`{"id":%d,"name":"n%d"}`, id, id))
		if r.status != 200 {
			t.Fatalf("create %d: %d %s", id, r.status, r.body)
		}
	}
	for _, tc := range []struct {
		first string
		sizes []int
	}{
		{"/plants", []int{20, 20, 5}},
		{"/plants?limit=10", []int{10, 10, 10, 10, 5}},
		{"/plants?limit=15", []int{15, 15, 15}}, // exactly full: no link on the last page
		{"/plants?limit=100", []int{45}},
		{"/plants?limit=1", slices.Repeat([]int{1}, 45)},
	} {
		pages := walkPlants(g, tc.first, readerToken, nil)
		var all []int64
		var sizes []int
		for _, p := range pages {
			all = append(all, p...)
			sizes = append(sizes, len(p))
		}
		if !slices.Equal(all, want) || !slices.Equal(sizes, tc.sizes) {
			t.Errorf("%s: ids %v in pages %v; want %v in pages %v", tc.first, all, sizes, want, tc.sizes)
		}
	}

	// The next link keeps the limit and carries a cursor; altering any
	// character of the cursor makes it refused.
	r := g.call("GET", "/plants?limit=3", readerToken)
	m := linkRE.FindStringSubmatch(r.header.Get("Link"))
	if m == nil || m[1] != "3" || len(m[2]) != 34 {
		t.Fatalf("Link %q: want limit 3 and a 34-character cursor", r.header.Get("Link"))
	}
	cursor := m[2]
	next := g.call("GET", "/plants?limit=3&cursor="+cursor, readerToken)
	if ids := idsOf(t, next.body); !slices.Equal(ids, want[3:6]) {
		t.Fatalf("second page %v, want %v", ids, want[3:6])
	}
	// The cursor works with another limit too.
	if r := g.call("GET", "/plants?cursor="+cursor+"&limit=2", readerToken); !slices.Equal(idsOf(t, r.body), want[3:5]) {
		t.Fatalf("cursor with limit 2: %s", r.body)
	}
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
	for i := range cursor {
		alt := alphabet[(strings.IndexByte(alphabet, cursor[i])+1)%len(alphabet)]
		tampered := cursor[:i] + string(alt) + cursor[i+1:]
		r := g.call("GET", "/plants?limit=3&cursor="+tampered, readerToken)
		if r.status != 400 || r.body != errorBody(40016, "cursor is not valid: pass the cursor of a Link header unchanged") {
			t.Fatalf("cursor altered at %d (%s): %d %s", i, tampered, r.status, r.body)
		}
	}
	for _, c := range []string{cursor + "A", cursor[:33], cursor + "=", strings.Repeat("A", 34)} {
		if r := g.call("GET", "/plants?cursor="+c, readerToken); r.status != 400 || !strings.Contains(r.body, "40016") {
			t.Fatalf("cursor %q: %d %s", c, r.status, r.body)
		}
	}
	if r := g.call("GET", "/plants?cursor="+cursor+"&cursor="+cursor, readerToken); r.status != 400 || !strings.Contains(r.body, "40016") {
		t.Fatalf("two cursors: %d %s", r.status, r.body)
	}

	// Another store signs with another key: its cursors are refused here.
	other := newGateway(t, gatewayOptions{})
	other.mustCreate(`{"id":1,"name":"n1"}`, `{"id":2,"name":"n2"}`)
	foreign := linkRE.FindStringSubmatch(other.call("GET", "/plants?limit=1", readerToken).header.Get("Link"))
	if foreign == nil {
		t.Fatal("no link from the other gateway")
	}
	if r := g.call("GET", "/plants?cursor="+foreign[2], readerToken); r.status != 400 || !strings.Contains(r.body, "40016") {
		t.Fatalf("foreign cursor: %d %s", r.status, r.body)
	}
}

// TestListAcrossGateways: two gateways on one store (a fleet) accept each
// other's cursors, so a walk may go on through either.
func TestListAcrossGateways(t *testing.T) {
	t.Parallel()
	a := newGateway(t, gatewayOptions{})
	b := newGateway(t, gatewayOptions{redisURL: "redis://" + a.mr.Addr(), keyPrefix: "fleet:"})
	a2 := newGateway(t, gatewayOptions{redisURL: "redis://" + a.mr.Addr(), keyPrefix: "fleet:"})
	a2.mustCreate(`{"id":1,"name":"n1"}`, `{"id":2,"name":"n2"}`, `{"id":3,"name":"n3"}`)
	m := linkRE.FindStringSubmatch(a2.call("GET", "/plants?limit=2", readerToken).header.Get("Link"))
	if m == nil {
		t.Fatal("no next link")
	}
	r := b.call("GET", "/plants?limit=2&cursor="+m[2], readerToken)
	if r.status != 200 || r.body != `[{"id":3,"name":"n3"}]` || r.header.Get("Link") != "" {
		t.Fatalf("page 2 through the other gateway: %d %s (Link %q)", r.status, r.body, r.header.Get("Link"))
	}
}

// TestListUnderWrites pages through the list, following Link headers, while
// other clients create and delete between (and during) the pages: no walk
// returns an id twice, and every walk returns every plant that existed
// throughout.
func TestListUnderWrites(t *testing.T) {
	t.Parallel()
	g := newGateway(t, gatewayOptions{authOnly: true})
	var stable []int64
	for id := int64(-150); id < 150; id += 5 {
		stable = append(stable, id)
		g.mustCreate(fmt.Sprintf(`{"id":%d,"name":"n%d"}`, id, id))
	}
	stop := make(chan struct{})
	wrote := make(chan struct{}, 1)
	var wg sync.WaitGroup
	for w := range 2 {
		wg.Go(func() {
			prev := int64(-1)
			for i := int64(0); ; i++ {
				id := -151 + (i*13+int64(w)*7)%300
				if id%5 == 0 {
					id++
				}
				if r := g.post(fmt.Sprintf(`{"id":%d,"name":"n%d"}`, id, id)); r.status != 200 {
					t.Errorf("churn create %d: %d %s", id, r.status, r.body)
					return
				}
				if i > 0 {
					if r := g.call("DELETE", fmt.Sprintf("/plants/%d", prev), adminToken); r.status != 204 && r.status != 404 {
						t.Errorf("churn delete %d: %d %s", prev, r.status, r.body)
						return
					}
				}
				prev = id
				select {
				case wrote <- struct{}{}:
				default:
				}
				select {
				case <-stop:
					return
				default:
				}
			}
		})
	}
	defer func() { close(stop); wg.Wait() }()
	for range 3 {
		pages := walkPlants(g, "/plants?limit=7", readerToken, func() { <-wrote })
		var seen []int64
		for _, p := range pages {
			for _, id := range p {
				if n := len(seen); n > 0 && id <= seen[n-1] {
					t.Fatalf("id %d after %d: repeated or out of order", id, seen[n-1])
				}
				seen = append(seen, id)
			}
		}
		for _, id := range stable {
			if _, ok := slices.BinarySearch(seen, id); !ok {
				t.Fatalf("walk skipped id %d, which existed throughout", id)
			}
		}
	}
}

// TestAuthorizeSeesOperation: an authorize plugin is shown the method, the
// path, the route template and the path id of every operation.
func TestAuthorizeSeesOperation(t *testing.T) {
	t.Parallel()
	g := newGateway(t, gatewayOptions{extra: []string{"05-operation.wasm=" + operationPlugin}})
	for _, c := range []struct{ method, path, want string }{
		{"GET", "/plants", `method=GET path=/plants route="GET /plants" id=0 has_id=false`},
		{"GET", "/plants?limit=5", `method=GET path=/plants route="GET /plants" id=0 has_id=false`},
		{"POST", "/plants", `method=POST path=/plants route="POST /plants" id=0 has_id=false`},
		{"GET", "/plants/-42", `method=GET path=/plants/-42 route="GET /plants/{id}" id=-42 has_id=true`},
		{"DELETE", "/plants/9223372036854775807", `method=DELETE path=/plants/9223372036854775807 route="DELETE /plants/{id}" id=9223372036854775807 has_id=true`},
		{"DELETE", "/plants/x", `method=DELETE path=/plants/x route="DELETE /plants/{id}" id=0 has_id=false`},
	} {
		req, _ := nethttp.NewRequest(c.method, "http://plantgate.test"+c.path, nil)
		req.Header.Set("Authorization", "Bearer "+adminToken)
		if c.method == "POST" {
			req = newPost(`{"id":1,"name":"n"}`, "Bearer "+adminToken, "application/json")
		}
		r := g.do(req)
		if want := errorBody(40399, c.want); r.status != 403 || r.body != want {
			t.Errorf("%s %s: %d %s\nwant 403 %s", c.method, c.path, r.status, r.body, want)
		}
	}
}

// TestDeleteRecordsOneEvent: the outbox gets a plant.deleted event for a
// delete answered 204 and none for one answered 404.
func TestDeleteRecordsOneEvent(t *testing.T) {
	t.Parallel()
	g := newGateway(t, gatewayOptions{})
	if err := g.store.RecordEvents(context.Background()); err != nil { // as a webhook endpoint does
		t.Fatal(err)
	}
	g.mustCreate(`{"id":8,"name":"n8"}`)
	if r := g.call("DELETE", "/plants/8", adminToken); r.status != 204 {
		t.Fatalf("delete: %d %s", r.status, r.body)
	}
	if r := g.call("DELETE", "/plants/8", adminToken); r.status != 404 {
		t.Fatalf("delete again: %d %s", r.status, r.body)
	}
	var events []string
	for _, stream := range g.store.EventStreams() {
		if !g.mr.Exists(stream) {
			continue
		}
		entries, err := g.mr.Stream(stream)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range entries {
			events = append(events, fmt.Sprint(e.Values[1], " ", e.Values[5]))
		}
	}
	if want := []string{`plant.created {"id":8,"name":"n8"}`, `plant.deleted {"id":8}`}; !slices.Equal(events, want) {
		t.Fatalf("events %q, want %q", events, want)
	}
}

// TestHeadIsGet: HEAD /plants/{id} and HEAD /plants are authorized as the
// GET operation (plants:read) and answer GET's status and headers, no body.
func TestHeadIsGet(t *testing.T) {
	t.Parallel()
	g := newGateway(t, gatewayOptions{})
	g.mustCreate(`{"id":5,"name":"n5"}`, `{"id":6,"name":"n6"}`)
	for _, c := range []struct {
		path, token string
		status      int
		link        bool
	}{
		{"/plants/5", readerToken, 200, false},
		{"/plants/7", readerToken, 404, false},
		{"/plants/5", writerToken, 403, false},
		{"/plants?limit=1", readerToken, 200, true},
	} {
		req, _ := nethttp.NewRequest(nethttp.MethodHead, "http://plantgate.test"+c.path, nil)
		req.Header.Set("Authorization", "Bearer "+c.token)
		resp, err := g.srv.App().Test(req, -1)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != c.status || len(body) != 0 || (resp.Header.Get("Link") != "") != c.link {
			t.Errorf("HEAD %s: %d, %d body bytes, Link %q; want %d, none, link %v", c.path, resp.StatusCode, len(body), resp.Header.Get("Link"), c.status, c.link)
		}
	}
}

// TestValidateOnlyOnCreate: validate plugins run for creates only. A plant
// that the hostile validate plugin panics on (stored behind the chain's
// back) reads, lists and deletes fine, while creating it fails closed.
func TestValidateOnlyOnCreate(t *testing.T) {
	t.Parallel()
	g := newGateway(t, gatewayOptions{authOnly: true, extra: []string{"30-hostile.wasm=" + hostilePlugin}})
	if _, err := g.store.CreatePlant(context.Background(), host.Plant{ID: 1, Name: "panic"}); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		method, path string
		status       int
		body         string
	}{
		{"GET", "/plants/1", 200, `{"id":1,"name":"panic"}`},
		{"GET", "/plants", 200, `[{"id":1,"name":"panic"}]`},
		{"DELETE", "/plants/1", 204, ""},
	} {
		if r := g.call(c.method, c.path, adminToken); r.status != c.status || r.body != c.body {
			t.Errorf("%s %s: %d %s, want %d %s", c.method, c.path, r.status, r.body, c.status, c.body)
		}
	}
	if r := g.post(`{"id":1,"name":"panic"}`); r.status != 500 || r.body != errorBody(50001, "policy plugin failed; request denied") {
		t.Errorf("create: %d %s, want the hostile plugin's fault", r.status, r.body)
	}
}
