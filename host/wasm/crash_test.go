package wasm

import (
	"context"
	"log/slog"
	"strings"
	"testing"

	"github.com/plantgate/plantgate/host"
)

func TestReadCrash(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		stderr string
		want   string // guestCrash.String(); "" for no crash
		oom    bool
	}{
		{"go panic", `panic: boom [recovered]

goroutine 1 [running]:
panic({0x1a2c0, 0x4b9e8})
	/usr/local/go/src/runtime/panic.go:806 +0x1b
main.validate(...)
	/src/rules/main.go:31
main.plantgate_validate(0x10000, 0x20)
	/src/rules/main.go:40 +0x4
`, "panic: boom, in main.validate at /src/rules/main.go:31", false},
		{"runtime error in the runtime's own frame first", `panic: assignment to entry in nil map

goroutine 1 [running]:
internal/runtime/maps.(*Map).assign(...)
	/usr/local/go/src/internal/runtime/maps/map.go:1 +0x2
runtime.mapassign_faststr(0x0)
	/usr/local/go/src/runtime/map.go:9 +0x1
main.init.0.func1({0x0, 0x0})
	/src/oom/main.go:12 +0x7
`, "panic: assignment to entry in nil map, in main.init.0.func1 at /src/oom/main.go:12", false},
		{"go out of memory", `fatal error: out of memory

runtime stack:
runtime.throw({0x39dd2, 0x1f})
	/usr/local/go/src/runtime/panic.go:1229 +0x3 fp=0x1b3660 sp=0x1b3638 pc=0x15540003

goroutine 1 gp=0x1c0000 m=0 mp=0x1a8000 [running]:
runtime.systemstack_switch()
	/usr/local/go/src/runtime/asm_wasm.s:22 +0x3 fp=0x1b3b98 sp=0x1b3b90 pc=0x15890003
runtime.mallocgc(0x100000, 0x1e340, 0x1)
	/usr/local/go/src/runtime/malloc.go:1 +0x9
main.init.0.func1({0x0, 0x0})
	/src/oom/main.go:28 +0x11
`, "fatal error: out of memory, in main.init.0.func1 at /src/oom/main.go:28", true},
		{"no stack (TinyGo)", "panic: boom\n", "panic: boom", false},
		{"cannot allocate", "fatal error: runtime: cannot allocate memory\n", "fatal error: runtime: cannot allocate memory", true},
		{"rust 1.63 panic", "thread '<unnamed>' panicked at 'name too odd: 33', src/lib.rs:5:88\nnote: run with `RUST_BACKTRACE=1` environment variable to display a backtrace\n",
			"panic: name too odd: 33, in src/lib.rs:5:88", false},
		{"rust 1.73+ panic", "thread '<unnamed>' panicked at src/lib.rs:5:88:\nname too odd: 33\nnote: run with `RUST_BACKTRACE=1` environment variable to display a backtrace\n",
			"panic: name too odd: 33, in src/lib.rs:5:88", false},
		{"rust out of memory", "memory allocation of 1048576 bytes failed\n", "fatal error: memory allocation of 1048576 bytes failed", true},
		{"plain output", "a note\nanother note\n", "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c, ok := readCrash(strings.Split(tt.stderr, "\n"))
			if ok != (tt.want != "") || ok && (c.String() != tt.want || c.oom != tt.oom) {
				t.Fatalf("readCrash = %q oom=%t ok=%t, want %q oom=%t", c, c.oom, ok, tt.want, tt.oom)
			}
		})
	}
}

// TestInstanceStartFailureLogged: an instance that fails to start after
// load (in the background refill, then on the request path) is logged
// with its cause, and the request fails closed.
func TestInstanceStartFailureLogged(t *testing.T) {
	t.Parallel()
	opts, logs := testOptions()
	p := load(t, "configure", []byte(`{"a":1}`), Limits{MaxCalls: 1}, opts)
	refilled, refilledC := signal()
	p.refilled = refilled
	// The next instances get a config the plugin refuses: the one made
	// after this call's instance is recycled (MaxCalls 1) fails to start.
	p.config = []byte("false")
	if err := p.Validate(context.Background(), host.Plant{ID: 1, Name: "a"}, ""); err != nil {
		t.Fatal(err)
	}
	await(t, refilledC, "the refill after recycling")
	wantError(t, p.Validate(context.Background(), host.Plant{ID: 2, Name: "b"}, ""), errFault)
	n := 0
	for _, r := range logs.records() {
		if r.Msg != "policy plugin instance failed to start" {
			continue
		}
		n++
		if r.Level != slog.LevelError || r.Attrs["err"] != "config refused: config rejected by fixture (sidecar configure.json; docs/abi.md#config)" || r.Attrs["plugin"] != "configure" {
			t.Fatalf("log %+v, want the refused config as the cause", r)
		}
	}
	if n != 2 {
		t.Fatalf("%d start failures logged, want 2 (refill, then the request): %v", n, logs.records())
	}
}

// TestTrapLoggedInOneLine: a guest trap is logged as one line, without
// wazero's stack trace, and a Rust panic's message (written to stderr
// before the trap) is that line's reason, not lines of its own.
func TestTrapLoggedInOneLine(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct{ fixture, reason, err string }{
		{"trap", "plantgate_validate trapped", "wasm error: unreachable"},
		{"rustpanic", "plantgate_validate panicked: name too odd: 33, in src/lib.rs:5:88", ""},
	} {
		t.Run(tt.fixture, func(t *testing.T) {
			t.Parallel()
			opts, logs := testOptions()
			p := load(t, tt.fixture, nil, Limits{}, opts)
			wantError(t, p.Validate(context.Background(), host.Plant{ID: 1, Name: "a"}, ""), errFault)
			var recs []logRecord
			for _, r := range logs.records() {
				if r.Level >= slog.LevelInfo {
					recs = append(recs, r)
				}
			}
			if len(recs) != 1 {
				t.Fatalf("%d log records, want 1: %v", len(recs), recs)
			}
			r := recs[0]
			if r.Msg != "policy plugin failed; request denied" || r.Attrs["reason"] != tt.reason || r.Attrs["err"] != tt.err {
				t.Fatalf("log %+v, want reason %q and err %q", r, tt.reason, tt.err)
			}
		})
	}
}
