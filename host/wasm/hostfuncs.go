package wasm

import (
	"bytes"
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/tetratelabs/wazero/api"

	"github.com/plantgate/plantgate/host"
	"github.com/plantgate/plantgate/sdk/abi"
)

// Log rate limit per plugin: a token bucket refilled at logRate lines a
// second, holding at most logBurst.
const (
	logRate  = 20
	logBurst = 50
)

// hostLog implements abi.ImportLog: (level i32, ptr i32, len i32) -> ().
// Lines over abi.MaxLog bytes are cut; lines past the rate limit and lines
// outside memory are dropped.
func (p *Plugin) hostLog(ctx context.Context, mod api.Module, stack []uint64) {
	hostExitIfSpent(ctx)
	level := slog.Level(api.DecodeI32(stack[0]))
	ptr, n := api.DecodeU32(stack[1]), api.DecodeU32(stack[2])
	if !p.log.Enabled(ctx, level) {
		return
	}
	b, ok := mod.Memory().Read(ptr, min(n, abi.MaxLog))
	if !ok {
		return
	}
	p.logLine(ctx, level, b)
}

// logLine logs one line of guest text through the plugin's rate limit.
func (p *Plugin) logLine(ctx context.Context, level slog.Level, text []byte, attrs ...any) {
	ok, dropped := p.logs.allow(p.clock())
	if !ok {
		p.stats.logDropped.Add(1)
		return
	}
	if dropped > 0 {
		p.log.WarnContext(ctx, "plugin log lines dropped by the rate limit", "dropped", dropped)
	}
	p.log.Log(ctx, level, string(text), attrs...)
}

// hostTokenLookup implements abi.ImportTokenLookup:
// (hashPtr i32, hashLen i32, outPtr i32, outCap i32) -> i32.
// ctx is the phase call's; the lookup ends a little before the call's
// deadline (see lookupContext).
func (p *Plugin) hostTokenLookup(ctx context.Context, mod api.Module, stack []uint64) {
	hostExitIfSpent(ctx)
	stack[0] = api.EncodeI32(p.tokenLookup(ctx, mod.Memory(),
		api.DecodeU32(stack[0]), api.DecodeU32(stack[1]), api.DecodeU32(stack[2]), api.DecodeU32(stack[3])))
}

func (p *Plugin) tokenLookup(ctx context.Context, mem api.Memory, hashPtr, hashLen, outPtr, outCap uint32) int32 {
	if hashLen != abi.DigestSize || mem == nil || uint64(outPtr)+uint64(outCap) > uint64(mem.Size()) {
		return abi.LookupBadArgument
	}
	h, ok := mem.Read(hashPtr, hashLen)
	if !ok {
		return abi.LookupBadArgument
	}
	if p.tokens == nil {
		return abi.LookupUnavailable
	}
	var digest [abi.DigestSize]byte
	copy(digest[:], h)
	t, err := p.token(ctx, digest)
	if err != nil {
		if host.Code(err) == host.ErrTokenNotFound {
			return abi.LookupNotFound
		}
		p.log.WarnContext(ctx, "plugin token lookup failed", "err", err)
		if tc, _ := ctx.Value(tokenCallKey{}).(*tokenCall); tc != nil {
			tc.storeFailed = true
		}
		return abi.LookupUnavailable
	}
	p.establish(ctx, digest, t)
	var rec []byte
	if buf, _ := ctx.Value(recordBufKey{}).(*[]byte); buf != nil {
		rec = appendTokenRecord((*buf)[:0], t)
		*buf = rec // kept for the instance's next lookup
	} else {
		rec = appendTokenRecord(nil, t)
	}
	if uint64(len(rec)) <= uint64(outCap) && !mem.Write(outPtr, rec) {
		return abi.LookupBadArgument
	}
	return int32(len(rec))
}

// establish makes t the request's principal when it is the token of the
// request's own credential and valid: a plugin that looks up some other
// digest establishes nothing. The first one established stays (Exchange).
func (p *Plugin) establish(ctx context.Context, digest [32]byte, t host.Token) {
	tc, _ := ctx.Value(tokenCallKey{}).(*tokenCall)
	p.establishFor(ctx, tc, digest, t)
}

// establishFor is establish with the call's tokenCall given: a kept
// decision (decisioncache.go) establishes what its call did, with no call.
func (p *Plugin) establishFor(ctx context.Context, tc *tokenCall, digest [32]byte, t host.Token) {
	if tc == nil || !tc.set || tc.digest != digest || t.Digest != digest || !host.TokenValid(t, p.clock()) {
		return
	}
	if x := host.ExchangeFrom(ctx); x != nil {
		x.SetPrincipal(t)
	}
}

