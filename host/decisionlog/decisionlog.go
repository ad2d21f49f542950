// Package decisionlog writes plugin decisions as JSON lines, one per
// decision, with the fields of OPA's decision logs where they fit:
//
//	{"decision_id":"…","timestamp":"2026-11-25T14:30:00.123456789Z",
//	 "labels":{"app":"plantgate","version":"…"},"req_id":"…","requested_by":"127.0.0.1",
//	 "path":"plantgate/authorize/bearer-auth","plugin":"bearer-auth","phase":"authorize",
//	 "shadow":false,"version":"<the module's SHA-256>",
//	 "input":{"method":"POST","path":"/plants","route":"/plants"},
//	 "result":{"decision":"allow","principal":"bootstrap"},
//	 "metrics":{"timer_plugin_call_ns":41234}}
//
// Writing never blocks a request: Record encodes the line (only for a
// sampled request) and hands it to a queue bounded by lines and by bytes;
// one goroutine writes the queue out. A line that finds the queue full is
// dropped and counted
// (Dropped, plantgate_decision_log_dropped_total). A file is bounded by
// rotation: once it would pass MaxBytes it is renamed to PATH.1 (replacing
// the previous PATH.1) and a new one is started, so the log never holds
// more than about twice MaxBytes on disk.
//
// Every field a client controls is bounded (host.Clip): a plant's name and
// tag keep their first host.RecordNameBytes and their original length in
// "name_bytes" and "tag_bytes", the path its first host.RecordPathBytes and
// "path_bytes"; the other strings host.RecordTextBytes. A line is thus a
// few KiB at most whatever the request, and it is written without HTML
// escaping ('<' stays one byte).
//
// What is never logged: the credential, its digest, any request header, the
// request body beyond the canonical plant the validate phase judged, and
// the text of a plugin's fault (its message is the fixed one the client got).
package decisionlog

import (
	"bufio"
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash/maphash"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"

	"github.com/plantgate/plantgate/host"
)

// Config configures a Log; zero fields take their defaults.
type Config struct {
	// Path is the file lines are appended to; "-" writes to standard output
	// (no rotation).
	Path string

	// Writer, when set, is written to instead of Path (tests).
	Writer io.Writer

	// SampleRate is the share of requests whose decisions are logged, from
	// 0 (none) to 1 (all). Every decision of a sampled request is logged:
	// the choice hangs on the request id.
	//
	// Optional. Default: 1.
	SampleRate float64

	// MaxBytes is the size a file may reach before it is rotated.
	//
	// Optional. Default: 100 MiB.
	MaxBytes int64

	// Queue is how many lines may wait for the writer; past it lines are
	// dropped.
	//
	// Optional. Default: 4096.
	Queue int

	// QueueBytes bounds the bytes of the lines waiting for the writer;
	// past it lines are dropped, as past Queue.
	//
	// Optional. Default: 8 MiB.
	QueueBytes int64

	// Version labels every line (labels.version): the gateway's version.
	Version string
}

// Defaults.
const (
	DefaultMaxBytes   = 100 << 20
	DefaultQueue      = 4096
	DefaultQueueBytes = 8 << 20
)

// Log is a running decision log. It implements host.DecisionRecorder.
type Log struct {
	cfg       Config
	threshold uint64 // a request is sampled when its id hashes below it
	all       bool
	seed      maphash.Seed

	lines   chan []byte
	queued  atomic.Int64 // bytes of the lines in lines
	done    chan struct{}
	closed  atomic.Bool
	mu      sync.RWMutex // Record holds it read-locked while sending; Close write-locks before closing lines
	dropped atomic.Uint64
	written atomic.Uint64
	errs    atomic.Uint64

	w       *bufio.Writer
	file    *os.File // nil for stdout or Writer
	size    int64
	lastErr atomic.Pointer[string]
}

var _ host.DecisionRecorder = (*Log)(nil)

