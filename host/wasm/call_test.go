package wasm

import (
	"context"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/plantgate/plantgate/host"
)

var (
	errFault       = &host.Error{Code: host.ErrPluginFault, Message: "policy plugin failed; request denied"}
	errBadDecision = &host.Error{Code: host.ErrPluginBadDecision, Message: "policy plugin returned an invalid decision; request denied"}
	errBusy        = &host.Error{Code: host.ErrPluginBusy, Message: "policy plugin busy"}
	errClosed      = &host.Error{Code: host.ErrNotReady, Message: "policy plugin is shutting down"}
)

// secret is the credential of every fault test; no log line may hold it.
const secret = "secret-credential-never-logged"

func TestDecisions(t *testing.T) {
	t.Parallel()
	plant := host.Plant{ID: 42, Name: "Fern", Tag: "green", HasTag: true}
	tests := []struct {
		name          string
		fixture       string
		req           host.AuthorizeRequest
		plant         host.Plant
		principal     string // passed to Validate
		wantPrincipal string
		wantAuthorize *host.Error
		wantValidate  *host.Error
	}{
		{name: "allow", fixture: "allow", plant: plant},
		{name: "deny", fixture: "deny", plant: plant,
			wantAuthorize: &host.Error{Code: 40355, Message: "denied by fixture"},
			wantValidate:  &host.Error{Code: 40355, Message: "denied by fixture"}},
		{name: "allow as principal", fixture: "principal", plant: plant, wantPrincipal: "fixture-user"},
		{name: "echo", fixture: "echo",
			req:   host.AuthorizeRequest{Method: "POST", Path: "/plants", Credential: "tok"},
			plant: plant, principal: "alice",
			wantAuthorize: &host.Error{Code: 40350, Message: "POST /plants tok"},
			wantValidate:  &host.Error{Code: 40050, Message: "42 1 Fern green alice"}},
		{name: "echo empty and negative", fixture: "echo",
			plant:         host.Plant{ID: -9223372036854775808, Name: "Cactus"},
			wantAuthorize: &host.Error{Code: 40350, Message: "  "},
			wantValidate:  &host.Error{Code: 40050, Message: "-9223372036854775808 0 Cactus  "}},
		{name: "go plugin", fixture: "gopanic", req: host.AuthorizeRequest{Method: "POST", Path: "/plants"}, plant: plant},
		{name: "sdk plugin", fixture: "sdkpanic", req: host.AuthorizeRequest{Method: "POST", Path: "/plants"}, plant: plant,
			wantPrincipal: "sdk-user"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p := load(t, tt.fixture, nil, Limits{}, Options{})
			principal, err := p.Authorize(context.Background(), tt.req)
			wantError(t, err, tt.wantAuthorize)
			if principal != tt.wantPrincipal {
				t.Fatalf("principal = %q, want %q", principal, tt.wantPrincipal)
			}
			wantError(t, p.Validate(context.Background(), tt.plant, tt.principal), tt.wantValidate)
			if s := p.Stats(); s.Discarded != 0 || s.Calls != 2 {
				t.Fatalf("Stats() = %+v, want 2 calls and nothing discarded", s)
			}
		})
	}
}

