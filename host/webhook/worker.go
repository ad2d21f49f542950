package webhook

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"time"

	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/plantgate/plantgate/host"
	"github.com/plantgate/plantgate/host/telemetry"
)

// worker delivers to one endpoint, at most Options.Concurrency attempts at
// once. Each endpoint has its own, so a slow or dead receiver only ever
// holds its own deliveries back.
type worker struct {
	d      *Deliverer
	wakeC  chan struct{} // capacity 1: a wake-up is never lost, never blocks
	ctx    context.Context
	cancel context.CancelFunc

	mu       sync.Mutex
	endpoint host.Endpoint
	key      []byte
}

func newWorker(d *Deliverer, ep host.Endpoint) *worker {
	w := &worker{d: d, wakeC: make(chan struct{}, 1)}
	w.ctx, w.cancel = context.WithCancel(d.ctx)
	w.update(ep)
	w.wake()
	return w
}

// update takes the endpoint's current URL and secret.
func (w *worker) update(ep host.Endpoint) {
	key, err := DecodeSecret(ep.Secret)
	w.mu.Lock()
	defer w.mu.Unlock()
	w.endpoint, w.key = ep, key
	if err != nil {
		w.key = nil
	}
}

func (w *worker) wake() {
	select {
	case w.wakeC <- struct{}{}:
	default:
	}
}

func (w *worker) stop() { w.cancel() }

// run claims due deliveries while it has free slots and waits for a
// wake-up, a finished attempt or the poll tick otherwise.
func (w *worker) run() {
	slots := w.d.opts.Concurrency
	done := make(chan struct{}, slots)
	var attempts sync.WaitGroup
	defer attempts.Wait()
	inflight := 0
	tick := time.NewTicker(w.d.opts.Poll)
	defer tick.Stop()
	for {
		if free := slots - inflight; free > 0 && w.ctx.Err() == nil {
			w.mu.Lock()
			id := w.endpoint.ID
			w.mu.Unlock()
			ds, err := w.d.store.ClaimDeliveries(w.ctx, id, time.Now(), w.d.lease, free)
			if err != nil && w.ctx.Err() == nil {
				w.d.opts.Logger.Error("webhook: claim deliveries", "endpoint", id, "err", err)
			}
			for _, dl := range ds {
				inflight++
				attempts.Go(func() {
					defer func() { done <- struct{}{} }()
					w.attempt(dl)
				})
			}
			if len(ds) == free {
				continue // there may be more due
			}
		}
		select {
		case <-w.ctx.Done():
			for ; inflight > 0; inflight-- {
				<-done
			}
			return
		case <-done:
			inflight--
		case <-w.wakeC:
		case <-tick.C:
		}
	}
}

// attempt makes one POST of dl and records its outcome.
func (w *worker) attempt(dl host.Delivery) {
	w.mu.Lock()
	ep, key := w.endpoint, w.key
	w.mu.Unlock()
	opts := w.d.opts

	start := time.Now()
	status, err := w.post(ep.URL, key, dl.Event)
	took := time.Since(start)
	if errors.Is(err, errStopped) {
		// Give the lease back untouched: the attempt did not happen.
		dl.NextTry = time.Now()
		w.finish(dl)
		return
	}
	result := resultOf(status, err)
	opts.Observer.WebhookAttempt(result, took)

	dl.Attempts++
	dl.LastStatus, dl.LastError = status, ""
	if err != nil {
		dl.LastError = err.Error()
	} else if status < 200 || status > 299 {
		dl.LastError = http.StatusText(status)
	}
	log := opts.Logger.With("endpoint", ep.ID, "delivery", dl.ID, "attempt", dl.Attempts, "result", result)
	switch {
	case err == nil && status >= 200 && status <= 299:
		dl.State = host.DeliveryDelivered
		log.Debug("webhook delivered")
	case err == nil && status == http.StatusGone:
		// Disable first: once the delivery reads failed, no other
		// delivery to this endpoint starts.
		w.d.disable(ep.ID, "410 Gone")
		dl.State = host.DeliveryFailed
		w.finish(dl)
		opts.Observer.WebhookDelivery("failed")
		return
	case dl.Attempts >= opts.MaxAttempts:
		dl.State = host.DeliveryFailed
		log.Warn("webhook delivery failed; kept for replay", "status", status, "err", dl.LastError)
	default:
		dl.State = host.DeliveryPending
		delay := backoff(opts.Backoff, dl.Attempts)
		dl.NextTry = time.Now().Add(delay)
		time.AfterFunc(delay, w.wake)
		log.Info("webhook attempt failed; will retry", "status", status, "err", dl.LastError, "in", delay.Round(time.Millisecond))
	}
	w.finish(dl)
	switch dl.State {
	case host.DeliveryDelivered:
		opts.Observer.WebhookDelivery("delivered")
	case host.DeliveryFailed:
		opts.Observer.WebhookDelivery("failed")
	default:
		opts.Observer.WebhookDelivery("retry")
	}
}

