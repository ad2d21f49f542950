// Package http serves the Plant Store API with Fiber: the routes, the
// request path of each plant operation, the one ErrorHandler that turns
// every error into the documented Error body, and the embedded OpenAPI
// document.
package http

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"time"

	"github.com/gofiber/fiber/v2"
	"go.opentelemetry.io/otel/trace"

	"github.com/plantgate/plantgate/host"
)

// OpenAPI is the OpenAPI 3.1 document of the service, served at GET /openapi.yaml.
//
//go:embed openapi.yaml
var OpenAPI []byte

// Config configures a Server. The zero value of every optional field means
// its default; see configDefault.
type Config struct {
	// Store keeps plants. Required.
	Store host.Store

	// Policy is the plugin chain. Required; a chain without plugins allows all.
	Policy host.Policy

	// InsecureNoAuth serves requests without a bearer credential. Only for a
	// chain without authorize plugins, and only when asked for explicitly.
	//
	// Optional. Default: false (a bearer credential is required).
	InsecureNoAuth bool

	// BodyLimit is the largest request body accepted, in bytes.
	//
	// Optional. Default: 1048576 (1 MiB).
	BodyLimit int

	// RequestTimeout bounds the plugin chain and the store for one request.
	//
	// Optional. Default: 5s.
	RequestTimeout time.Duration

	// ReadTimeout, WriteTimeout and IdleTimeout bound slow clients.
	//
	// Optional. Default: 10s, 10s, 60s.
	ReadTimeout  time.Duration
	WriteTimeout time.Duration
	IdleTimeout  time.Duration

	// Ready reports whether the gateway can serve; GET /readyz answers 503
	// while it returns an error. The store's Ping is always checked too.
	//
	// Optional. Default: nil (the store alone decides).
	Ready func(context.Context) error

	// Logger receives one line per request and every server-side failure.
	//
	// Optional. Default: slog.Default().
	Logger *slog.Logger

	// AccessLog writes one line per request at Info level.
	//
	// Optional. Default: false.
	AccessLog bool

	// CursorKey returns the key that signs the cursors of GET /plants; it
	// is called on first need until it succeeds (an error answers that
	// request as the error says, 503 for a store that is down). Gateways
	// that share a store must share the key, so that a walk can go on
	// through any of them: serve passes the store's (redis.Store.CursorKey).
	//
	// Optional. Default: a random key, so only this Server accepts its cursors.
	CursorKey func(context.Context) ([]byte, error)

	// Observe, when set, is called once per request with its route (the
	// registered path in the OpenAPI document's form, "/plants" or
	// "/plants/{id}", or "other" for a path the API does not have), status
	// and latency: the metrics hook. Requests refused before routing (see
	// refuse) are observed too.
	//
	// Optional. Default: nil.
	Observe func(route string, status int, took time.Duration)

	// Credentials resolves the bearer credentials the store does not keep
	// (an identity provider's access tokens, host/oidc) before the
	// authorize chain runs.
	//
	// Optional. Default: nil (every credential goes to the chain as sent).
	Credentials host.CredentialResolver

	// OpenAPI is the document served at GET /openapi.yaml.
	//
	// Optional. Default: the embedded OpenAPI document.
	OpenAPI []byte

	// Tracer, when set, makes a server span of each request (see
	// TrustTraceparent for its parent) and puts it in the
	// request's context, where the plugin chain and the store find it
	// (host/telemetry).
	//
	// Optional. Default: nil (no spans; the request path does not look at
	// traceparent).
	Tracer trace.Tracer

	// HandshakeFailed, when set, is told of each TLS connection whose
	// handshake failed (a listener given to Serve that is a TLS one): no
	// request was read, and nothing else reports it. The error says why
	// (a version below TLS 1.2, no or a wrong client certificate, plain
	// HTTP); it never holds request bytes.
	//
	// Optional. Default: nil.
	HandshakeFailed func(err error)

	// CORSOrigins are the origins whose browser pages may call the API
	// (see cors.go): each is scheme://host[:port], as ParseOrigin returns it.
	//
	// Optional. Default: none (no CORS header is ever sent, and a
	// preflight OPTIONS is answered 405 like any OPTIONS).
	CORSOrigins []string

	// TrustTraceparent makes a request's server span a child of the
	// client's W3C traceparent, so the client picks the trace id (carried
	// on to webhook receivers) and, under a parent-based sampler, whether
	// the request is traced at all: for a listener behind a proxy that
	// sets or checks traceparent. Off, each request starts a trace of its
	// own with a span link to the client's span, as Envoy and nginx offer
	// for an edge. Either way a tracestate is capped at 512 bytes.
	//
	// Optional. Default: false (a new trace, linked).
	TrustTraceparent bool
}

