package webhook_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/plantgate/plantgate/host"
	"github.com/plantgate/plantgate/host/redis"
	"github.com/plantgate/plantgate/host/webhook"
)

// The reference Standard Webhooks library verifies what the gateway sends:
// body, webhook-id, webhook-timestamp and webhook-signature.
func TestSignatureVerifiedByReferenceLibrary(t *testing.T) {
	t.Parallel()
	backends(t, func(t *testing.T, newB func(t *testing.T) backend) {
		b := newB(t)
		srv, hits := receiver(t, ok)
		ep := b.addEndpoint(t, srv.URL)
		b.start(t, nil)
		id := b.emit(t, 3, host.EventPlantCreated, `{"id":7,"name":"Fern","tag":"indoor"}`)

		h := next(t, hits)
		wh, err := standardwebhooks.NewWebhook(ep.Secret)
		if err != nil {
			t.Fatal(err)
		}
		if err := wh.Verify(h.body, h.header); err != nil {
			t.Fatalf("reference library: %v (headers %v)", err, h.header)
		}
		if got := h.header.Get("webhook-id"); got != id {
			t.Errorf("webhook-id = %q, want %q", got, id)
		}
		if got := h.header.Get("Content-Type"); got != "application/json" {
			t.Errorf("Content-Type = %q", got)
		}
		body := string(h.body)
		prefix, suffix := `{"type":"plant.created","timestamp":"`, `","data":{"id":7,"name":"Fern","tag":"indoor"}}`
		if !strings.HasPrefix(body, prefix) || !strings.HasSuffix(body, suffix) {
			t.Fatalf("body = %s", body)
		}
		if _, err := time.Parse(time.RFC3339, strings.TrimSuffix(strings.TrimPrefix(body, prefix), suffix)); err != nil {
			t.Errorf("timestamp: %v", err)
		}
		// A tampered body fails the same verifier: the check above can fail.
		if err := wh.Verify(append(h.body[:len(h.body)-1:len(h.body)-1], ' ', '}'), h.header); err == nil {
			t.Error("reference library accepted a tampered body")
		}
		d := b.delivery(t, id+"_"+ep.ID, host.DeliveryDelivered)
		if d.Attempts != 1 || d.LastStatus != 204 {
			t.Errorf("delivery = %+v, want 1 attempt, status 204", d)
		}
	})
}

// Sign agrees with the reference library's signer on fixed input.
func TestSignMatchesReferenceSigner(t *testing.T) {
	t.Parallel()
	const secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	ts := time.Unix(1614265330, 0)
	body := []byte(`{"test": 2432232314}`)
	wh, err := standardwebhooks.NewWebhook(secret)
	if err != nil {
		t.Fatal(err)
	}
	want, err := wh.Sign("msg_p6E5dWkVBNGhgQLFMVFnQG", ts, body)
	if err != nil {
		t.Fatal(err)
	}
	key, err := webhook.DecodeSecret(secret)
	if err != nil {
		t.Fatal(err)
	}
	if got := webhook.Sign(key, "msg_p6E5dWkVBNGhgQLFMVFnQG", ts.Unix(), body); got != want {
		t.Fatalf("Sign = %s, reference = %s", got, want)
	}
}

// Two failures, then success: three attempts with one webhook-id and one body.
func TestRetryThenSuccess(t *testing.T) {
	t.Parallel()
	backends(t, func(t *testing.T, newB func(t *testing.T) backend) {
		b := newB(t)
		srv, hits := receiver(t, func(n int) int {
			if n <= 2 {
				return http.StatusInternalServerError
			}
			return http.StatusOK
		})
		ep := b.addEndpoint(t, srv.URL)
		b.start(t, nil)
		id := b.emit(t, 0, host.EventPlantDeleted, `{"id":9}`)
		first := next(t, hits)
		for range 2 {
			h := next(t, hits)
			if h.header.Get("webhook-id") != id || string(h.body) != string(first.body) {
				t.Fatalf("retry sent id %q body %s; first: id %q body %s", h.header.Get("webhook-id"), h.body, first.header.Get("webhook-id"), first.body)
			}
		}
		d := b.delivery(t, id+"_"+ep.ID, host.DeliveryDelivered)
		if d.Attempts != 3 || d.LastStatus != 200 {
			t.Fatalf("delivery = %+v, want 3 attempts, last status 200", d)
		}
	})
}

