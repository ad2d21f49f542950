package main

import (
	"bytes"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/gofiber/fiber/v2"
	goredis "github.com/redis/go-redis/v9"

	"github.com/plantgate/plantgate/host/redis"
)

// The peers' keys. Both peers share them (one layout, seeded once per
// peer); the script is the gateway's own, so Redis does the same work per
// create for every target.
const (
	peerPlantPrefix = "peer:plant:"
	peerIndex       = "peer:index"
	peerEvents      = "peer:events"
	peerRecording   = "peer:events:on" // never set: no event is appended, as on the gateway without webhooks
)

// runFiberPeer is the hand-written service a user would put in front of
// Redis instead of the gateway (issue 22): Fiber v2 and go-redis v9, the
// bearer compared to one token held in memory (PEER_TOKEN), encoding/json,
// plant-rules' checks with its defaults written out, the gateway's create
// script, a read with one GET, and nothing else: no plugins, metrics or log.
// It answers a create and a read with the gateway's status and body
// (peer_test.go holds it to that).
func runFiberPeer(args []string) error {
	fs := flag.NewFlagSet("peer-fiber", flag.ContinueOnError)
	listen := fs.String("listen", "127.0.0.1:0", "address")
	redisAddr := fs.String("redis", "", "redis-server address (host:port)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	token := os.Getenv("PEER_TOKEN")
	if token == "" || *redisAddr == "" {
		return errors.New("PEER_TOKEN and -redis are required")
	}
	app := newFiberPeer(token, goredis.NewClient(&goredis.Options{Addr: *redisAddr}))
	return app.Listen(*listen)
}

// peerError is the gateway's Error body.
type peerError struct {
	Code    int32  `json:"error"`
	Message string `json:"message"`
}

func newFiberPeer(token string, rdb *goredis.Client) *fiber.App {
	script := goredis.NewScript(redis.CreatePlantLua())
	want := []byte("Bearer " + token)
	app := fiber.New(gatewayFiberConfig())
	fail := func(c *fiber.Ctx, status int, code int32, msg string) error {
		b, _ := json.Marshal(peerError{code, msg})
		c.Set(fiber.HeaderContentType, fiber.MIMEApplicationJSON)
		return c.Status(status).Send(b)
	}
	authorized := func(c *fiber.Ctx) bool {
		return subtle.ConstantTimeCompare(c.Request().Header.Peek(fiber.HeaderAuthorization), want) == 1
	}
	app.Post("/plants", func(c *fiber.Ctx) error {
		if !authorized(c) {
			return fail(c, 401, 40151, "invalid token")
		}
		var in struct {
			ID   *int64  `json:"id"`
			Name *string `json:"name"`
			Tag  *string `json:"tag"`
		}
		if err := json.Unmarshal(c.Body(), &in); err != nil || in.ID == nil || in.Name == nil {
			return fail(c, 400, 40000, "body must be a NewPlant: {\"id\": int64, \"name\": string, \"tag\"?: string}")
		}
		if code, msg := plantRules(*in.ID, *in.Name, in.Tag); code != 0 {
			return fail(c, 400, code, msg)
		}
		stored := struct {
			ID   int64   `json:"id"`
			Name string  `json:"name"`
			Tag  *string `json:"tag,omitempty"`
		}{*in.ID, *in.Name, in.Tag}
		content, err := marshalNoHTML(stored)
		if err != nil {
			return err
		}
		member := fmt.Sprintf("%016x", uint64(*in.ID)^(1<<63)) // the gateway's index member
		keys := []string{peerPlantPrefix + strconv.FormatInt(*in.ID, 10), peerIndex, peerEvents, peerRecording}
		res, err := script.Run(c.UserContext(), rdb, keys, content, member, strconv.FormatInt(time.Now().UnixMilli(), 10)).Int64()
		switch {
		case err != nil:
			return fail(c, 503, 50301, "plant store unavailable")
		case res < 0:
			return fail(c, 409, 40003, fmt.Sprintf("plant %d already exists with other content", *in.ID))
		}
		out, err := marshalNoHTML(struct {
			Name string  `json:"name"`
			Tag  *string `json:"tag,omitempty"`
		}{*in.Name, in.Tag})
		if err != nil {
			return err
		}
		c.Set(fiber.HeaderContentType, fiber.MIMEApplicationJSON)
		return c.SendString(out)
	})
	app.Get("/plants/:id", func(c *fiber.Ctx) error {
		if !authorized(c) {
			return fail(c, 401, 40151, "invalid token")
		}
		id, err := strconv.ParseInt(c.Params("id"), 10, 64)
		if err != nil {
			return fail(c, 400, 40005, "plant id must be an integer from -9223372036854775808 to 9223372036854775807")
		}
		content, err := rdb.Get(c.UserContext(), peerPlantPrefix+strconv.FormatInt(id, 10)).Bytes()
		switch {
		case errors.Is(err, goredis.Nil):
			return fail(c, 404, 40402, fmt.Sprintf("no plant with id %d", id))
		case err != nil:
			return fail(c, 503, 50301, "plant store unavailable")
		}
		// The stored content is the StoredPlant body.
		c.Set(fiber.HeaderContentType, fiber.MIMEApplicationJSON)
		return c.Send(content)
	})
	app.Get("/healthz", func(c *fiber.Ctx) error { return c.SendString("ok") })
	return app
}

// marshalNoHTML is json.Marshal without escaping <, > and &, as the
// gateway's encoder writes them.
func marshalNoHTML(v any) (string, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return "", err
	}
	return strings.TrimSuffix(b.String(), "\n"), nil
}

// plantRules is plugins/plant-rules with its default config: the first
// rule that fails decides, with the plugin's code and message; 0 allows.
func plantRules(id int64, name string, tag *string) (int32, string) {
	if id < 1 {
		return 40050, fmt.Sprintf("id must be at least 1, got %d", id)
	}
	if code, msg := peerCheck("name", name, 100, 40051, 40052); code != 0 {
		return code, msg
	}
	if tag != nil {
		return peerCheck("tag", *tag, 50, 40053, 40054)
	}
	return 0, ""
}

func peerCheck(field, s string, max int, codeLength, codeControl int32) (int32, string) {
	for i, r := range s {
		if unicode.IsControl(r) {
			return codeControl, fmt.Sprintf("%s must not contain control characters, found %U at character %d",
				field, r, utf8.RuneCountInString(s[:i])+1)
		}
	}
	if n := utf8.RuneCountInString(strings.TrimSpace(s)); n < 1 || n > max {
		return codeLength, fmt.Sprintf("%s must be 1–%d characters after trimming, got %d", field, max, n)
	}
	return 0, ""
}
