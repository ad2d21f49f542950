package http

import (
	"sync"
	"time"
)

// keysLogEvery is how often the error line of 50305 may be written. While
// the identity provider's keys are missing every access token is answered
// 50305, and anyone can send access tokens: a line per request would let
// any client fill the log. The provider's own warn line and /readyz say why.
const keysLogEvery = 10 * time.Second

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
