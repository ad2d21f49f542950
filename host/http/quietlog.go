package http

import (
	"sync"
	"time"

	"github.com/plantgate/plantgate/host"
)

// quietLogEvery is how often the error line of each code in quietCodes may
// be written.
const quietLogEvery = 10 * time.Second

// quietCodes are the 5xx any client can cause at will, by sending access
// tokens: while the identity provider's keys are missing (50305), beyond
// the introspection rate (50306), while its introspection endpoint fails
// (50307). A line per request would let any client fill the log; each
// code's line is written once per quietLogEvery, the next one saying how
// many were held back. The provider's own warn line and /readyz say why.
var quietCodes = []int32{host.ErrKeysUnavailable, host.ErrIntrospectBusy, host.ErrIntrospectFailed}

// newQuietLogs returns a throttledLog for each of quietCodes on clock now.
func newQuietLogs(now func() time.Time) map[int32]*throttledLog {
	m := make(map[int32]*throttledLog, len(quietCodes))
	for _, c := range quietCodes {
		m[c] = &throttledLog{every: quietLogEvery, now: now}
	}
	return m
}

// throttledLog lets one line through per interval and counts the ones it
// held back, for the next line to say.
type throttledLog struct {
	every time.Duration
	now   func() time.Time // time.Now; a test's clock

	mu         sync.Mutex
	next       time.Time // no line before this
	suppressed int
}

// allow reports whether a line may be written now and, when it may, how
// many were held back since the last one.
func (l *throttledLog) allow() (bool, int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	if now.Before(l.next) {
		l.suppressed++
		return false, 0
	}
	n := l.suppressed
	l.next, l.suppressed = now.Add(l.every), 0
	return true, n
}
