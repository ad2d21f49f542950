package main

import (
	"bytes"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"
)

// lockedBuffer is a bytes.Buffer safe for the flush timer's goroutine.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestLogBuffer: info lines wait for the interval, a warning goes out at
// once with the lines before it, in order, and the interval's flush writes
// the rest.
func TestLogBuffer(t *testing.T) {
	var out lockedBuffer
	buf := newLogBuffer(&out, 50*time.Millisecond)
	log := slog.New(flushingHandler{slog.NewTextHandler(buf, nil), buf})
	log.Info("one")
	log.Info("two")
	if got := out.String(); got != "" {
		t.Fatalf("written before the interval: %q", got)
	}
	log.Warn("three")
	if got := lines(out.String()); got != "one two three" {
		t.Fatalf("after a warning: %q, want one two three", got)
	}
	log.Info("four")
	deadline := time.Now().Add(5 * time.Second)
	for lines(out.String()) != "one two three four" {
		if time.Now().After(deadline) {
			t.Fatalf("the interval's flush did not come: %q", out.String())
		}
		time.Sleep(5 * time.Millisecond)
	}
	// A record larger than the buffer goes out whole, after what is held.
	log.Info("five")
	log.Info(strings.Repeat("x", logBufferMax))
	if got := lines(out.String()); !strings.HasPrefix(got, "one two three four five xxx") {
		t.Fatalf("after a large record: %.60q", got)
	}
}

// lines is each logged line's msg, space-separated.
func lines(s string) string {
	var msgs []string
	for _, l := range strings.Split(strings.TrimSpace(s), "\n") {
		if _, m, ok := strings.Cut(l, "msg="); ok {
			m, _, _ = strings.Cut(m, " ")
			msgs = append(msgs, m)
		}
	}
	return strings.Join(msgs, " ")
}
