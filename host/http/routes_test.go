package http_test

import (
	"io"
	nethttp "net/http"
	"strings"
	"testing"
	"time"
)

// TestNearMissRoutes: routing is case-sensitive and strict, as the spec
// names its paths exactly. A path that differs from a route in case, a
// trailing slash, a doubled slash or a dot segment is another path (404);
// a route under a method it lacks is 405 with the route's Allow. The
// metrics label is the route's own template ("/plants/{id}" for every id,
// valid or not), or "other": never the request's path.
func TestNearMissRoutes(t *testing.T) {
	t.Parallel()
	var label string
	srv, _ := newDoubleApp(t, func(route string, _ int, _ time.Duration) { label = route })
	const plant = `{"id":1,"name":"a"}`
	notFound := errorBody(40401, "no such route")
	notAllowed := errorBody(40501, "method not allowed on this route")
	noPlant42 := errorBody(40402, "no plant with id 42")
	badID := errorBody(40017, "plant id must be an integer from -9223372036854775808 to 9223372036854775807")
	cases := []struct {
		method, target string
		status         int
		body, allow    string
		label          string
	}{
		{"POST", "/plants", 200, `{"name":"a"}`, "", "/plants"},
		{"POST", "/plants?x", 200, `{"name":"a"}`, "", "/plants"},
		{"POST", "/PLANTS", 404, notFound, "", "other"},
		{"POST", "/Plants", 404, notFound, "", "other"},
		{"POST", "/plants/", 404, notFound, "", "other"},
		{"POST", "//plants", 404, notFound, "", "other"},
		{"POST", "/plants//", 404, notFound, "", "other"},
		{"POST", "/plants/../plants", 404, notFound, "", "other"},
		{"POST", "/./plants", 404, notFound, "", "other"},
		{"POST", "/%70lants", 404, notFound, "", "other"},
		{"POST", "/plants%2F", 404, notFound, "", "other"},
		{"POST", "/plantsx", 404, notFound, "", "other"},
		{"POST", "/plants/1", 405, notAllowed, "GET, HEAD, DELETE", "/plants/{id}"},
		{"GET", "/plants", 200, "[]", "", "/plants"},
		{"GET", "/plants?x=1", 200, "[]", "", "/plants"},
		{"HEAD", "/plants", 200, "", "", "/plants"},
		{"DELETE", "/plants", 405, notAllowed, "GET, HEAD, POST", "/plants"},
		{"OPTIONS", "/plants", 405, notAllowed, "GET, HEAD, POST", "/plants"},
		{"GET", "/plants/", 404, notFound, "", "other"},
		{"DELETE", "/plants/", 404, notFound, "", "other"},
		{"GET", "/plants/42", 404, noPlant42, "", "/plants/{id}"},
		{"GET", "/plants/-1", 404, errorBody(40402, "no plant with id -1"), "", "/plants/{id}"},
		{"DELETE", "/plants/42", 404, noPlant42, "", "/plants/{id}"},
		{"GET", "/plants/abc", 400, badID, "", "/plants/{id}"},
		{"DELETE", "/plants/abc", 400, badID, "", "/plants/{id}"},
		{"PUT", "/plants/1", 405, notAllowed, "GET, HEAD, DELETE", "/plants/{id}"},
		{"GET", "/plants/42/", 404, notFound, "", "other"},
		{"GET", "/plants/1/2", 404, notFound, "", "other"},
		{"GET", "/PLANTS/42", 404, notFound, "", "other"},
		{"GET", "/Plants/42", 404, notFound, "", "other"},
		{"GET", "//plants/42", 404, notFound, "", "other"},
		{"GET", "/openapi.yml", 404, notFound, "", "other"},
		{"GET", "/PLANTS", 404, notFound, "", "other"},
		{"GET", "/openapi.yaml", 200, "", "", "/openapi.yaml"},
		{"POST", "/openapi.yaml", 405, notAllowed, "GET, HEAD", "/openapi.yaml"},
		{"GET", "/openapi.yaml/", 404, notFound, "", "other"},
		{"GET", "/OpenAPI.yaml", 404, notFound, "", "other"},
		{"GET", "/healthz", 200, `{"status":"ok"}`, "", "/healthz"},
		{"GET", "/healthz/", 404, notFound, "", "other"},
		{"GET", "/HEALTHZ", 404, notFound, "", "other"},
		{"PUT", "/readyz", 405, notAllowed, "GET, HEAD", "/readyz"},
		{"GET", "/", 404, notFound, "", "other"},
	}
	for _, c := range cases {
		var body io.Reader
		if c.method == "POST" {
			body = strings.NewReader(plant)
		}
		req, _ := nethttp.NewRequest(c.method, "http://x"+c.target, body)
		req.Header.Set("Content-Type", "application/json")
		resp, err := srv.App().Test(req, -1)
		if err != nil {
			t.Fatalf("%s %s: %v", c.method, c.target, err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		got := string(b)
		if c.target == "/openapi.yaml" && c.status == 200 {
			got = "" // the document itself; TestOpenAPIDocumentIsValid reads it
		}
		if resp.StatusCode != c.status || got != c.body || resp.Header.Get("Allow") != c.allow || label != c.label {
			t.Errorf("%s %s: got %d %.200s, Allow %q, label %q; want %d %s, Allow %q, label %q",
				c.method, c.target, resp.StatusCode, got, resp.Header.Get("Allow"), label, c.status, c.body, c.allow, c.label)
		}
	}
}
