package http

import "testing"

// TestRouteLabels: every plant path is one of a few labels, so that ids in
// paths cannot grow the metrics' label set.
func TestRouteLabels(t *testing.T) {
	t.Parallel()
	for path, want := range map[string]string{
		"/plants":      "/plants",
		"/plants/42":   "/plants/{id}",
		"/plants/-1":   "/plants/{id}",
		"/plants/x":    "/plants/{id}",
		"/plants/":     "other",
		"/plants/1/2":  "other",
		"/healthz":     "/healthz",
		"/openapi.yml": "other",
	} {
		if got := route(path); got != want {
			t.Errorf("route(%q) = %q, want %q", path, got, want)
		}
	}
}
