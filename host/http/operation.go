package http

import (
	"errors"
	"strconv"
	"strings"

	"github.com/gofiber/fiber/v2"
)

// The operations, as authorize plugins see them (host.AuthorizeRequest.Route):
// the method and the OpenAPI path template. A HEAD request is a GET.
const (
	routeListPlants  = "GET /plants"
	routeCreatePlant = "POST /plants"
	routeGetPlant    = "GET /plants/{id}"
	routeDeletePlant = "DELETE /plants/{id}"
)

// plantsPrefix starts every /plants/{id} path.
const plantsPrefix = "/plants/"

// Operation names the API operation of a request as the gateway shows it to
// authorize plugins (host.AuthorizeRequest's Route, PathID and HasPathID).
// Every plant request is resolved through it, and `plantgate plugin run`
// resolves its input through it too: one resolver, so that a dry run and
// the gateway cannot name an operation differently.
//
//	Operation("HEAD", "/plants/+7") // "GET /plants/{id}", 7, true, true
//	Operation("DELETE", "/plants/x") // "DELETE /plants/{id}", 0, false, true
//	Operation("PUT", "/plants/7")   // "", 0, false, false
//
// # Notes
//
//   - method is the request method; a HEAD names the GET route.
//   - path is the request path as it came on the wire: not unescaped, no
//     query, and matched as the router matches it, case-sensitively and
//     strictly (/plants/, /PLANTS and /plants/7/ are no operation).
//   - For /plants/{id}, hasID says whether the segment is a decimal int64
//     as strconv.ParseInt reads it ("007", "+7" and "-0" are 7, 7 and 0),
//     and id is that int64. A segment that is not one ("x", "%37", out of
//     range) is still the operation, with id 0 and hasID false: the gateway
//     answers it 400 40017 after the authorize chain has judged the
//     credential.
//   - ok is false where the gateway answers 404 or 405 before any plugin
//     runs.
//   - It allocates only for a segment that is no int64 (strconv's error).
func Operation(method, path string) (route string, id int64, hasID, ok bool) {
	if method == fiber.MethodHead {
		method = fiber.MethodGet
	}
	if path == "/plants" {
		switch method {
		case fiber.MethodGet:
			return routeListPlants, 0, false, true
		case fiber.MethodPost:
			return routeCreatePlant, 0, false, true
		}
		return "", 0, false, false
	}
	seg, found := strings.CutPrefix(path, plantsPrefix)
	if !found || seg == "" || strings.IndexByte(seg, '/') >= 0 {
		return "", 0, false, false
	}
	switch method {
	case fiber.MethodGet:
		route = routeGetPlant
	case fiber.MethodDelete:
		route = routeDeletePlant
	default:
		return "", 0, false, false
	}
	id, err := strconv.ParseInt(seg, 10, 64)
	if err != nil {
		return route, 0, false, true // ParseInt's clamped value is no id
	}
	return route, id, true, true
}

// errUnresolved fails closed a request that the router sent to a plant
// handler but Operation names no operation of: the two disagree, a bug, and
// no plugin can judge an operation without a name. It is no *host.Error, so
// handleError logs it with the method and path and answers 500 50003.
var errUnresolved = errors.New("the router and Operation disagree: no operation to authorize")
