package decisionlog

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/plantgate/plantgate/host"
)

// blockingWriter holds every Write until release is closed, and says when
// the first one started.
type blockingWriter struct {
	started chan struct{}
	release chan struct{}
	once    sync.Once
	mu      sync.Mutex
	buf     bytes.Buffer
}

func (w *blockingWriter) Write(p []byte) (int, error) {
	w.once.Do(func() { close(w.started) })
	<-w.release
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.Write(p)
}

func decision(i int) *host.Decision {
	return &host.Decision{Plugin: "auth", Phase: "authorize", Outcome: "allow", Start: time.Unix(1700000000, 0),
		Took: time.Duration(i), Input: host.DecisionInput{Method: "GET", Path: fmt.Sprintf("/plants/%d", i)}}
}

// A full queue drops a line and counts it rather than making the request
// wait: with the writer stuck on the first line and a queue of one, the
// third to the seventh lines are dropped, exactly, and Record returns.
func TestFullQueueDropsAndCounts(t *testing.T) {
	t.Parallel()
	w := &blockingWriter{started: make(chan struct{}), release: make(chan struct{})}
	l, err := Open(Config{Writer: w, Queue: 1})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	l.Record(ctx, decision(1))
	<-w.started // the writer holds line 1 (the bufio buffer was flushed into it)
	l.Record(ctx, decision(2))
	for i := 3; i <= 7; i++ {
		l.Record(ctx, decision(i)) // returns at once: the queue is full
	}
	if got := l.Dropped(); got != 5 {
		t.Fatalf("dropped %d, want 5", got)
	}
	close(w.release)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(w.buf.String(), "\n"), "\n")
	if len(lines) != 2 || !strings.Contains(lines[0], `"path":"/plants/1"`) || !strings.Contains(lines[1], `"path":"/plants/2"`) {
		t.Fatalf("written lines:\n%s", w.buf.String())
	}
	if l.Written() != 2 || l.Dropped() != 5 {
		t.Fatalf("written %d dropped %d", l.Written(), l.Dropped())
	}
	l.Record(ctx, decision(8)) // after Close: dropped, never a panic
	if l.Dropped() != 6 {
		t.Fatalf("dropped after close %d, want 6", l.Dropped())
	}
}

// Sampling is by request id: a request's decisions go together, and about
// the rate of requests is kept.
func TestSampleByRequestID(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	l, err := Open(Config{Writer: &buf, SampleRate: 0.25})
	if err != nil {
		t.Fatal(err)
	}
	kept := 0
	const n = 4000
	for i := range n {
		ctx, x := host.NewExchange(context.Background())
		x.RequestID = fmt.Sprintf("req-%d", i)
		first := l.Wants(ctx)
		for range 3 {
			if l.Wants(ctx) != first {
				t.Fatalf("request %s sampled one time and not another", x.RequestID)
			}
		}
		if first {
			kept++
		}
	}
	if kept < n/4-200 || kept > n/4+200 {
		t.Fatalf("kept %d of %d requests at rate 0.25", kept, n)
	}
	l.Close()
	for _, bad := range []float64{-0.1, 1.5} {
		if _, err := Open(Config{Writer: &buf, SampleRate: bad}); err == nil || !strings.Contains(err.Error(), "want a number from 0 to 1") {
			t.Fatalf("rate %v: %v", bad, err)
		}
	}
}

// A file is rotated to PATH.1 before it would pass MaxBytes: the log never
// holds more than two files of about MaxBytes, and no line is split.
func TestRotation(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "decisions.log")
	l, err := Open(Config{Path: path, MaxBytes: 2000})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for i := range 40 {
		l.Record(ctx, decision(i))
		for l.Written() < uint64(i+1) { // one at a time: none dropped
			time.Sleep(time.Millisecond)
		}
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	cur, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	old, err := os.ReadFile(path + ".1")
	if err != nil {
		t.Fatal(err)
	}
	if len(cur) > 2000 || len(old) > 2000 || len(old) < 1000 {
		t.Fatalf("sizes %d and %d, bound 2000", len(cur), len(old))
	}
	last := 0
	for _, b := range [][]byte{old, cur} {
		sc := bufio.NewScanner(bytes.NewReader(b))
		for sc.Scan() {
			var ln struct {
				Input struct{ Path string } `json:"input"`
			}
			if err := json.Unmarshal(sc.Bytes(), &ln); err != nil {
				t.Fatalf("line %q: %v", sc.Text(), err)
			}
			var i int
			fmt.Sscanf(ln.Input.Path, "/plants/%d", &i)
			if i <= last && last != 0 {
				t.Fatalf("line for %d after %d", i, last)
			}
			last = i
		}
	}
	if last != 39 {
		t.Fatalf("last line is for %d, want 39", last)
	}
}