// Open starts a decision log.
func Open(cfg Config) (*Log, error) {
	if cfg.SampleRate == 0 {
		cfg.SampleRate = 1
	}
	if cfg.SampleRate < 0 || cfg.SampleRate > 1 || math.IsNaN(cfg.SampleRate) {
		return nil, fmt.Errorf("decision log sample rate %v: want a number from 0 to 1", cfg.SampleRate)
	}
	if cfg.MaxBytes <= 0 {
		cfg.MaxBytes = DefaultMaxBytes
	}
	if cfg.Queue <= 0 {
		cfg.Queue = DefaultQueue
	}
	if cfg.QueueBytes <= 0 {
		cfg.QueueBytes = DefaultQueueBytes
	}
	l := &Log{cfg: cfg, seed: maphash.MakeSeed(), lines: make(chan []byte, cfg.Queue), done: make(chan struct{})}
	l.all = cfg.SampleRate >= 1
	l.threshold = uint64(cfg.SampleRate * math.MaxUint64)
	switch {
	case cfg.Writer != nil:
		l.w = bufio.NewWriter(cfg.Writer)
	case cfg.Path == "-":
		l.w = bufio.NewWriter(os.Stdout)
	case cfg.Path == "":
		return nil, errors.New("decision log: no path (use - for standard output)")
	default:
		if err := l.open(); err != nil {
			return nil, err
		}
	}
	go l.run()
	return l, nil
}

func (l *Log) open() error {
	f, err := os.OpenFile(l.cfg.Path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o640)
	if err != nil {
		return fmt.Errorf("decision log: %w", err)
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return fmt.Errorf("decision log: %w", err)
	}
	l.file, l.size = f, st.Size()
	if l.w == nil {
		l.w = bufio.NewWriter(f)
	} else {
		l.w.Reset(f)
	}
	return nil
}

// Wants implements host.DecisionRecorder: whether the request of ctx is
// sampled. It decides by the request id, so a request's decisions (live
// and shadow) are logged together or not at all.
func (l *Log) Wants(ctx context.Context) bool {
	if l.all {
		return true
	}
	if l.threshold == 0 {
		return false
	}
	if x := host.ExchangeFrom(ctx); x != nil && x.RequestID != "" {
		return maphash.String(l.seed, x.RequestID) < l.threshold
	}
	return rand.Uint64() < l.threshold
}

// Record implements host.DecisionRecorder: it encodes d as a line and
// queues it, or drops it when the queue is full.
func (l *Log) Record(ctx context.Context, d *host.Decision) {
	line := encode(ctx, d, l.cfg.Version)
	l.mu.RLock()
	defer l.mu.RUnlock()
	n := int64(len(line))
	if l.closed.Load() || l.queued.Add(n) > l.cfg.QueueBytes {
		l.queued.Add(-n)
		l.dropped.Add(1)
		return
	}
	select {
	case l.lines <- line:
	default:
		l.queued.Add(-n)
		l.dropped.Add(1)
	}
}

// Dropped is how many lines were dropped: the queue was full, or the log
// closed.
func (l *Log) Dropped() uint64 { return l.dropped.Load() }

// Written is how many lines were written out.
func (l *Log) Written() uint64 { return l.written.Load() }

// Errors is how many lines failed to be written (a full disk, a rotation
// that failed).
func (l *Log) Errors() uint64 { return l.errs.Load() }

// Close writes out the queued lines and closes the file.
func (l *Log) Close() error {
	l.mu.Lock()
	if l.closed.Swap(true) {
		l.mu.Unlock()
		return nil
	}
	close(l.lines)
	l.mu.Unlock()
	<-l.done
	if l.file != nil {
		return l.file.Close()
	}
	return nil
}

func (l *Log) run() {
	defer close(l.done)
	for line := range l.lines {
		l.queued.Add(-int64(len(line)))
		l.write(line)
		if len(l.lines) == 0 {
			l.flush()
		}
	}
	l.flush()
}

func (l *Log) write(line []byte) {
	if l.file == nil && l.cfg.Path != "" {
		// A rotation that could not reopen the file: try again, so one
		// failure does not end the log until a restart.
		if err := l.open(); err != nil {
			l.fail(err)
			return
		}
	}
	if l.file != nil && l.size > 0 && l.size+int64(len(line)) > l.cfg.MaxBytes {
		if err := l.rotate(); err != nil {
			l.fail(err)
			if l.file == nil {
				return
			}
			// Not renamed, but reopened: the line goes on past the bound,
			// and the next one tries the rotation again.
		}
	}
	if _, err := l.w.Write(line); err != nil {
		l.fail(err)
		return
	}
	l.size += int64(len(line))
	l.written.Add(1)
}

