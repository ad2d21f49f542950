package main

import (
	"errors"
	"flag"
	"time"

	"github.com/gofiber/fiber/v2"
)

// gatewayFiberConfig is the gateway's Fiber settings at serve's defaults
// (host/http's server: body limit, timeouts, header buffer), which the
// ceiling and the hand-written peer share so that only what they do per
// request differs.
func gatewayFiberConfig() fiber.Config {
	return fiber.Config{
		BodyLimit:             1 << 20,
		ReadTimeout:           10 * time.Second,
		WriteTimeout:          10 * time.Second,
		IdleTimeout:           60 * time.Second,
		ReadBufferSize:        8192,
		DisableStartupMessage: true,
	}
}

// runEcho serves the ceilings: POST /plants answering its body, and GET
// /plants/{id} answering a plant of the seed's size, with the gateway's
// Fiber settings and nothing else (no auth, decode, plugins or store).
func runEcho(args []string) error {
	fs := flag.NewFlagSet("echo", flag.ContinueOnError)
	listen := fs.String("listen", "127.0.0.1:0", "address")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *listen == "" {
		return errors.New("-listen is empty")
	}
	app := fiber.New(gatewayFiberConfig())
	app.Post("/plants", func(c *fiber.Ctx) error {
		c.Set(fiber.HeaderContentType, fiber.MIMEApplicationJSON)
		return c.Send(c.Body())
	})
	app.Get("/plants/:id", func(c *fiber.Ctx) error {
		c.Set(fiber.HeaderContentType, fiber.MIMEApplicationJSON)
		return c.SendString(`{"id":` + c.Params("id") + `,"name":"Monstera deliciosa","tag":"tropical"}`)
	})
	app.Get("/healthz", func(c *fiber.Ctx) error { return c.SendString("ok") })
	return app.Listen(*listen)
}