func configDefault(c Config) Config {
	if c.BodyLimit <= 0 {
		c.BodyLimit = 1 << 20
	}
	if c.RequestTimeout <= 0 {
		c.RequestTimeout = 5 * time.Second
	}
	if c.ReadTimeout <= 0 {
		c.ReadTimeout = 10 * time.Second
	}
	if c.WriteTimeout <= 0 {
		c.WriteTimeout = 10 * time.Second
	}
	if c.IdleTimeout <= 0 {
		c.IdleTimeout = 60 * time.Second
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.OpenAPI == nil {
		c.OpenAPI = OpenAPI
	}
	return c
}

// Server is the HTTP face of the gateway.
type Server struct {
	cfg       Config
	app       *fiber.App
	routes    routeTable
	cursors   *cursors
	origins   map[string]struct{}     // CORSOrigins; empty: no CORS
	quietLogs map[int32]*throttledLog // the error lines of quietCodes; read-only after New
}

// New returns a Server with its routes in place.
func New(cfg Config) (*Server, error) {
	if cfg.Store == nil || cfg.Policy == nil {
		return nil, errors.New("http server: Store and Policy are required")
	}
	if !cfg.InsecureNoAuth && !cfg.Policy.Authorizes() {
		return nil, errors.New("http server: no authorize plugin is loaded; refusing to serve without authorization (InsecureNoAuth not set)")
	}
	cfg = configDefault(cfg)
	s := &Server{cfg: cfg, cursors: newCursors(cfg.CursorKey), quietLogs: newQuietLogs(time.Now)}
	if len(cfg.CORSOrigins) > 0 {
		s.origins = make(map[string]struct{}, len(cfg.CORSOrigins))
		for _, o := range cfg.CORSOrigins {
			p, err := ParseOrigin(o)
			if err != nil {
				return nil, fmt.Errorf("http server: %w", err)
			}
			if p != o {
				return nil, fmt.Errorf("http server: origin %q: browsers send it as %q; configure that", o, p)
			}
			s.origins[p] = struct{}{}
		}
	}
	s.app = fiber.New(fiber.Config{
		AppName:               "plantgate",
		BodyLimit:             cfg.BodyLimit,
		ReadTimeout:           cfg.ReadTimeout,
		WriteTimeout:          cfg.WriteTimeout,
		IdleTimeout:           cfg.IdleTimeout,
		ErrorHandler:          s.handleError,
		DisableStartupMessage: true,
		// Header values are read before the body; keep them bounded.
		ReadBufferSize: 8192,
		// fasthttp would otherwise parse a multipart body (spilling files
		// to disk) before any handler ran; /plants takes JSON only, and
		// checkRepresentation refuses every other type unread.
		DisablePreParseMultipartForm: true,
		// The spec names its paths exactly; see routeTable.
		CaseSensitive: true,
		StrictRouting: true,
	})
	s.hookServer()
	s.app.Use(s.observe)
	if s.origins != nil {
		s.app.Use(s.cors)
	}
	s.app.Use(s.recoverPanics())
	s.app.Get("/plants", s.listPlants)
	s.app.Post("/plants", s.createPlant)
	s.app.Get("/plants/:id", s.getPlant)
	s.app.Delete("/plants/:id", s.deletePlant)
	s.app.Get("/openapi.yaml", s.openAPI)
	s.app.Get("/healthz", s.healthz)
	s.app.Get("/readyz", s.readyz)
	s.routes = newRouteTable(s.app)
	// No catch-all: Fiber answers a path it does not know with ErrNotFound
	// and a known path under another method with ErrMethodNotAllowed, and
	// handleError turns both into the Error body.
	return s, nil
}

// App is the Fiber app, for tests (app.Test) and for mounting.
func (s *Server) App() *fiber.App { return s.app }

// Serve accepts connections on ln until Shutdown. ln may be a TLS
// listener (tls.NewListener): see tls.go.
func (s *Server) Serve(ln net.Listener) error { return s.app.Listener(ln) }

// Shutdown stops accepting connections and waits for in-flight requests to
// be answered, or for ctx to end.
func (s *Server) Shutdown(ctx context.Context) error { return s.app.ShutdownWithContext(ctx) }

const localPrincipal = "principal"

func (s *Server) createPlant(c *fiber.Ctx) error {
	ctx, x, cancel := s.plantContext(c)
	defer s.respond(c, x, cancel)

	_, principal, err := s.authorize(ctx, c)
	if err != nil {
		return err
	}
	if err := checkRepresentation(c); err != nil {
		return err
	}
	p, err := DecodePlant(c.Request().Body()) // raw: c.Body() would decode a Content-Encoding
	if err != nil {
		return err
	}
	if err := s.cfg.Policy.Validate(ctx, p, principal); err != nil {
		return err
	}
	if _, err := s.cfg.Store.CreatePlant(ctx, p); err != nil {
		return err
	}
	c.Set(fiber.HeaderContentType, fiber.MIMEApplicationJSON)
	return c.Send(AppendPlant(make([]byte, 0, 64+len(p.Name)+len(p.Tag)), p))
}

func (s *Server) openAPI(c *fiber.Ctx) error {
	c.Set(fiber.HeaderContentType, "application/yaml")
	return c.Send(s.cfg.OpenAPI)
}

func (s *Server) healthz(c *fiber.Ctx) error {
	c.Set(fiber.HeaderContentType, fiber.MIMEApplicationJSON)
	return c.SendString(`{"status":"ok"}`)
}

func (s *Server) readyz(c *fiber.Ctx) error {
	ctx, cancel := context.WithTimeout(c.UserContext(), 2*time.Second)
	defer cancel()
	if s.cfg.Ready != nil {
		if err := s.cfg.Ready(ctx); err != nil {
			s.cfg.Logger.Warn("not ready", "err", err)
			return &host.Error{Code: host.ErrNotReady, Message: "gateway is not ready"}
		}
	}
	if err := s.cfg.Store.Ping(ctx); err != nil {
		s.cfg.Logger.Warn("not ready: store unreachable", "err", err)
		return &host.Error{Code: host.ErrStoreUnavailable, Message: "plant store unavailable"}
	}
	c.Set(fiber.HeaderContentType, fiber.MIMEApplicationJSON)
	return c.SendString(`{"status":"ready"}`)
}