// Every attempt fails: the delivery is failed after MaxAttempts and kept;
// replay delivers it once the receiver is back.
func TestRetriesExhaustedThenReplay(t *testing.T) {
	t.Parallel()
	backends(t, func(t *testing.T, newB func(t *testing.T) backend) {
		b := newB(t)
		srv, hits := receiver(t, func(n int) int {
			if n <= 3 {
				return http.StatusServiceUnavailable
			}
			return http.StatusOK
		})
		ep := b.addEndpoint(t, srv.URL)
		b.start(t, func(o *webhook.Options) { o.MaxAttempts = 3 })
		id := b.emit(t, 5, host.EventPlantCreated, `{"id":1,"name":"Ivy"}`)
		did := id + "_" + ep.ID
		d := b.delivery(t, did, host.DeliveryFailed)
		if d.Attempts != 3 || d.LastStatus != 503 || d.LastError != "Service Unavailable" {
			t.Fatalf("failed delivery = %+v", d)
		}
		failed, err := b.store.Deliveries(context.Background(), true, 10)
		if err != nil || len(failed) != 1 || failed[0].ID != did {
			t.Fatalf("failed list = %+v, %v", failed, err)
		}
		if len(hits) != 3 {
			t.Fatalf("receiver saw %d requests, want 3", len(hits))
		}
		if err := b.store.ReplayDelivery(context.Background(), did); err != nil {
			t.Fatal(err)
		}
		for range 4 {
			next(t, hits)
		}
		d = b.delivery(t, did, host.DeliveryDelivered)
		if d.Attempts != 1 || d.LastStatus != 200 {
			t.Fatalf("replayed delivery = %+v, want 1 attempt, 200", d)
		}
		if failed, _ := b.store.Deliveries(context.Background(), true, 10); len(failed) != 0 {
			t.Fatalf("still listed failed: %+v", failed)
		}
		if err := b.store.ReplayDelivery(context.Background(), did); err == nil || !strings.Contains(err.Error(), "has not failed") {
			t.Fatalf("replay of a delivered one: %v", err)
		}
	})
}