func TestFaults(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		fixture  string
		limits   Limits
		path     string // authorize with this path; "" runs Validate instead
		want     *host.Error
		reason   string // the logged reason
		recovers bool   // authorize on "/plants" allows afterwards
	}{
		{"trap", "trap", Limits{}, "/x", errFault, "plantgate_authorize trapped", true},
		{"trap in validate", "trap", Limits{}, "", errFault, "plantgate_validate trapped", true},
		// The deadline also bounds the 1000 calls after the fault: short
		// enough to keep the spin short, long enough for a quick call under
		// -race on a loaded machine (20 ms was hit at a load average of 12).
		{"infinite loop", "loop", Limits{Timeout: 300 * time.Millisecond}, "/x", errFault,
			"plantgate_authorize ran past its deadline", true},
		{"memory bomb", "membomb", Limits{MemoryMiB: 2}, "/x", errFault, "plantgate_authorize trapped", true},
		// Go's runtime prints the panic and its stack to stderr and aborts:
		// the log line has the panic and the guest function, not the dump.
		{"go panic", "gopanic", Limits{}, "/panic", errFault,
			"plantgate_authorize panicked: fixture panic, in main.authorize at " + goPluginFile("panic") + ":45", true},
		// The SDK recovers the panic and answers with a fault decision that
		// says where.
		{"sdk panic", "sdkpanic", Limits{}, "/panic", errFault,
			"plugin reported a fault: sdk: authorize handler panicked: sdk fixture panic, in main.init.0.func1 at " + goPluginFile("sdkpanic") + ":18", true},
		{"go out of memory", "oom", Limits{MemoryMiB: 16}, "/oom", errFault,
			"plantgate_authorize ran out of memory (limits.memory_mib 16): fatal error: out of memory, in main.init.0.func1 at " + goPluginFile("oom") + ":28", true},
		{"decision outside memory", "garbage", Limits{}, "/o", errBadDecision,
			"decision at 0xffff0000 (16 bytes) is outside memory", true},
		{"decision running off memory", "garbage", Limits{}, "/z", errBadDecision,
			"decision at 0xfffa (100 bytes) is outside memory", true},
		{"unknown verdict", "garbage", Limits{}, "/v", errBadDecision, "bad decision", true},
		{"deny code outside plugin range", "garbage", Limits{}, "/c", errBadDecision, "bad decision", true},
		{"short decision", "garbage", Limits{}, "/s", errBadDecision, "bad decision", true},
		{"text over MaxText", "garbage", Limits{}, "/l", errBadDecision, "decision of 1033 bytes, over the 1032-byte maximum", true},
		{"text not UTF-8", "garbage", Limits{}, "/u", errBadDecision, "decision text is not UTF-8", true},
		{"bad verdict in validate", "garbage", Limits{}, "", errBadDecision, "bad decision", true},
		{"no buffer", "badbuffer", Limits{}, "/", errFault, "plantgate_buffer(33) returned 0: no buffer", false},
		{"buffer outside memory", "badbuffer", Limits{}, "/longer-path", errBadDecision,
			"plantgate_buffer(87) returned 0xffff0000, outside memory", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			opts, logs := testOptions()
			limits := tt.limits
			if limits.Timeout == 0 {
				// Only the loop case is about the deadline: the others must not
				// hit it on a loaded machine under -race (a Go panic prints its
				// stack, which is slow there).
				limits.Timeout = 10 * time.Second
			}
			p := load(t, tt.fixture, nil, limits, opts)
			refilled, refilledC := signal()
			p.refilled = refilled
			ctx := context.Background()
			var err error
			if tt.path != "" {
				_, err = p.Authorize(ctx, host.AuthorizeRequest{Method: "", Path: tt.path, Credential: secret[:max(0, len(tt.path)-1)]})
			} else {
				err = p.Validate(ctx, host.Plant{ID: 1, Name: secret}, secret)
			}
			wantError(t, err, tt.want)
			// The faulted instance is replaced off the request path; wait for
			// that, so the counts do not depend on who ran first.
			await(t, refilledC, "the pool refilled after the fault")
			if s := p.Stats(); s != (Stats{Live: 1, Created: 2, Discarded: 1, Calls: 1}) {
				t.Fatalf("Stats() = %+v, want the one instance discarded and replaced", s)
			}
			rec := logs.find(t, "policy plugin failed; request denied")
			if rec.Attrs["plugin"] != tt.fixture || rec.Attrs["reason"] != tt.reason {
				t.Fatalf("log %+v, want plugin=%s reason=%q", rec, tt.fixture, tt.reason)
			}
			// One line at warn or above names the fault: no guest dump, no
			// err=<nil>.
			for _, r := range logs.records() {
				if r.Level >= slog.LevelWarn && r.Msg != rec.Msg || r.Attrs["err"] == "<nil>" {
					t.Fatalf("log %+v beside the fault's %+v", r, rec)
				}
			}
			for _, r := range logs.records() {
				for k, v := range r.Attrs {
					if strings.Contains(v, secret[:8]) || strings.Contains(r.Msg, secret[:8]) {
						t.Fatalf("log %q %s=%q holds the request", r.Msg, k, v)
					}
				}
			}
			if !tt.recovers {
				return
			}
			for i := range 1000 {
				if _, err := p.Authorize(ctx, host.AuthorizeRequest{Method: "POST", Path: "/plants"}); err != nil {
					t.Fatalf("call %d after the fault: %v", i, err)
				}
			}
			if s := p.Stats(); s != (Stats{Live: 1, Created: 2, Discarded: 1, Calls: 1001}) {
				t.Fatalf("Stats() = %+v, want one fresh instance that made 1000 calls", s)
			}
		})
	}
}

