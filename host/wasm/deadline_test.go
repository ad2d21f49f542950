package wasm

import (
	"context"
	"testing"
	"time"

	"github.com/plantgate/plantgate/host"
)

// TestCallContext: a call context ends at the plugin's timeout or the
// request's deadline, whichever is first, and once it has fired it reports
// itself spent.
func TestCallContext(t *testing.T) {
	t.Parallel()
	c := newCallContext()
	parent, cancel := context.WithTimeout(context.WithValue(context.Background(), tokenCallKey{}, "v"), time.Hour)
	defer cancel()
	ctx := c.begin(parent, time.Minute)
	if d, ok := ctx.Deadline(); !ok || time.Until(d) > time.Minute {
		t.Fatalf("Deadline() = %v %v, want within the timeout", d, ok)
	}
	if ctx.Value(tokenCallKey{}) != "v" || ctx.Err() != nil {
		t.Fatalf("Value %v, Err %v: want the parent's value and no error", ctx.Value(tokenCallKey{}), ctx.Err())
	}
	if !c.end() {
		t.Fatal("end() = false for a call well inside its deadline")
	}

	short, cancel2 := context.WithTimeout(context.Background(), 5*time.Millisecond)
	defer cancel2()
	ctx = c.begin(short, time.Minute)
	select {
	case <-ctx.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("not done 5 s after the request's 5 ms deadline")
	}
	if ctx.Err() != context.DeadlineExceeded || c.end() {
		t.Fatalf("Err %v, end() %v after the deadline; want DeadlineExceeded and spent", ctx.Err(), !c.end())
	}
}

// TestLoopStopsAtRequestDeadline: a request deadline shorter than the
// plugin's timeout stops a looping call, and the instance is replaced.
func TestLoopStopsAtRequestDeadline(t *testing.T) {
	t.Parallel()
	p := load(t, "loop", nil, Limits{Timeout: time.Minute}, Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := p.Authorize(ctx, host.AuthorizeRequest{Path: "/x"})
	if took := time.Since(start); took > 10*time.Second {
		t.Fatalf("took %v", took)
	}
	wantError(t, err, errFault)
	if s := p.Stats(); s.Discarded != 1 {
		t.Fatalf("Stats() = %+v, want the instance discarded", s)
	}
}
