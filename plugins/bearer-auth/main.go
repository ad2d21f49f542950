// Command bearer-auth is an authorize-phase plugin: it accepts a request
// whose bearer token is in the host's token store, is neither revoked nor
// expired, and holds the scope its operation needs.
//
// Decisions, in the order they are checked:
//
//	code   status  when
//	40150  401     no bearer token
//	40151  401     the token is unknown (or the store's record is for another digest)
//	40152  401     the token is revoked
//	40153  401     the token is expired
//	50350  503     the token store is unavailable (retryable)
//	40351  403     no scope is configured for the route: unknown routes are denied
//	40350  403     the token lacks the route's scope
//	allow          as the token's name
//
// Config, optional; the default is exactly
//
//	{"scopes": {
//	  "GET /plants":         "plants:read",
//	  "POST /plants":        "plants:write",
//	  "GET /plants/{id}":    "plants:read",
//	  "DELETE /plants/{id}": "plants:delete"
//	}}
//
// Each key is a route as the host names the operation (sdk.Request.Route:
// a method and the OpenAPI path template separated by one space; a HEAD
// request names the GET route), each value the scope a token needs for it.
// With a host that does not name the operation, the key is matched against
// the request's method and path instead. A config with "scopes" replaces
// the default map, so {"scopes": {}} denies every route.
//
// Build: GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -o bearer-auth.wasm ./plugins/bearer-auth
package main

import (
	"bytes"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/plantgate/plantgate/sdk"
)

// Deny codes.
const (
	codeMissing     int32 = 40150
	codeInvalid     int32 = 40151
	codeRevoked     int32 = 40152
	codeExpired     int32 = 40153
	codeUnavailable int32 = 50350
	codeLacksScope  int32 = 40350
	codeNoRoute     int32 = 40351
)

// route is one operation ("METHOD /path/{template}") and the scope it needs.
type route struct {
	key, method, path, scope string
	lacks                    string // the deny message, built once so denying does not allocate
}

var defaultScopes = map[string]string{
	"GET /plants":         "plants:read",
	"POST /plants":        "plants:write",
	"GET /plants/{id}":    "plants:read",
	"DELETE /plants/{id}": "plants:delete",
}

// routes is the config in force, sorted by method and path.
var routes = mustRoutes(defaultScopes)

// now is the clock; tests replace it.
var now = time.Now

func init() {
	sdk.HandleConfigure(configure)
	sdk.HandleAuthorize(authorize)
}

func main() {}

func authorize(r sdk.Request) sdk.Decision {
	if r.Credential == "" {
		return sdk.Deny(codeMissing, "missing bearer token")
	}
	// The host sends the digest with the request: hashing here would cost
	// more than the rest of this function.
	sum := r.CredentialDigest()
	tok, err := sdk.LookupToken(sum)
	switch {
	case errors.Is(err, sdk.ErrTokenNotFound):
		return sdk.Deny(codeInvalid, "invalid token")
	case errors.Is(err, sdk.ErrUnavailable):
		sdk.Log(sdk.LevelWarn, "token store unavailable")
		return sdk.Deny(codeUnavailable, "token store unavailable")
	case err != nil:
		return sdk.Fault(err.Error())
	}
	if subtle.ConstantTimeCompare(sum[:], tok.Digest[:]) != 1 {
		sdk.Log(sdk.LevelWarn, "token store returned a record for another digest")
		return sdk.Deny(codeInvalid, "invalid token")
	}
	if tok.Revoked {
		return sdk.Deny(codeRevoked, "token revoked")
	}
	// The clock only for a token that expires: reading it is two calls out
	// of the guest (wall and monotonic time), a tenth of this function.
	if !tok.Expires.IsZero() && tok.Expired(now()) {
		return sdk.Deny(codeExpired, "token expired")
	}
	rt := find(r)
	if rt == nil {
		if r.Route != "" {
			return sdk.Deny(codeNoRoute, "no scope is configured for "+r.Route)
		}
		return sdk.Deny(codeNoRoute, "no scope is configured for "+r.Method+" "+r.Path)
	}
	if !tok.HasScope(rt.scope) {
		return sdk.Deny(codeLacksScope, rt.lacks)
	}
	return sdk.AllowAs(tok.Name)
}

// find returns the route of r's operation, or nil: by the route the host
// names, or by method and path from a host that names none. A linear scan:
// a plugin has a handful of routes, and it does not allocate.
func find(r sdk.Request) *route {
	for i := range routes {
		rt := &routes[i]
		if r.Route != "" && rt.key == r.Route ||
			// A template matches operations only, never a path spelt like it.
			r.Route == "" && rt.method == r.Method && rt.path == r.Path && !strings.Contains(rt.path, "{") {
			return rt
		}
	}
	return nil
}

func configure(raw []byte) error {
	rs, err := parseConfig(raw)
	if err != nil {
		return fmt.Errorf("bearer-auth config: %w", err)
	}
	routes = rs
	return nil
}

func parseConfig(raw []byte) ([]route, error) {
	if raw = bytes.TrimSpace(raw); len(raw) == 0 || string(raw) == "null" {
		return parseScopes(defaultScopes)
	}
	var c struct {
		Scopes map[string]string `json:"scopes"`
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&c); err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("data after the config object")
	}
	if c.Scopes == nil {
		return parseScopes(defaultScopes)
	}
	return parseScopes(c.Scopes)
}

// parseScopes checks each "METHOD /path": "scope" entry.
func parseScopes(scopes map[string]string) ([]route, error) {
	var rs []route
	for _, key := range slices.Sorted(maps.Keys(scopes)) {
		scope := scopes[key]
		method, path, ok := strings.Cut(key, " ")
		if !ok || method == "" || !strings.HasPrefix(path, "/") || strings.ContainsAny(key, "\t\r\n") || strings.Contains(path, " ") {
			return nil, fmt.Errorf("scopes key %q must be a method and a path separated by one space, like \"POST /plants\"", key)
		}
		if method != strings.ToUpper(method) {
			return nil, fmt.Errorf("scopes key %q: method must be upper case", key)
		}
		if scope == "" || strings.ContainsAny(scope, " \t\r\n") {
			return nil, fmt.Errorf("scopes[%q] must be one non-empty scope without spaces, got %q", key, scope)
		}
		rs = append(rs, route{key: key, method: method, path: path, scope: scope, lacks: "token lacks scope " + scope})
	}
	return rs, nil
}

func mustRoutes(scopes map[string]string) []route {
	rs, err := parseScopes(scopes)
	if err != nil {
		panic(err)
	}
	return rs
}