// appendTokenRecord encodes t as an abi.TokenRecord.
func appendTokenRecord(dst []byte, t host.Token) []byte {
	return abi.AppendTokenRecord(dst, unixMilli(t.Created), unixMilli(t.Expires), t.Revoked,
		t.Digest[:], t.Name, t.Scopes...)
}

// unixMilli is t in Unix milliseconds, 0 for the zero time ("never").
func unixMilli(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixMilli()
}

// logLimiter is a token bucket shared by a plugin's instances.
type logLimiter struct {
	mu      sync.Mutex
	tokens  float64
	last    time.Time
	dropped int
}

func (l *logLimiter) init(now time.Time) {
	l.tokens, l.last = logBurst, now
}

// allow takes a token for one line at now. When it does, it also returns
// how many lines were dropped since the last allowed one.
func (l *logLimiter) allow(now time.Time) (ok bool, dropped int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if elapsed := now.Sub(l.last); elapsed > 0 {
		l.tokens = min(logBurst, l.tokens+elapsed.Seconds()*logRate)
		l.last = now
	}
	if l.tokens < 1 {
		l.dropped++
		return false, 0
	}
	l.tokens--
	dropped, l.dropped = l.dropped, 0
	return true, dropped
}

// logWriter turns a guest's stdout or stderr into log lines (a Go panic's
// message and stack arrive on stderr), each cut at abi.MaxLog. Only the
// goroutine calling into its instance writes to it.
type logWriter struct {
	p     *Plugin
	attrs []any // stream=stdout|stderr
	level slog.Level
	line  []byte
	skip  bool // the rest of a line that was cut
	// hold keeps complete lines in held until flush or take instead of
	// logging them as they come (stderr: see crash.go).
	hold bool
	held []string
}

func newLogWriter(p *Plugin, stream string, level slog.Level) *logWriter {
	return &logWriter{p: p, attrs: []any{"stream", stream}, level: level, hold: stream == "stderr"}
}

func (w *logWriter) Write(b []byte) (int, error) {
	n := len(b)
	for len(b) > 0 {
		i := bytes.IndexByte(b, '\n')
		end := len(b)
		if i >= 0 {
			end = i
		}
		if !w.skip {
			take := min(end, abi.MaxLog-len(w.line))
			w.line = append(w.line, b[:take]...)
			if take < end {
				w.endLine()
				w.skip = true
			}
		}
		if i < 0 {
			break
		}
		w.endLine()
		w.skip = false
		b = b[i+1:]
	}
	return n, nil
}

// endLine logs the pending line, or holds it.
func (w *logWriter) endLine() {
	if len(w.line) == 0 && !w.hold {
		return
	}
	switch {
	case !w.hold:
		w.p.logLine(context.Background(), w.level, w.line, w.attrs...)
	case len(w.held) < maxHeld:
		w.held = append(w.held, string(w.line))
	}
	w.line = w.line[:0]
}

// pending says whether anything waits to be logged.
func (w *logWriter) pending() bool { return len(w.line) > 0 || len(w.held) > 0 }

// flush logs the pending line and the held ones, if any.
func (w *logWriter) flush() {
	if len(w.line) > 0 {
		w.endLine()
	}
	for _, l := range w.held {
		if l != "" {
			w.p.logLine(context.Background(), w.level, []byte(l), w.attrs...)
		}
	}
	w.held = w.held[:0]
}

// take returns the held lines, and the pending one, without logging them.
func (w *logWriter) take() []string {
	if len(w.line) > 0 {
		w.endLine()
	}
	held := w.held
	w.held = nil
	return held
}

// lookupContext bounds a token lookup to end before the phase call's
// deadline, leaving the guest a fifth of the remaining time (at most 20 ms)
// to answer. Without that margin a slow store outlives the call: the host
// stops the guest at the deadline and the request fails as a plugin fault
// (500), where the plugin would have answered "store unavailable" (503).
func lookupContext(ctx context.Context) (context.Context, context.CancelFunc) {
	d, ok := ctx.Deadline()
	if !ok {
		return ctx, func() {}
	}
	margin := min(time.Until(d)/5, 20*time.Millisecond)
	return context.WithDeadline(ctx, d.Add(-margin))
}
