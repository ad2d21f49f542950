package wasm

import (
	"fmt"
	"strconv"
	"strings"
)

// A Go guest that panics outside the SDK's recovery, or runs out of memory,
// writes its last words to stderr, the Go runtime's dump, and exits: dozens
// of lines, of which two matter. The instance's stderr is therefore held
// for the length of each call (logWriter.hold) and, when the call fails,
// read here into the one line that reports the fault; a call that succeeds
// logs what it wrote, line by line.

// maxHeld bounds the stderr lines held for one call; a Go crash names its
// cause and the failing goroutine's first frames well within it.
const maxHeld = 256

// guestCrash is what a guest's stderr says about how it died.
type guestCrash struct {
	what  string // "panic: boom", "fatal error: runtime: out of memory"
	where string // "main.authorize at /src/main.go:41", "" when unknown
	oom   bool
}

// readCrash reads a Go runtime's dump, or a Rust guest's panic, in lines;
// ok is false when the lines hold neither.
func readCrash(lines []string) (c guestCrash, ok bool) {
	if c, ok := readRustCrash(lines); ok {
		return c, true
	}
	i := 0
	for ; i < len(lines); i++ {
		l := lines[i]
		if strings.HasPrefix(l, "panic: ") || strings.HasPrefix(l, "fatal error: ") {
			c.what = strings.TrimSuffix(l, " [recovered]")
			break
		}
	}
	if i == len(lines) {
		return c, false
	}
	c.oom = strings.Contains(c.what, "out of memory") || strings.Contains(c.what, "cannot allocate memory")
	// The first frame of the running goroutine that is not the runtime's:
	// a function line, then a tab and file:line.
	for i++; i < len(lines) && !strings.HasPrefix(lines[i], "goroutine "); i++ {
	}
	for i++; i+1 < len(lines); i++ {
		fn, at := lines[i], lines[i+1]
		if fn == "" || strings.HasPrefix(fn, "goroutine ") {
			break
		}
		if !strings.HasPrefix(at, "\t") {
			continue
		}
		i++
		name := fn
		if j := strings.LastIndexByte(name, '('); j > 0 {
			name = name[:j]
		}
		if strings.HasPrefix(name, "runtime.") || strings.HasPrefix(name, "panic") || strings.HasPrefix(name, "internal/") {
			continue
		}
		file, _, _ := strings.Cut(strings.TrimPrefix(at, "\t"), " +0x")
		c.where = name + " at " + file
		break
	}
	return c, true
}

// readRustCrash reads what Rust's standard library writes to stderr before
// a wasm32-wasi guest aborts (an unreachable trap): "thread 'T' panicked at
// 'MSG', FILE:L:C" up to Rust 1.72, "thread 'T' panicked at FILE:L:C:"
// then MSG on the lines after since 1.73; "memory allocation of N bytes
// failed" when out of memory.
func readRustCrash(lines []string) (c guestCrash, ok bool) {
	for i, l := range lines {
		if strings.HasPrefix(l, "memory allocation of ") && strings.HasSuffix(l, " failed") {
			return guestCrash{what: "fatal error: " + l, oom: true}, true
		}
		_, rest, found := strings.Cut(l, "' panicked at ")
		if !found || !strings.HasPrefix(l, "thread '") {
			continue
		}
		if strings.HasPrefix(rest, "'") {
			// 'MSG', FILE:L:C; MSG may hold "', ", the location cannot.
			j := strings.LastIndex(rest, "', ")
			if j < 0 {
				return guestCrash{what: "panic: " + strings.Trim(rest, "'")}, true
			}
			return guestCrash{what: "panic: " + rest[1:j], where: rest[j+3:]}, true
		}
		var msg []string
		for _, m := range lines[i+1:] {
			if m == "" || strings.HasPrefix(m, "note: ") || strings.HasPrefix(m, "stack backtrace:") {
				break
			}
			msg = append(msg, m)
		}
		return guestCrash{what: "panic: " + strings.Join(msg, " "), where: strings.TrimSuffix(rest, ":")}, true
	}
	return c, false
}

// String is the crash in one line.
func (c guestCrash) String() string {
	if c.where == "" {
		return c.what
	}
	return c.what + ", in " + c.where
}

// crashed returns the reason for a failed call from what the instance
// wrote to stderr during it, dropping the dump, or "" when it wrote no Go
// crash (its lines are then logged as usual).
func (p *Plugin) crashed(in *instance, export string) string {
	c, ok := readCrash(in.stderr.held)
	if ok {
		in.stderr.take()
	}
	switch {
	case !ok:
		return ""
	case c.oom:
		return export + " ran out of memory (limits.memory_mib " + strconv.FormatUint(uint64(p.limits.MemoryMiB), 10) + "): " + c.String()
	case strings.HasPrefix(c.what, "panic: "):
		return export + " panicked: " + strings.TrimPrefix(c.String(), "panic: ")
	}
	return export + " crashed: " + c.String()
}

// withCrash adds to an instance's start-up error the Go crash its stderr
// holds, if any, instead of logging the dump.
func withCrash(err error, in *instance) error {
	if c, ok := readCrash(in.stderr.held); ok {
		in.stderr.take()
		return fmt.Errorf("%w: %s", err, c)
	}
	in.stderr.flush()
	return err
}

// exportOf names the export that serves phase, for messages.
func exportOf(phase string) string {
	for _, ph := range phaseExports {
		if ph.name == phase {
			return ph.export
		}
	}
	return phase
}
