package webhook

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"sync"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/plantgate/plantgate/host"
)

// Options configure a Deliverer. Zero fields take OptionsDefault's values.
type Options struct {
	// Timeout bounds one attempt, connecting included.
	//
	// Optional. Default: 10s
	Timeout time.Duration
	// Backoff is the wait before the first retry; each retry doubles it,
	// and a random part of up to half of it spreads retries out (jitter).
	//
	// Optional. Default: 5s
	Backoff time.Duration
	// MaxAttempts is how many attempts a delivery gets before it is failed
	// and kept for replay.
	//
	// Optional. Default: 8
	MaxAttempts int
	// AllowPrivate lets deliveries reach loopback, private, link-local and
	// metadata addresses (tests, private networks).
	AllowPrivate bool
	// Consumer names this gateway in the outbox consumer group. A gateway
	// restarted under the same name resumes its unacknowledged entries at
	// once; other gateways take them over after ClaimIdle.
	//
	// Optional. Default: hostname-pid
	Consumer string
	// ClaimIdle is how long an outbox entry given to a gateway may stay
	// unacknowledged before another gateway takes it over (XAUTOCLAIM).
	//
	// Optional. Default: 1m
	ClaimIdle time.Duration
	// Poll is how often an endpoint's worker looks for due deliveries it
	// was not woken for (retries and other gateways' leftovers), how often
	// the endpoint list is read, and how often at most an outbox shard is
	// trimmed of what was delivered.
	//
	// Optional. Default: 1s
	Poll time.Duration
	// Concurrency is the most attempts in flight to one endpoint.
	//
	// Optional. Default: 4
	Concurrency int
	// Batch is the most outbox entries read at once from a shard.
	//
	// Optional. Default: 100
	Batch int
	// Pace is how long a shard's reader waits, after a read that found some
	// entries but fewer than Batch, before it reads again. Under load the
	// entries of that time then come in one read, with one endpoint list
	// read and one acknowledgement, instead of a round trip of each for
	// every few creates (issue 14: three round trips per ~5 entries, more
	// outbox round trips than creates cost); each delivery may start up to
	// Pace later. An entry after a quiet spell is read at once: an empty
	// read does not pace. Negative: no pacing.
	//
	// Optional. Default: 20ms
	Pace time.Duration

	// Tracer, when set, makes a span of each delivery attempt (kind client),
	// a child of the span that wrote the event when the event carries one
	// (host.Event.TraceParent), and sends its traceparent with the POST.
	//
	// Optional. Default: nil (no spans, no traceparent header).
	Tracer trace.Tracer

	Logger   *slog.Logger // Optional. Default: discard
	Observer Observer     // Optional. Default: none
}

// OptionsDefault holds the value every zero Options field takes.
var OptionsDefault = Options{
	Timeout:     10 * time.Second,
	Backoff:     5 * time.Second,
	MaxAttempts: 8,
	ClaimIdle:   time.Minute,
	Poll:        time.Second,
	Concurrency: 4,
	Batch:       100,
	Pace:        20 * time.Millisecond,
}

