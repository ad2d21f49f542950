// Command rate-limit is an authorize-phase plugin that limits requests per
// caller, fleet-wide: every gateway on one store shares each caller's
// budget.
//
// It keys the budget on the token's name (sdk.Request.Caller, set once a
// plugin before it in the chain, such as bearer-auth, found the token
// valid), or on the client address when there is no principal or "by" is
// "client". Put it after the authentication plugin (30-rate-limit.wasm
// after 10-bearer-auth.wasm) so it sees the principal.
//
// Decisions:
//
//	code   status  when
//	42950  429     the caller's budget for this window is spent; the answer
//	               carries Retry-After (seconds to the window's end),
//	               RateLimit ("default";r=0;t=<seconds>) and RateLimit-Policy
//	               ("default";q=<limit>;w=<window seconds>), the fields of
//	               draft-ietf-httpapi-ratelimit-headers
//	50351  503     the store could not be asked (on_store_error "deny", the
//	               default: a limiter that cannot count fails closed)
//	allow          otherwise, with no headers: an allowed request costs
//	               nothing but the count
//
// Config, every key optional; the default is exactly
//
//	{"limit": 100, "window": "1s", "by": "token", "on_store_error": "deny"}
//
// limit is the requests allowed per caller per window (1 to 1e9); window a
// Go duration from 1s to 24h in whole seconds (the RateLimit fields count
// seconds), windows aligned to the Unix epoch; by "token" or "client";
// on_store_error "deny" or "allow". "sliding": true counts over a sliding
// window instead (sdk.Take): never more than limit in any span of window,
// where fixed windows let up to 2×limit through across a boundary.
//
// The count uses sdk.TakeFixed (fixed windows, as documented above), or
// sdk.Take with "sliding": each gateway leases small parts of a caller's
// budget from the store and spends them locally, so a request costs a store
// round trip only when its gateway's lease is spent, and the fleet never
// allows more than limit in a window.
//
// Build: GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -o rate-limit.wasm ./plugins/rate-limit
package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"time"
	"unsafe"

	"github.com/plantgate/plantgate/sdk"
)

// Deny codes.
const (
	codeLimited     int32 = 42950
	codeUnavailable int32 = 50351
)

type config struct {
	limit        int64
	window       time.Duration
	byClient     bool
	failOpen     bool
	sliding      bool
	policyHeader string // RateLimit-Policy, built once
}

var cfg = mustConfig(nil)

func init() {
	sdk.HandleConfigure(configure)
	sdk.HandleAuthorize(authorize)
}

func main() {}

// keyBuf holds the budget's key; the SDK copies it into the host call, so
// one buffer serves every request without allocating.
var keyBuf = make([]byte, 0, 256)

func authorize(r sdk.Request) sdk.Decision {
	keyBuf = keyBuf[:0]
	if !cfg.byClient && r.Caller.Name != "" {
		keyBuf = append(append(keyBuf, "t:"...), r.Caller.Name...)
	} else {
		keyBuf = append(append(keyBuf, "c:"...), r.Client...)
	}
	key := unsafe.String(unsafe.SliceData(keyBuf), len(keyBuf))
	take := sdk.TakeFixed
	if cfg.sliding {
		take = sdk.Take
	}
	t, err := take(key, cfg.limit, cfg.window)
	switch {
	case err == nil && t.Allowed:
		return sdk.Allow()
	case err == nil:
		return limited(max(int64((t.Reset+time.Second-1)/time.Second), 1))
	case errors.Is(err, sdk.ErrUnavailable) && cfg.failOpen:
		return sdk.Allow()
	case errors.Is(err, sdk.ErrUnavailable):
		sdk.Log(sdk.LevelWarn, "rate limit store unavailable")
		return sdk.Deny(codeUnavailable, "rate limit store unavailable")
	}
	return sdk.Fault("rate-limit: " + err.Error())
}

// denyBuf holds a deny's message and header values. A limited client keeps
// calling, so the deny is the hot path: built in one reused buffer (the SDK
// copies the texts into its record before the next call), it allocates
// nothing, and the guest's memory stays flat however many it answers
// (plantgate plugin conformance's reuse check).
var denyBuf = make([]byte, 0, 256)

// limited is the deny for a spent budget, retry in secs seconds.
func limited(secs int64) sdk.Decision {
	b := append(denyBuf[:0], "rate limit of "...)
	b = strconv.AppendInt(b, cfg.limit, 10)
	b = append(b, " requests per "...)
	b = strconv.AppendInt(b, int64(cfg.window/time.Second), 10)
	b = append(b, " s reached; retry in "...)
	n := len(b)
	b = strconv.AppendInt(b, secs, 10)
	s := len(b) - n
	b = append(b, " s"...)
	msg := len(b)
	b = append(b, `"default";r=0;t=`...)
	b = append(b, b[n:n+s]...)
	denyBuf = b
	str := unsafe.String(unsafe.SliceData(b), len(b))
	return sdk.Deny(codeLimited, str[:msg]).
		WithHeader("Retry-After", str[n:n+s]).
		WithHeader("RateLimit", str[msg:]).
		WithHeader("RateLimit-Policy", cfg.policyHeader)
}

func configure(raw []byte) error {
	c, err := parseConfig(raw)
	if err != nil {
		return fmt.Errorf("rate-limit config: %w", err)
	}
	cfg = c
	return nil
}

func parseConfig(raw []byte) (config, error) {
	var in struct {
		Limit        *int64  `json:"limit"`
		Window       *string `json:"window"`
		By           *string `json:"by"`
		OnStoreError *string `json:"on_store_error"`
		Sliding      *bool   `json:"sliding"`
	}
	if raw = bytes.TrimSpace(raw); len(raw) > 0 && string(raw) != "null" {
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&in); err != nil {
			return config{}, err
		}
		if _, err := dec.Token(); err != io.EOF {
			return config{}, errors.New("data after the config object")
		}
	}
	c := config{limit: 100, window: time.Second}
	if in.Limit != nil {
		if *in.Limit < 1 || *in.Limit > 1e9 {
			return config{}, fmt.Errorf("limit must be an integer from 1 to 1000000000, got %d", *in.Limit)
		}
		c.limit = *in.Limit
	}
	if in.Window != nil {
		d, err := time.ParseDuration(*in.Window)
		if err != nil || d < time.Second || d > 24*time.Hour || d%time.Second != 0 {
			return config{}, fmt.Errorf(`window must be whole seconds from "1s" to "24h", got %q`, *in.Window)
		}
		c.window = d
	}
	if in.By != nil {
		switch *in.By {
		case "token":
		case "client":
			c.byClient = true
		default:
			return config{}, fmt.Errorf(`by must be "token" or "client", got %q`, *in.By)
		}
	}
	if in.OnStoreError != nil {
		switch *in.OnStoreError {
		case "deny":
		case "allow":
			c.failOpen = true
		default:
			return config{}, fmt.Errorf(`on_store_error must be "deny" or "allow", got %q`, *in.OnStoreError)
		}
	}
	c.sliding = in.Sliding != nil && *in.Sliding
	c.policyHeader = `"default";q=` + strconv.FormatInt(c.limit, 10) + `;w=` + strconv.FormatInt(int64(c.window/time.Second), 10)
	return c, nil
}

func mustConfig(raw []byte) config {
	c, err := parseConfig(raw)
	if err != nil {
		panic(err)
	}
	return c
}
