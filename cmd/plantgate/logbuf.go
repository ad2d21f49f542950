package main

import (
	"context"
	"io"
	"log/slog"
	"sync"
	"time"
)

// logBuffer holds log lines for up to a flush interval before one write,
// as nginx's access_log buffer= flush= does: with the access log on, a
// write(2) per request was the largest single cost of a request after the
// response's own write. Lines keep their order (one buffer, one lock); a
// line at Warn or above is written at once with everything before it
// (flushingHandler), and Flush empties the buffer at exit. What a crash
// that kills the process outright (SIGKILL, OOM) can lose is the lines of
// the last interval, at most: a Go panic's own report goes to stderr
// directly, unbuffered.
type logBuffer struct {
	mu       sync.Mutex
	w        io.Writer
	buf      []byte
	interval time.Duration
	armed    bool // a flush is scheduled
}

// logBufferMax is when a write empties the buffer before the interval.
const logBufferMax = 64 << 10

func newLogBuffer(w io.Writer, interval time.Duration) *logBuffer {
	return &logBuffer{w: w, interval: interval, buf: make([]byte, 0, logBufferMax)}
}

// Write keeps p (one slog record) for the next flush.
func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.buf)+len(p) > logBufferMax {
		if err := b.flushLocked(); err != nil {
			return 0, err
		}
		if len(p) > logBufferMax {
			return b.w.Write(p)
		}
	}
	b.buf = append(b.buf, p...)
	if !b.armed {
		b.armed = true
		time.AfterFunc(b.interval, func() { _ = b.Flush() })
	}
	return len(p), nil
}

// Flush writes what is held.
func (b *logBuffer) Flush() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.armed = false
	return b.flushLocked()
}

func (b *logBuffer) flushLocked() error {
	if len(b.buf) == 0 {
		return nil
	}
	_, err := b.w.Write(b.buf)
	b.buf = b.buf[:0]
	return err
}

// flushingHandler writes a record at Warn or above through at once, so a
// failure is on the terminal or in the collector when it happens.
type flushingHandler struct {
	slog.Handler
	buf *logBuffer
}

func (h flushingHandler) Handle(ctx context.Context, r slog.Record) error {
	err := h.Handler.Handle(ctx, r)
	if r.Level >= slog.LevelWarn {
		if ferr := h.buf.Flush(); err == nil {
			err = ferr
		}
	}
	return err
}

func (h flushingHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return flushingHandler{h.Handler.WithAttrs(as), h.buf}
}

func (h flushingHandler) WithGroup(name string) slog.Handler {
	return flushingHandler{h.Handler.WithGroup(name), h.buf}
}