func optionsDefault(o Options) Options {
	d := OptionsDefault
	if o.Timeout <= 0 {
		o.Timeout = d.Timeout
	}
	if o.Backoff <= 0 {
		o.Backoff = d.Backoff
	}
	if o.MaxAttempts <= 0 {
		o.MaxAttempts = d.MaxAttempts
	}
	if o.ClaimIdle <= 0 {
		o.ClaimIdle = d.ClaimIdle
	}
	if o.Poll <= 0 {
		o.Poll = d.Poll
	}
	if o.Concurrency <= 0 {
		o.Concurrency = d.Concurrency
	}
	if o.Batch <= 0 {
		o.Batch = d.Batch
	}
	switch {
	case o.Pace == 0:
		o.Pace = d.Pace
	case o.Pace < 0:
		o.Pace = 0
	}
	if o.Consumer == "" {
		h, _ := os.Hostname()
		o.Consumer = fmt.Sprintf("%s-%d", h, os.Getpid())
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Observer == nil {
		o.Observer = nopObserver{}
	}
	return o
}

// Observer is told about attempts and finished deliveries (host/metrics).
type Observer interface {
	// WebhookAttempt: result is 2xx, 3xx, 4xx, 5xx, timeout, refused
	// (a forbidden address) or error (connection failed).
	WebhookAttempt(result string, took time.Duration)
	// WebhookDelivery: outcome is delivered, failed (attempts exhausted or
	// 410) or retry (another attempt is scheduled).
	WebhookDelivery(outcome string)
}

type nopObserver struct{}

func (nopObserver) WebhookAttempt(string, time.Duration) {}
func (nopObserver) WebhookDelivery(string)               {}

// Deliverer reads the outbox and delivers its events. Start it once; Close
// stops it.
type Deliverer struct {
	store  host.WebhookStore
	opts   Options
	client *http.Client
	lease  time.Duration

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu      sync.Mutex
	workers map[string]*worker // by endpoint id

	wait func(time.Duration) // a reader's pace (pause; tests observe it)
}

// Consumer is the name this Deliverer reads the outbox as: Options.Consumer,
// or the hostname-pid default, so a log line can name the one in use.
func (d *Deliverer) Consumer() string { return d.opts.Consumer }

// New returns a Deliverer on store; nothing runs until Start.
func New(store host.WebhookStore, opts Options) *Deliverer {
	opts = optionsDefault(opts)
	dialer := &net.Dialer{Timeout: opts.Timeout}
	if !opts.AllowPrivate {
		dialer.Control = dialControl
	}
	transport := &http.Transport{
		Proxy:                 nil, // a proxy would dial for us, past the address check
		DialContext:           dialer.DialContext,
		ForceAttemptHTTP2:     true,
		MaxIdleConnsPerHost:   opts.Concurrency,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   opts.Timeout,
		ResponseHeaderTimeout: opts.Timeout,
	}
	d := &Deliverer{
		store: store,
		opts:  opts,
		client: &http.Client{
			Transport: transport,
			// A redirect is an answer that is not 2xx: retried, never followed
			// (following would also sidestep the URL's vetting).
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		},
		// An attempt takes at most Timeout; the lease outlasts it with room
		// for recording the outcome.
		lease:   2*opts.Timeout + time.Second,
		workers: make(map[string]*worker),
	}
	d.wait = d.pause
	return d
}

// Start creates the consumer group, makes sure a store with endpoints
// records events (recordEvents: before Start returns, so before the
// gateway serves a write), and starts one reader per outbox shard and the
// endpoint workers. It fails only when the store cannot be reached.
func (d *Deliverer) Start(ctx context.Context) error {
	if err := d.store.EnsureEventGroup(ctx); err != nil {
		return fmt.Errorf("start webhook delivery: %w", err)
	}
	eps, err := d.store.Endpoints(ctx)
	if err != nil {
		return fmt.Errorf("start webhook delivery: %w", err)
	}
	recorded, err := d.recordEvents(ctx, eps, time.Time{})
	if err != nil {
		return fmt.Errorf("start webhook delivery: %w", err)
	}
	d.ctx, d.cancel = context.WithCancel(context.Background())
	for shard := range d.store.EventShards() {
		d.wg.Go(func() { d.readShard(shard) })
	}
	d.wg.Go(func() { d.watchEndpoints(recorded) })
	return nil
}

// Close stops reading and delivering. Attempts in flight are abandoned
// and their deliveries left due, so that they are made again, here after a
// restart or by another gateway. It returns when everything has stopped, or
// with ctx's error.
func (d *Deliverer) Close(ctx context.Context) error {
	if d.cancel == nil {
		return nil
	}
	d.cancel()
	if i, ok := d.store.(interface{ InterruptEventReads() }); ok {
		i.InterruptEventReads()
	}
	done := make(chan struct{})
	go func() { d.wg.Wait(); close(done) }()
	select {
	case <-done:
		d.client.CloseIdleConnections()
		return nil
	case <-ctx.Done():
		return fmt.Errorf("webhook delivery still stopping: %w", ctx.Err())
	}
}

// readShard reads one shard's outbox: first what this consumer was given
// and did not acknowledge before (a restart under the same name), then new
// entries, and every ClaimIdle/2 what dead consumers left behind. After it
// has acknowledged entries it trims the stream, at most once per Poll (and
// once at start, for what a stopped gateway acknowledged last).
func (d *Deliverer) readShard(shard int) {
	log := d.opts.Logger.With("shard", shard)
	failing := false
	fail := func(what string, err error) {
		if !failing && d.ctx.Err() == nil {
			log.Error("webhook outbox: "+what+"; retrying", "err", err)
		}
		failing = true
		d.pause(time.Second)
	}
	trimDue, lastTrim := true, time.Time{}
	// handle fans events out and notes that the stream can be trimmed.
	handle := func(events []host.Event) bool {
		if err := d.fanOut(shard, events); err != nil {
			fail("fan out", err)
			return false
		}
		trimDue = trimDue || len(events) > 0
		return true
	}
	recovered := false
	nextClaim := time.Now()
	for d.ctx.Err() == nil {
		if trimDue && time.Since(lastTrim) >= d.opts.Poll {
			lastTrim = time.Now()
			if _, err := d.store.TrimEvents(d.ctx, shard); err != nil {
				// Harmless: the entries are delivered; the next trim takes them.
				log.Warn("webhook outbox: trim", "err", err)
			} else {
				trimDue = false
			}
		}
		if !recovered {
			events, err := d.store.ReadEvents(d.ctx, shard, d.opts.Consumer, true, d.opts.Batch, 0)
			if err != nil {
				fail("read own pending entries", err)
				continue
			}
			if handle(events) {
				recovered = len(events) < d.opts.Batch
			}
			continue
		}
		if time.Now().After(nextClaim) {
			events, err := d.store.ClaimEvents(d.ctx, shard, d.opts.Consumer, d.opts.ClaimIdle, d.opts.Batch)
			if err != nil {
				fail("take over idle entries", err)
				continue
			}
			if len(events) > 0 {
				log.Info("webhook outbox: took over entries a gateway left unacknowledged", "entries", len(events))
			}
			if !handle(events) {
				continue
			}
			nextClaim = time.Now().Add(d.opts.ClaimIdle / 2)
		}
		block := min(d.opts.ClaimIdle/2, 2*time.Second)
		events, err := d.store.ReadEvents(d.ctx, shard, d.opts.Consumer, false, d.opts.Batch, block)
		if err != nil {
			fail("read", err)
			continue
		}
		if !handle(events) {
			continue
		}
		if failing {
			log.Info("webhook outbox: reading again")
			failing = false
		}
		if n := len(events); n > 0 && n < d.opts.Batch && d.opts.Pace > 0 {
			d.wait(d.opts.Pace) // see Options.Pace
		}
	}
}

// pause waits for dt or until the deliverer stops.
func (d *Deliverer) pause(dt time.Duration) {
	t := time.NewTimer(dt)
	defer t.Stop()
	select {
	case <-d.ctx.Done():
	case <-t.C:
	}
}

// fanOut records one delivery per event and subscribed endpoint, then
// acknowledges the events: an event is acknowledged only once its
// deliveries are durable, and recording them again is harmless, so a crash
// in between costs nothing but a repeat of this step.
func (d *Deliverer) fanOut(shard int, events []host.Event) error {
	if len(events) == 0 {
		return nil
	}
	eps, err := d.store.Endpoints(d.ctx)
	if err != nil {
		return err
	}
	var ds []host.Delivery
	ids := make([]string, 0, len(events))
	for _, ev := range events {
		ids = append(ids, ev.StreamID)
		if ev.Type == "" {
			d.opts.Logger.Error("webhook outbox: malformed entry skipped", "shard", shard, "entry", ev.StreamID)
			continue
		}
		for _, ep := range eps {
			if !ep.Disabled && ep.Wants(ev.Type) {
				ds = append(ds, host.Delivery{ID: ev.ID + "_" + ep.ID, Endpoint: ep.ID, Event: ev})
			}
		}
	}
	if err := d.store.EnqueueDeliveries(d.ctx, ds); err != nil {
		return err
	}
	if err := d.store.AckEvents(d.ctx, shard, ids...); err != nil {
		return err
	}
	d.syncWorkers(eps)
	for _, dl := range ds {
		d.wake(dl.Endpoint)
	}
	return nil
}

// recordEvery is how often a deliverer that sees endpoints makes sure the
// store records events (recordEvents).
const recordEvery = 30 * time.Second

// recordEvents makes sure the store records events while there are
// endpoints (eps), at most every recordEvery after last; it returns when it
// last did. `webhook add` turns recording on before it adds an endpoint,
// but one added by a CLI from before recording was conditional does not, a
// store written by such gateways has endpoints and no flags, and a
// failover can lose the flags' last write.
func (d *Deliverer) recordEvents(ctx context.Context, eps []host.Endpoint, last time.Time) (time.Time, error) {
	if len(eps) == 0 || (!last.IsZero() && time.Since(last) < recordEvery) {
		return last, nil
	}
	if err := d.store.RecordEvents(ctx); err != nil {
		return last, err
	}
	return time.Now(), nil
}

// watchEndpoints keeps a worker per enabled endpoint, reading the list
// every Poll: endpoints are added and removed by the CLI, elsewhere. It
// also keeps the store recording events while there are endpoints
// (recordEvents; recorded is when Start last made sure).
func (d *Deliverer) watchEndpoints(recorded time.Time) {
	for {
		if eps, err := d.store.Endpoints(d.ctx); err == nil {
			var rerr error
			if recorded, rerr = d.recordEvents(d.ctx, eps, recorded); rerr != nil && d.ctx.Err() == nil {
				d.opts.Logger.Warn("webhook outbox: turn on event recording; retrying", "err", rerr)
			}
			d.syncWorkers(eps)
		}
		d.pause(d.opts.Poll)
		if d.ctx.Err() != nil {
			d.mu.Lock()
			defer d.mu.Unlock()
			for _, w := range d.workers {
				w.stop()
			}
			return
		}
	}
}

// syncWorkers starts a worker for each enabled endpoint without one, and
// stops those whose endpoint is gone or disabled.
func (d *Deliverer) syncWorkers(eps []host.Endpoint) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.ctx.Err() != nil {
		return
	}
	live := make(map[string]bool, len(eps))
	for _, ep := range eps {
		if ep.Disabled {
			continue
		}
		live[ep.ID] = true
		if w, ok := d.workers[ep.ID]; ok {
			w.update(ep)
			continue
		}
		w := newWorker(d, ep)
		d.workers[ep.ID] = w
		d.wg.Go(w.run)
	}
	for id, w := range d.workers {
		if !live[id] {
			w.stop()
			delete(d.workers, id)
		}
	}
}

// wake tells an endpoint's worker that a delivery is due.
func (d *Deliverer) wake(endpoint string) {
	d.mu.Lock()
	w := d.workers[endpoint]
	d.mu.Unlock()
	if w != nil {
		w.wake()
	}
}

// disable marks an endpoint disabled (it answered 410) and stops its worker.
func (d *Deliverer) disable(id, reason string) {
	if err := d.store.DisableEndpoint(context.WithoutCancel(d.ctx), id, reason); err != nil {
		d.opts.Logger.Error("webhook: could not disable endpoint", "endpoint", id, "err", err)
		return
	}
	d.opts.Logger.Warn("webhook endpoint disabled", "endpoint", id, "reason", reason)
	d.mu.Lock()
	if w := d.workers[id]; w != nil {
		w.stop()
		delete(d.workers, id)
	}
	d.mu.Unlock()
}

// errStopped marks an attempt abandoned because the deliverer stopped.
var errStopped = errors.New("webhook delivery stopped")