// TestRotationFailureRecovers: a rotation that cannot rename the full file
// (here a directory holds PATH.1) counts an error and keeps writing to the
// file; once the obstacle is gone, the next line rotates. Before, the failed
// rotation left the file closed and every later line was an error until a
// restart.
func TestRotationFailureRecovers(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "decisions.log")
	if err := os.MkdirAll(filepath.Join(path+".1", "in-the-way"), 0o755); err != nil {
		t.Fatal(err)
	}
	l, err := Open(Config{Path: path, MaxBytes: 2000})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	record := func(from, to int) {
		for i := from; i < to; i++ {
			l.Record(ctx, decision(i))
			for deadline := time.Now().Add(10 * time.Second); l.Written() < uint64(i+1) && time.Now().Before(deadline); {
				time.Sleep(time.Millisecond) // one at a time: none dropped
			}
		}
	}
	record(0, 20)
	if l.Written() != 20 || l.Errors() == 0 {
		t.Fatalf("with PATH.1 in the way: written %d, errors %d; want 20 written and the failed rotations counted", l.Written(), l.Errors())
	}
	if err := os.RemoveAll(path + ".1"); err != nil {
		t.Fatal(err)
	}
	record(20, 40)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if l.Written() != 40 {
		t.Fatalf("written %d of 40 after the obstacle went", l.Written())
	}
	cur, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(path + ".1"); err != nil || !fi.Mode().IsRegular() || len(cur) > 2000 {
		t.Fatalf("after the obstacle went: PATH.1 %v %v, PATH %d bytes (bound 2000)", fi, err, len(cur))
	}
	if !bytes.Contains(cur, []byte(`"/plants/39"`)) {
		t.Fatalf("the last line is not in the new file:\n%s", cur)
	}
}

// The queue is bounded by bytes as well as lines: with the writer stuck
// and room for 4096 lines but 2 KiB, only what fits the bytes waits, and
// the rest is dropped and counted.
func TestQueueBoundedByBytes(t *testing.T) {
	t.Parallel()
	w := &blockingWriter{started: make(chan struct{}), release: make(chan struct{})}
	l, err := Open(Config{Writer: w, QueueBytes: 2 << 10})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	l.Record(ctx, decision(1))
	<-w.started // taken off the queue: the queue is empty again
	size := len(encode(ctx, decision(2), ""))
	for i := 2; i < 102; i++ {
		l.Record(ctx, decision(i))
	}
	fits := (2 << 10) / size
	if got := l.Dropped(); got != uint64(100-fits) {
		t.Fatalf("dropped %d, want %d (lines of %d bytes, %d fit in 2 KiB)", got, 100-fits, size, fits)
	}
	close(w.release)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if l.Written() != uint64(1+fits) {
		t.Fatalf("written %d, want %d", l.Written(), 1+fits)
	}
}

// A record keeps the first bytes of each field a client controls and the
// original length, and writes '<' as itself.
func TestClientFieldsClipped(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	l, err := Open(Config{Writer: &buf})
	if err != nil {
		t.Fatal(err)
	}
	name := strings.Repeat("<", 1<<20)
	d := decision(1)
	d.Phase, d.Input.Path = "validate", "/plants/"+strings.Repeat("9", 5000)
	d.Input.Plant = &host.Plant{ID: 1, Name: name, Tag: "a&b", HasTag: true}
	l.Record(context.Background(), d)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	line := buf.String()
	want := `"input":{"method":"GET","path":"/plants/` + strings.Repeat("9", host.RecordPathBytes-len("/plants/")) + `","path_bytes":5008,` +
		`"plant":{"id":1,"name":"` + strings.Repeat("<", host.RecordNameBytes) + `","name_bytes":1048576,"tag":"a&b"}}`
	if !strings.Contains(line, want) || len(line) > 2<<10 {
		t.Fatalf("line of %d bytes:\n%s\nwant it to hold\n%s", len(line), line, want)
	}
}