// TestGuestStderrLogged: what a guest writes to stderr during a call that
// succeeds is logged line by line, after the call.
func TestGuestStderrLogged(t *testing.T) {
	t.Parallel()
	opts, logs := testOptions()
	p := load(t, "oom", nil, Limits{Timeout: 10 * time.Second}, opts)
	if _, err := p.Authorize(context.Background(), host.AuthorizeRequest{Method: "POST", Path: "/stderr"}); err != nil {
		t.Fatal(err)
	}
	rec := logs.find(t, "a note on stderr")
	if rec.Level != slog.LevelWarn || rec.Attrs["stream"] != "stderr" || rec.Attrs["plugin"] != "oom" {
		t.Fatalf("stderr line %+v, want a warning with stream=stderr plugin=oom", rec)
	}
}

// goPluginFile is the absolute path of testdata/goplugins/<name>/main.go,
// as the Go runtime names it in a guest's stack.
func goPluginFile(name string) string {
	abs, err := filepath.Abs(filepath.Join("..", "..", "testdata", "goplugins", name, "main.go"))
	if err != nil {
		panic(err)
	}
	return abs
}

func TestRecycle(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		fixture string
		limits  Limits
		calls   int
		want    Stats
	}{
		// Each discard is followed by a refill in the background, so once
		// settled the pool holds one live instance more than it served.
		{"max calls", "allow", Limits{MaxCalls: 10}, 25, Stats{Live: 1, Created: 3, Discarded: 2, Calls: 25}},
		{"max calls, on the dot", "allow", Limits{MaxCalls: 10}, 20, Stats{Live: 1, Created: 3, Discarded: 2, Calls: 20}},
		// 1 MiB: recycled above 12 pages; grow adds one page to its one per call.
		{"memory below threshold", "grow", Limits{MemoryMiB: 1}, 11, Stats{Live: 1, Created: 1, Discarded: 0, Calls: 11}},
		{"memory over threshold", "grow", Limits{MemoryMiB: 1}, 12, Stats{Live: 1, Created: 2, Discarded: 1, Calls: 12}},
		{"memory over threshold twice", "grow", Limits{MemoryMiB: 1}, 24, Stats{Live: 1, Created: 3, Discarded: 2, Calls: 24}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p := load(t, tt.fixture, nil, tt.limits, Options{})
			refilled, refilledC := signal()
			p.refilled = refilled
			for i := range tt.calls {
				if _, err := p.Authorize(context.Background(), host.AuthorizeRequest{Path: "/"}); err != nil {
					t.Fatalf("call %d: %v", i, err)
				}
			}
			// Stats are compared once every discard's refill has landed:
			// read earlier, they race with it (a flake seen under load).
			for range tt.want.Discarded {
				await(t, refilledC, "the pool refilled after a recycle")
			}
			if s := p.Stats(); s != tt.want {
				t.Fatalf("Stats() = %+v, want %+v", s, tt.want)
			}
		})
	}
}

// TestBufferAskedOnlyToGrow checks the ABI's buffer lifetime: the host asks
// plantgate_buffer again only for a request larger than any before.
func TestBufferAskedOnlyToGrow(t *testing.T) {
	t.Parallel()
	p := load(t, "allow", nil, Limits{}, Options{})
	ctx := context.Background()
	sizes := func() (uint32, uint32) {
		in, err := p.acquire(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer p.release(ctx, in, false)
		return in.bufPtr, in.bufSize
	}
	if _, err := p.Authorize(ctx, host.AuthorizeRequest{Method: "POST", Path: "/plants", Credential: "0123456789"}); err != nil {
		t.Fatal(err)
	}
	ptr, size := sizes()
	if ptr == 0 || size == 0 {
		t.Fatalf("buffer %#x (%d bytes) after a call, want it kept", ptr, size)
	}
	for _, cred := range []string{"", "0123", "0123456789"} {
		if _, err := p.Authorize(ctx, host.AuthorizeRequest{Method: "POST", Path: "/plants", Credential: cred}); err != nil {
			t.Fatal(err)
		}
		if p2, s2 := sizes(); p2 != ptr || s2 != size {
			t.Fatalf("buffer %#x (%d) after a request no larger, want %#x (%d) kept", p2, s2, ptr, size)
		}
	}
	if _, err := p.Authorize(ctx, host.AuthorizeRequest{Method: "POST", Path: "/plants", Credential: "0123456789-longer"}); err != nil {
		t.Fatal(err)
	}
	if _, s2 := sizes(); s2 <= size {
		t.Fatalf("buffer size %d after a larger request, want more than %d", s2, size)
	}
}