// A 410 answer disables the endpoint: no more deliveries to it.
func TestGoneDisablesEndpoint(t *testing.T) {
	t.Parallel()
	backends(t, func(t *testing.T, newB func(t *testing.T) backend) {
		b := newB(t)
		gone, goneHits := receiver(t, func(int) int { return http.StatusGone })
		live, liveHits := receiver(t, ok)
		g := b.addEndpoint(t, gone.URL)
		b.addEndpoint(t, live.URL)
		b.start(t, nil)
		id := b.emit(t, 1, host.EventPlantCreated, `{"id":1,"name":"a"}`)
		next(t, goneHits)
		next(t, liveHits)
		d := b.delivery(t, id+"_"+g.ID, host.DeliveryFailed)
		if d.Attempts != 1 || d.LastStatus != 410 {
			t.Fatalf("delivery = %+v", d)
		}
		eps, err := b.store.Endpoints(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		for _, ep := range eps {
			if ep.ID == g.ID && (!ep.Disabled || ep.Reason != "410 Gone") {
				t.Fatalf("endpoint = %+v, want disabled by 410 Gone", ep)
			}
		}
		// The next event reaches the live endpoint only.
		b.emit(t, 1, host.EventPlantCreated, `{"id":2,"name":"b"}`)
		next(t, liveHits)
		if n := len(goneHits); n != 0 {
			t.Fatalf("disabled endpoint got %d more requests", n)
		}
	})
}

// A receiver that hangs holds back only its own deliveries: every event
// reaches the fast one while the slow one still holds its first request.
func TestSlowEndpointBesideFastOne(t *testing.T) {
	t.Parallel()
	backends(t, func(t *testing.T, newB func(t *testing.T) backend) {
		b := newB(t)
		release := make(chan struct{})
		slowSeen := make(chan struct{}, 100)
		slow, _ := receiver(t, func(int) int { slowSeen <- struct{}{}; <-release; return 200 })
		fast, fastHits := receiver(t, ok)
		b.addEndpoint(t, slow.URL)
		b.addEndpoint(t, fast.URL)
		b.start(t, func(o *webhook.Options) { o.Timeout = 30 * time.Second; o.Concurrency = 2 })
		const n = 20
		for i := range n {
			b.emit(t, i%16, host.EventPlantCreated, `{"id":1,"name":"x"}`)
		}
		<-slowSeen // the slow receiver is holding a request now
		for range n {
			next(t, fastHits)
		}
		close(release)
	})
}

// Deliveries to loopback are refused without AllowPrivate, by literal IP
// and by a hostname that resolves to it; the receiver sees nothing.
func TestDeliveryRefusesPrivateAddresses(t *testing.T) {
	t.Parallel()
	backends(t, func(t *testing.T, newB func(t *testing.T) backend) {
		b := newB(t)
		srv, hits := receiver(t, ok)
		port := srv.URL[strings.LastIndex(srv.URL, ":"):]
		byIP := b.addEndpoint(t, "http://127.0.0.1"+port)
		byName := b.addEndpoint(t, "http://localhost"+port)
		b.start(t, func(o *webhook.Options) { o.AllowPrivate = false; o.MaxAttempts = 2 })
		id := b.emit(t, 2, host.EventPlantCreated, `{"id":1,"name":"x"}`)
		for _, ep := range []host.Endpoint{byIP, byName} {
			d := b.delivery(t, id+"_"+ep.ID, host.DeliveryFailed)
			if d.LastStatus != 0 || !strings.Contains(d.LastError, "address not allowed") {
				t.Errorf("%s: delivery = %+v", ep.URL, d)
			}
		}
		if len(hits) != 0 {
			t.Fatalf("receiver got %d requests", len(hits))
		}
	})
}

// Entries a dead gateway read and never acknowledged are taken over by a
// live one after ClaimIdle (XAUTOCLAIM) and delivered.
func TestTakeOverDeadConsumersEntries(t *testing.T) {
	t.Parallel()
	backends(t, func(t *testing.T, newB func(t *testing.T) backend) {
		b := newB(t)
		srv, hits := receiver(t, ok)
		b.addEndpoint(t, srv.URL)
		if err := b.store.EnsureEventGroup(context.Background()); err != nil {
			t.Fatal(err)
		}
		want := map[string]bool{}
		for range 5 {
			want[b.emit(t, 4, host.EventPlantCreated, `{"id":1,"name":"x"}`)] = true
		}
		// The dead gateway: it was given the entries and never acknowledged them.
		got, err := b.store.ReadEvents(context.Background(), 4, "dead", false, 100, -1)
		if err != nil || len(got) != 5 {
			t.Fatalf("dead consumer read %d entries: %v", len(got), err)
		}
		b.start(t, func(o *webhook.Options) { o.ClaimIdle = 50 * time.Millisecond })
		for range 5 {
			h := next(t, hits)
			id := h.header.Get("webhook-id")
			if !want[id] {
				t.Fatalf("unexpected or repeated webhook-id %q", id)
			}
			delete(want, id)
		}
	})
}

// The store's real create and delete write the outbox entries the
// deliverer sends: exact bodies, in order for one plant.
func TestCreateAndDeleteAreDelivered(t *testing.T) {
	t.Parallel()
	backends(t, func(t *testing.T, newB func(t *testing.T) backend) {
		b := newB(t)
		srv, hits := receiver(t, ok)
		ep := b.addEndpoint(t, srv.URL)
		b.start(t, nil)
		ctx := context.Background()
		if created, err := b.store.CreatePlant(ctx, host.Plant{ID: -42, Name: "Fern \"Boston\"", Tag: "indoor", HasTag: true}); err != nil || !created {
			t.Fatalf("create: %v %v", created, err)
		}
		if created, err := b.store.CreatePlant(ctx, host.Plant{ID: -42, Name: "Fern \"Boston\"", Tag: "indoor", HasTag: true}); err != nil || created {
			t.Fatalf("identical re-create: %v %v", created, err)
		}
		h := next(t, hits)
		wh, _ := standardwebhooks.NewWebhook(ep.Secret)
		if err := wh.Verify(h.body, h.header); err != nil {
			t.Fatal(err)
		}
		if !strings.HasSuffix(string(h.body), `"data":{"id":-42,"name":"Fern \"Boston\"","tag":"indoor"}}`) || !strings.HasPrefix(string(h.body), `{"type":"plant.created",`) {
			t.Fatalf("create body %s", h.body)
		}
		if err := b.store.DeletePlant(ctx, -42); err != nil {
			t.Fatal(err)
		}
		h = next(t, hits)
		if !strings.HasPrefix(string(h.body), `{"type":"plant.deleted",`) || !strings.HasSuffix(string(h.body), `"data":{"id":-42}}`) {
			t.Fatalf("delete body %s", h.body)
		}
		if len(hits) != 0 {
			t.Fatalf("%d more requests: the identical re-create made an event", len(hits))
		}
	})
}

// TestEndpointWithoutRecordingGetsEvents: an endpoint added the way a CLI
// from before conditional recording added it (the endpoint's keys only, no
// recording flags), while a gateway runs or before it starts. The gateway's
// deliverer turns recording on (while running, within its endpoint poll;
// starting, before Start returns), and the next create is delivered;
// before, a store with no flags recorded nothing.
func TestEndpointWithoutRecordingGetsEvents(t *testing.T) {
	t.Parallel()
	backends(t, func(t *testing.T, newB func(t *testing.T) backend) {
		t.Run("added while running", func(t *testing.T) {
			b := newB(t)
			srv, hits := receiver(t, ok)
			b.start(t, nil)
			b.addEndpointWithoutRecording(t, srv.URL)
			deadline := time.Now().Add(15 * time.Second)
			for !b.recording(t) {
				if time.Now().After(deadline) {
					t.Fatal("recording never turned on: the gateway did not for the endpoint it found")
				}
				time.Sleep(10 * time.Millisecond) // polling stored state, not ordering events
			}
			b.wantDelivered(t, hits)
		})
		t.Run("there at start", func(t *testing.T) {
			b := newB(t)
			srv, hits := receiver(t, ok)
			b.addEndpointWithoutRecording(t, srv.URL)
			b.start(t, nil)
			if !b.recording(t) {
				t.Fatal("recording is off once Start returned, with an endpoint in the store")
			}
			b.wantDelivered(t, hits)
		})
	})
}

// addEndpointWithoutRecording writes an endpoint's keys only, as a CLI from
// before conditional recording did.
func (b backend) addEndpointWithoutRecording(t *testing.T, url string) {
	t.Helper()
	ctx := context.Background()
	secret, err := webhook.NewSecret()
	if err != nil {
		t.Fatal(err)
	}
	ep := "ep_old_cli"
	if err := b.raw.HSet(ctx, b.prefix+"{webhooks}:endpoint:"+ep, "url", url, "events", "plant.created plant.deleted",
		"secret", secret, "created", time.Now().UnixMilli(), "disabled", 0, "reason", "").Err(); err != nil {
		t.Fatal(err)
	}
	if err := b.raw.SAdd(ctx, b.prefix+"{webhooks}:endpoints", ep).Err(); err != nil {
		t.Fatal(err)
	}
}

// recording reports whether every shard's recording flag is set.
func (b backend) recording(t *testing.T) bool {
	t.Helper()
	for shard := range redis.Shards {
		n, err := b.raw.Exists(context.Background(), fmt.Sprintf("%s{p%02d}:events:on", b.prefix, shard)).Result()
		if err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			return false
		}
	}
	return true
}

// wantDelivered creates plant 7 and waits for its plant.created webhook.
func (b backend) wantDelivered(t *testing.T, hits <-chan hit) {
	t.Helper()
	if created, err := b.store.CreatePlant(context.Background(), host.Plant{ID: 7, Name: "Fern"}); err != nil || !created {
		t.Fatalf("create: %v %v", created, err)
	}
	if h := next(t, hits); !strings.HasSuffix(string(h.body), `"data":{"id":7,"name":"Fern"}}`) {
		t.Fatalf("body %s", h.body)
	}
}