// finish records dl's outcome even while stopping: the attempt is over.
func (w *worker) finish(dl host.Delivery) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(w.ctx), 5*time.Second)
	defer cancel()
	if err := w.d.store.FinishAttempt(ctx, dl); err != nil {
		// The lease ends and the delivery is made again: at least once.
		w.d.opts.Logger.Error("webhook: record attempt", "delivery", dl.ID, "err", err)
	}
}

// post sends one signed attempt and returns the answer's status.
func (w *worker) post(target string, key []byte, ev host.Event) (status int, err error) {
	if key == nil {
		return 0, errors.New("endpoint secret is not a whsec_ secret")
	}
	body := Payload(ev)
	ts := time.Now().Unix()
	ctx, cancel := context.WithTimeout(w.ctx, w.d.opts.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, target, bytes.NewReader(body))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "plantgate-webhooks")
	req.Header.Set("webhook-id", ev.ID)
	req.Header.Set("webhook-timestamp", strconv.FormatInt(ts, 10))
	req.Header.Set("webhook-signature", Sign(key, ev.ID, ts, body))
	if tr := w.d.opts.Tracer; tr != nil {
		var span trace.Span
		ctx, span = startDeliverySpan(ctx, tr, target, ev)
		telemetry.Propagator.Inject(ctx, propagation.HeaderCarrier(req.Header))
		defer func() { endDeliverySpan(span, status, err) }()
	}
	resp, err := w.d.client.Do(req)
	if err != nil {
		if w.ctx.Err() != nil {
			return 0, errStopped
		}
		if ctx.Err() != nil {
			return 0, fmt.Errorf("%w (%s)", errNoAnswer, w.d.opts.Timeout)
		}
		if errors.Is(err, ErrForbiddenAddress) {
			return 0, errDeliver
		}
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // drop the URL: it may hold a secret
		}
		return 0, err
	}
	// Drain a little so the connection can be reused; the answer's body
	// means nothing to Standard Webhooks.
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
	return resp.StatusCode, nil
}

// Payload is the body of an event's POST, the same on every attempt:
//
//	{"type":"plant.created","timestamp":"2026-11-23T10:15:34.123Z","data":{"id":1,"name":"Fern"}}
func Payload(ev host.Event) []byte {
	b := make([]byte, 0, 64+len(ev.Data))
	b = append(b, `{"type":"`...)
	b = append(b, ev.Type...) // one of host.AllEvents: nothing to escape
	b = append(b, `","timestamp":"`...)
	b = ev.Time.UTC().AppendFormat(b, "2006-01-02T15:04:05.000Z07:00")
	b = append(b, `","data":`...)
	b = append(b, ev.Data...)
	return append(b, '}')
}

// backoff is the wait after the n-th failed attempt: base·2^(n-1), of which
// a random part of up to half is taken off (jitter), capped at six hours.
func backoff(base time.Duration, n int) time.Duration {
	d := base
	for i := 1; i < n && d < 6*time.Hour; i++ {
		d *= 2
	}
	d = min(d, 6*time.Hour)
	return d - rand.N(d/2+1)
}

// resultOf names an attempt's result for the metrics.
func resultOf(status int, err error) string {
	switch {
	case errors.Is(err, ErrForbiddenAddress):
		return "refused"
	case err != nil && status == 0 && isTimeout(err):
		return "timeout"
	case err != nil:
		return "error"
	}
	return strconv.Itoa(status/100) + "xx"
}

// errNoAnswer is an attempt that ran out of Options.Timeout.
var errNoAnswer = errors.New("no answer in time")

func isTimeout(err error) bool {
	var t interface{ Timeout() bool }
	return errors.Is(err, errNoAnswer) || errors.As(err, &t) && t.Timeout()
}