// rotate renames the full file to PATH.1 and starts a new one. A rename
// that fails leaves the full file open again; a reopen that fails leaves
// no file, which the next write opens again.
func (l *Log) rotate() error {
	if err := l.w.Flush(); err != nil {
		return err
	}
	err := l.file.Close()
	l.file = nil
	if err != nil {
		return err
	}
	renamed := os.Rename(l.cfg.Path, l.cfg.Path+".1")
	if err := l.open(); err != nil {
		return err
	}
	return renamed
}

func (l *Log) flush() {
	if err := l.w.Flush(); err != nil {
		l.fail(err)
	}
}

func (l *Log) fail(err error) {
	l.errs.Add(1)
	s := err.Error()
	l.lastErr.Store(&s)
}

// line is the JSON form of one decision.
type line struct {
	DecisionID  string            `json:"decision_id"`
	Timestamp   time.Time         `json:"timestamp"`
	Labels      map[string]string `json:"labels"`
	ReqID       string            `json:"req_id,omitempty"`
	RequestedBy string            `json:"requested_by,omitempty"`
	Path        string            `json:"path"`
	Plugin      string            `json:"plugin"`
	Phase       string            `json:"phase"`
	Shadow      bool              `json:"shadow"`
	Version     string            `json:"version"`
	Input       input             `json:"input"`
	Result      result            `json:"result"`
	Metrics     metrics           `json:"metrics"`
}

type input struct {
	Method    string `json:"method,omitempty"`
	Path      string `json:"path,omitempty"`
	PathBytes int    `json:"path_bytes,omitempty"` // the path's length when clipped
	Route     string `json:"route,omitempty"`
	PathID    *int64 `json:"path_id,omitempty"`
	Plant     *plant `json:"plant,omitempty"`
	Principal string `json:"principal,omitempty"`
}

type plant struct {
	ID        int64   `json:"id"`
	Name      string  `json:"name"`
	NameBytes int     `json:"name_bytes,omitempty"` // the name's length when clipped
	Tag       *string `json:"tag,omitempty"`
	TagBytes  int     `json:"tag_bytes,omitempty"` // the tag's length when clipped
}

type result struct {
	Decision  string `json:"decision"`
	Code      int32  `json:"code,omitempty"`
	Message   string `json:"message,omitempty"`
	Principal string `json:"principal,omitempty"`
}

type metrics struct {
	TimerPluginCallNS int64 `json:"timer_plugin_call_ns"`
}

// encode makes d's line, every client-controlled field clipped.
// encoding/json copies every string, so nothing in the line aliases the
// request's buffers.
func encode(ctx context.Context, d *host.Decision, version string) []byte {
	text := func(s string) string { return host.ClipString(s, host.RecordTextBytes) }
	ln := line{
		DecisionID: uuid.NewString(),
		Timestamp:  d.Start.UTC(),
		Labels:     map[string]string{"app": "plantgate", "version": version},
		Path:       "plantgate/" + d.Phase + "/" + d.Plugin,
		Plugin:     d.Plugin,
		Phase:      d.Phase,
		Shadow:     d.Shadow,
		Version:    hex.EncodeToString(d.SHA256[:]),
		Input: input{
			Method: text(d.Input.Method), Route: text(d.Input.Route), Principal: text(d.Input.Principal),
		},
		Result:  result{Decision: d.Outcome, Code: d.Code, Message: text(d.Message), Principal: text(d.Principal)},
		Metrics: metrics{TimerPluginCallNS: d.Took.Nanoseconds()},
	}
	ln.Input.Path, ln.Input.PathBytes = host.Clip(d.Input.Path, host.RecordPathBytes)
	if x := host.ExchangeFrom(ctx); x != nil {
		ln.ReqID = text(x.RequestID)
		if x.Client.IsValid() {
			ln.RequestedBy = x.Client.String()
		}
	}
	if d.Input.HasPathID {
		id := d.Input.PathID
		ln.Input.PathID = &id
	}
	if p := d.Input.Plant; p != nil {
		ln.Input.Plant = &plant{ID: p.ID}
		ln.Input.Plant.Name, ln.Input.Plant.NameBytes = host.Clip(p.Name, host.RecordNameBytes)
		if p.HasTag {
			tag, n := host.Clip(p.Tag, host.RecordNameBytes)
			ln.Input.Plant.Tag, ln.Input.Plant.TagBytes = &tag, n
		}
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(&ln); err != nil { // no field of line can fail to encode
		panic(err)
	}
	return b.Bytes() // Encode ends it with a newline
}
