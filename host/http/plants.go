package http

import (
	"context"
	"strconv"

	"github.com/gofiber/fiber/v2"

	"github.com/plantgate/plantgate/host"
	"github.com/plantgate/plantgate/host/jsonenc"
)

// Page sizes of GET /plants.
const (
	defaultLimit = 20
	maxLimit     = 100
)

var (
	errBadLimit   = &host.Error{Code: host.ErrBadLimit, Message: "limit must be an integer from 1 to 100"}
	errBadPlantID = &host.Error{Code: host.ErrBadPlantID, Message: "plant id must be an integer from -9223372036854775808 to 9223372036854775807"}
)

// authorize names the request's operation (Operation), parses the
// credential and runs the authorize chain, before anything else of the
// request is looked at. It returns the request the chain judged and the
// principal, which it records for the access log.
func (s *Server) authorize(ctx context.Context, c *fiber.Ctx) (host.AuthorizeRequest, string, error) {
	route, id, hasID, ok := Operation(c.Method(), c.Path())
	if !ok {
		return host.AuthorizeRequest{}, "", errUnresolved
	}
	r := host.AuthorizeRequest{Method: c.Method(), Path: c.Path(), Route: route, PathID: id, HasPathID: hasID}
	if !s.cfg.InsecureNoAuth {
		var err error
		if r.Credential, err = ParseBearer(c.Request().Header.PeekAll(fiber.HeaderAuthorization)); err != nil {
			return r, "", err
		}
		if err := s.resolve(ctx, r.Credential); err != nil {
			return r, "", err
		}
	}
	principal, err := s.cfg.Policy.Authorize(ctx, r)
	if principal != "" {
		c.Locals(localPrincipal, principal)
	}
	return r, principal, err
}

// resolve hands the credential to the Credentials resolver, if any: one it
// refuses is answered here (401, or 503 while it cannot check), one it
// resolves answers the chain's token lookups of its digest
// (host.Exchange.SetCredential), and any other goes to the chain as it is.
func (s *Server) resolve(ctx context.Context, credential string) error {
	if s.cfg.Credentials == nil {
		return nil
	}
	t, until, ok, err := s.cfg.Credentials.Resolve(ctx, credential)
	if err != nil || !ok {
		return err
	}
	if x := host.ExchangeFrom(ctx); x != nil {
		x.SetCredential(t, until)
	}
	return nil
}

// authorizePlantID authorizes an operation on /plants/{id} and then
// returns the id, or ErrBadPlantID when it is not an int64: the credential
// is judged before anything else of the request.
func (s *Server) authorizePlantID(ctx context.Context, c *fiber.Ctx) (int64, error) {
	r, _, err := s.authorize(ctx, c)
	if err != nil {
		return 0, err
	}
	if !r.HasPathID {
		return 0, errBadPlantID
	}
	return r.PathID, nil
}

func (s *Server) listPlants(c *fiber.Ctx) error {
	ctx, x, cancel := s.plantContext(c)
	defer s.respond(c, x, cancel)
	if _, _, err := s.authorize(ctx, c); err != nil {
		return err
	}
	limit, after, err := s.pageQuery(ctx, c.Context().QueryArgs())
	if err != nil {
		return err
	}
	page, err := s.cfg.Store.Plants(ctx, after, limit)
	if err != nil {
		return err
	}
	if page.More {
		next, err := s.cursors.encode(ctx, page.Last)
		if err != nil {
			return err
		}
		c.Set(fiber.HeaderLink, "</plants?limit="+strconv.Itoa(limit)+"&cursor="+next+`>; rel="next"`)
	}
	c.Set(fiber.HeaderContentType, fiber.MIMEApplicationJSON)
	return c.Send(AppendPlantList(make([]byte, 0, 16+64*len(page.Plants)), page.Plants))
}

// queryArgs is what pageQuery reads; fasthttp's *Args has it.
type queryArgs interface {
	Has(key string) bool
	PeekMulti(key string) [][]byte
}

// pageQuery reads limit and cursor. Each may be given once; a second value
// is refused rather than one of them silently chosen.
func (s *Server) pageQuery(ctx context.Context, q queryArgs) (limit int, after *int64, err error) {
	limit = defaultLimit
	if q.Has("limit") {
		vs := q.PeekMulti("limit")
		if len(vs) != 1 {
			return 0, nil, errBadLimit
		}
		n, err := strconv.ParseUint(string(vs[0]), 10, 8)
		if err != nil || n < 1 || n > maxLimit {
			return 0, nil, errBadLimit
		}
		limit = int(n)
	}
	if q.Has("cursor") {
		vs := q.PeekMulti("cursor")
		if len(vs) != 1 {
			return 0, nil, errBadCursor
		}
		id, err := s.cursors.decode(ctx, string(vs[0]))
		if err != nil {
			return 0, nil, err
		}
		after = &id
	}
	return limit, after, nil
}

func (s *Server) getPlant(c *fiber.Ctx) error {
	ctx, x, cancel := s.plantContext(c)
	defer s.respond(c, x, cancel)
	id, err := s.authorizePlantID(ctx, c)
	if err != nil {
		return err
	}
	p, err := s.cfg.Store.Plant(ctx, id)
	if err != nil {
		return err
	}
	c.Set(fiber.HeaderContentType, fiber.MIMEApplicationJSON)
	return c.Send(jsonenc.AppendStoredPlant(make([]byte, 0, 64+len(p.Name)+len(p.Tag)), p))
}

func (s *Server) deletePlant(c *fiber.Ctx) error {
	ctx, x, cancel := s.plantContext(c)
	defer s.respond(c, x, cancel)
	id, err := s.authorizePlantID(ctx, c)
	if err != nil {
		return err
	}
	if err := s.cfg.Store.DeletePlant(ctx, id); err != nil {
		return err
	}
	c.Status(fiber.StatusNoContent)
	return nil
}
