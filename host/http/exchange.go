package http

import (
	"context"
	"net/netip"

	"github.com/gofiber/fiber/v2"

	"github.com/plantgate/plantgate/host"
)

// plantContext is a plant operation's context: bounded by the request
// timeout, and carrying the request's host.Exchange, through which the
// policy chain sees the request id, client address and headers, shares the
// principal and leaves response headers. Pair it with respond:
//
//	ctx, x, cancel := s.plantContext(c)
//	defer s.respond(c, x, cancel)
func (s *Server) plantContext(c *fiber.Ctx) (context.Context, *host.Exchange, context.CancelFunc) {
	ctx, x := host.NewExchange(c.UserContext())
	// Borrowed, not copied: the chain reads it only while the handler runs.
	x.RequestID = c.GetRespHeader(HeaderRequestID)
	x.Header = &c.Request().Header
	if ip, ok := netip.AddrFromSlice(c.Context().RemoteIP()); ok {
		x.Client = ip.Unmap()
	}
	ctx, cancel := context.WithTimeout(ctx, s.cfg.RequestTimeout)
	return ctx, x, cancel
}

// respond ends a plant operation: it adds the response headers the chain's
// decisions asked for (allow or deny alike; the allow-list was checked when
// the decision was read) and cancels its context. The ErrorHandler runs
// after it and keeps them: a plugin's Retry-After wins over the default one.
func (s *Server) respond(c *fiber.Ctx, x *host.Exchange, cancel context.CancelFunc) {
	cancel()
	for _, h := range x.ResponseHeaders() {
		c.Response().Header.Set(h.Name, h.Value)
	}
}
