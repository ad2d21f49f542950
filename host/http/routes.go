package http

import (
	"strings"

	"github.com/gofiber/fiber/v2"
)

// routeTable is what metrics and the Allow header know of the API's paths.
// It is read from the routes registered on the app, so a new route brings
// its metrics label and its Allow value with it.
//
// Routing is case-sensitive and strict (Fiber's CaseSensitive and
// StrictRouting): the spec names /plants exactly, so /PLANTS, /plants/ and
// //plants are other paths, answered 404, and no alias of a route gets
// past a rule written for the route.
type routeTable []apiRoute

type apiRoute struct {
	path  string // as registered, e.g. "/plants" or "/plants/:id"
	label string // path as the OpenAPI document writes it, e.g. "/plants/{id}": the metrics label
	allow string // its methods in Fiber's order, e.g. "GET, HEAD"
}

func newRouteTable(app *fiber.App) routeTable {
	var t routeTable
	seen := map[string]int{}
	for _, r := range app.GetRoutes(true) {
		if i, ok := seen[r.Path]; ok {
			t[i].allow += ", " + r.Method
			continue
		}
		seen[r.Path] = len(t)
		t = append(t, apiRoute{path: r.Path, label: templatePath(r.Path), allow: r.Method})
	}
	return t
}

// find returns the route whose path matches path, or nil.
func (t routeTable) find(path string) *apiRoute {
	for i := range t {
		if matchPath(t[i].path, path) {
			return &t[i]
		}
	}
	return nil
}

// label is the metrics label of path: its route's template, or "other", so that
// scanning random paths cannot grow the label set. It never returns path
// itself: Fiber's path aliases a buffer the next request reuses, and a
// label outlives the request.
func (t routeTable) label(path string) string {
	if r := t.find(path); r != nil {
		return r.label
	}
	return "other"
}

// allow is the Allow header for path, which exists under other methods.
func (t routeTable) allow(path string) string {
	if r := t.find(path); r != nil {
		return r.allow
	}
	return ""
}

// templatePath writes a Fiber pattern's :parameter segments as the OpenAPI
// document's {parameter}: "/plants/:id" → "/plants/{id}".
func templatePath(pattern string) string {
	segs := strings.Split(pattern, "/")
	for i, seg := range segs {
		if name, ok := strings.CutPrefix(seg, ":"); ok {
			segs[i] = "{" + name + "}"
		}
	}
	return strings.Join(segs, "/")
}

// matchPath reports whether path matches a route pattern segment by
// segment: equal, or any non-empty segment where the pattern has a
// :parameter. (The API uses no other Fiber pattern syntax.) It allocates
// nothing: it runs for every request.
func matchPath(pattern, path string) bool {
	for {
		p, prest, pmore := strings.Cut(pattern, "/")
		s, rest, more := strings.Cut(path, "/")
		if pmore != more {
			return false
		}
		if strings.HasPrefix(p, ":") {
			if s == "" {
				return false
			}
		} else if p != s {
			return false
		}
		if !more {
			return true
		}
		pattern, path = prest, rest
	}
}
