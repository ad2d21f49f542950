package main

import (
	"testing"
	"time"

	"github.com/plantgate/plantgate/sdk"
	"github.com/plantgate/plantgate/sdk/sdktest"
)

// frozen is a clock 250 ms into a one-second window.
var frozen = time.Date(2026, 5, 1, 12, 0, 0, 250_000_000, time.UTC)

func setup(t *testing.T, config string) *sdktest.KV {
	t.Helper()
	kv := sdktest.NewKV()
	kv.Now = func() time.Time { return frozen }
	sdktest.SetKV(t, kv)
	sdktest.Configure(t, config)
	return kv
}

func TestLimitPerToken(t *testing.T) {
	setup(t, `{"limit": 3, "window": "1s"}`)
	ci := sdk.Request{Route: "GET /plants", Client: "192.0.2.7", Caller: sdk.Principal{Name: "ci", Scopes: "plants:read"}}
	other := ci
	other.Caller.Name = "dashboard" // same address, another token: its own budget
	for i := range 3 {
		if d := sdktest.Authorize(ci); !d.Allowed() {
			t.Fatalf("request %d: %v, want allow", i+1, d)
		}
	}
	d := sdktest.Authorize(ci)
	if d.Code() != 42950 || d.Message() != "rate limit of 3 requests per 1 s reached; retry in 1 s" {
		t.Fatalf("4th request: %v", d)
	}
	for name, want := range map[string]string{"Retry-After": "1", "RateLimit": `"default";r=0;t=1`, "RateLimit-Policy": `"default";q=3;w=1`} {
		if got := d.Header(name); got != want {
			t.Errorf("%s = %q, want %q", name, got, want)
		}
	}
	if d := sdktest.Authorize(other); !d.Allowed() {
		t.Fatalf("another token: %v, want allow", d)
	}
}

func TestLimitPerClientWithoutPrincipal(t *testing.T) {
	setup(t, `{"limit": 1, "window": "1m", "by": "token"}`)
	anon := sdk.Request{Route: "GET /plants", Client: "192.0.2.7"}
	if d := sdktest.Authorize(anon); !d.Allowed() {
		t.Fatalf("first: %v", d)
	}
	d := sdktest.Authorize(anon)
	// 250 ms into the minute: 59.75 s left, rounded up.
	if d.Code() != 42950 || d.Header("Retry-After") != "60" || d.Header("RateLimit-Policy") != `"default";q=1;w=60` {
		t.Fatalf("second: %v %q %q", d, d.Header("Retry-After"), d.Header("RateLimit-Policy"))
	}
	if d := sdktest.Authorize(sdk.Request{Route: "GET /plants", Client: "192.0.2.8"}); !d.Allowed() {
		t.Fatalf("another address: %v", d)
	}
}

func TestStoreDown(t *testing.T) {
	kv := setup(t, `{"limit": 5}`)
	kv.Down = true
	r := sdk.Request{Route: "GET /plants", Client: "192.0.2.7"}
	if d := sdktest.Authorize(r); d.String() != "deny 50351: rate limit store unavailable" {
		t.Fatalf("fail closed by default: %v", d)
	}
	sdktest.Configure(t, `{"limit": 5, "on_store_error": "allow"}`)
	if d := sdktest.Authorize(r); !d.Allowed() {
		t.Fatalf("on_store_error allow: %v", d)
	}
}

func TestConfigErrors(t *testing.T) {
	for config, want := range map[string]string{
		`{"limit": 0}`:                `rate-limit config: limit must be an integer from 1 to 1000000000, got 0`,
		`{"window": "1500ms"}`:        `rate-limit config: window must be whole seconds from "1s" to "24h", got "1500ms"`,
		`{"by": "ip"}`:                `rate-limit config: by must be "token" or "client", got "ip"`,
		`{"on_store_error": "maybe"}`: `rate-limit config: on_store_error must be "deny" or "allow", got "maybe"`,
		`{"limits": 3}`:               `rate-limit config: json: unknown field "limits"`,
	} {
		if err := sdktest.TryConfigure(config); err == nil || err.Error() != want {
			t.Errorf("%s: %v, want %s", config, err, want)
		}
	}
}

func TestAllowDoesNotAllocate(t *testing.T) {
	setup(t, `{"limit": 1000000000}`)
	r := sdk.Request{Route: "GET /plants", Client: "192.0.2.7", Caller: sdk.Principal{Name: "ci"}}
	if n := testing.AllocsPerRun(100, func() { authorize(r) }); n != 0 {
		t.Fatalf("authorize allocates %.0f times per allowed call", n)
	}
}

// TestSliding: with "sliding", 3 a minute spent just before a minute
// boundary stays spent just after it (fixed windows allow 3 more there),
// until the first request frees, a minute and at most a 3 s slot later.
func TestSliding(t *testing.T) {
	for _, tt := range []struct {
		config    string
		afterward bool // a request 1 s after the boundary is allowed
	}{
		{`{"limit": 3, "window": "60s", "by": "client"}`, true},
		{`{"limit": 3, "window": "60s", "by": "client", "sliding": true}`, false},
	} {
		now := time.Date(2026, 5, 1, 12, 0, 59, 0, time.UTC)
		kv := setup(t, tt.config)
		kv.Now = func() time.Time { return now }
		r := sdk.Request{Route: "GET /plants", Client: "192.0.2.9"}
		for i := range 3 {
			if d := sdktest.Authorize(r); !d.Allowed() {
				t.Fatalf("%s: request %d: %v", tt.config, i+1, d)
			}
		}
		now = now.Add(2 * time.Second) // 1 s into the next minute
		if d := sdktest.Authorize(r); d.Allowed() != tt.afterward {
			t.Fatalf("%s: after the boundary: %v", tt.config, d)
		}
		if !tt.afterward {
			// Taken at 12:00:59, in the slot 12:00:57–12:01:00: free at 12:02:00.
			if d := sdktest.Authorize(r); d.Header("Retry-After") != "59" {
				t.Fatalf("%s: Retry-After %q, want 59", tt.config, d.Header("Retry-After"))
			}
			now = time.Date(2026, 5, 1, 12, 1, 59, 999_000_000, time.UTC)
			if d := sdktest.Authorize(r); d.Allowed() {
				t.Fatalf("%s: allowed at 12:01:59.999, before the first request frees", tt.config)
			}
			now = now.Add(time.Millisecond)
			if d := sdktest.Authorize(r); !d.Allowed() {
				t.Fatalf("%s: denied at 12:02:00, when the first request frees: %v", tt.config, d)
			}
		}
	}
}
