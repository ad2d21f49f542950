package webhook_test

import (
	"bytes"
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/pb33f/libopenapi"
	"github.com/pb33f/libopenapi-validator/config"
	"github.com/pb33f/libopenapi-validator/parameters"
	"github.com/pb33f/libopenapi-validator/requests"
	v3 "github.com/pb33f/libopenapi/datamodel/high/v3"

	"github.com/plantgate/plantgate/host"
	gatehttp "github.com/plantgate/plantgate/host/http"
)

// webhookSpec is the served OpenAPI document's webhooks: section, with
// validators for a webhook's body and headers.
type webhookSpec struct {
	hooks  map[string]*v3.PathItem
	body   requests.RequestBodyValidator
	header parameters.ParameterValidator
}

func loadWebhookSpec(t *testing.T) webhookSpec {
	t.Helper()
	doc, err := libopenapi.NewDocument(gatehttp.OpenAPI)
	if err != nil {
		t.Fatal(err)
	}
	model, err := doc.BuildV3Model()
	if err != nil {
		t.Fatal(err)
	}
	hooks := map[string]*v3.PathItem{}
	for name, item := range model.Model.Webhooks.FromOldest() {
		hooks[name] = item
	}
	opts := []config.Option{config.WithFormatAssertions(), config.WithStrictMode()}
	return webhookSpec{
		hooks:  hooks,
		body:   requests.NewRequestBodyValidator(&model.Model, opts...),
		header: parameters.NewParameterValidator(&model.Model, opts...),
	}
}

// check validates one request a receiver got against the webhook named
// event; it returns the validator's complaints, none when it conforms.
func (s webhookSpec) check(t *testing.T, event string, h hit) []string {
	t.Helper()
	item := s.hooks[event]
	if item == nil {
		t.Fatalf("the OpenAPI document has no webhook %q (has %v)", event, s.hooks)
	}
	req, err := http.NewRequest(http.MethodPost, "http://receiver.test/", bytes.NewReader(h.body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header = h.header.Clone()
	var msgs []string
	_, errs := s.header.ValidateHeaderParamsWithPathItem(req, item, event)
	_, bodyErrs := s.body.ValidateRequestBodyWithPathItem(req, item, event)
	for _, e := range append(errs, bodyErrs...) {
		msgs = append(msgs, e.Message+": "+e.Reason)
		for _, se := range e.SchemaValidationErrors {
			msgs = append(msgs, "  "+se.Reason+" at "+se.FieldPath)
		}
	}
	return msgs
}

// The POSTs the gateway sends for the store's real create and delete
// conform to the webhooks: section of the served OpenAPI document: body
// schema (no undeclared field), content type and the three headers.
func TestPayloadsMatchOpenAPI(t *testing.T) {
	t.Parallel()
	spec := loadWebhookSpec(t)
	backends(t, func(t *testing.T, newB func(t *testing.T) backend) {
		b := newB(t)
		srv, hits := receiver(t, ok)
		b.addEndpoint(t, srv.URL)
		b.start(t, nil)
		ctx := context.Background()
		// One plant per step, so each POST's event is known: one plant lives
		// in one shard, whose events are delivered in order.
		steps := []struct {
			event string
			do    func() error
		}{
			{host.EventPlantCreated, func() error {
				_, err := b.store.CreatePlant(ctx, host.Plant{ID: 7, Name: "Fern", Tag: "indoor", HasTag: true})
				return err
			}},
			{host.EventPlantCreated, func() error {
				_, err := b.store.CreatePlant(ctx, host.Plant{ID: -9_223_372_036_854_775_808, Name: "Ünïcode \"quoted\""})
				return err
			}},
			{host.EventPlantDeleted, func() error { return b.store.DeletePlant(ctx, 7) }},
		}
		var got []hit
		for _, st := range steps {
			if err := st.do(); err != nil {
				t.Fatal(err)
			}
			h := next(t, hits)
			if !strings.HasPrefix(string(h.body), `{"type":"`+st.event+`"`) {
				t.Fatalf("expected a %s, got %s", st.event, h.body)
			}
			if msgs := spec.check(t, st.event, h); len(msgs) > 0 {
				t.Errorf("%s POST %s breaks the OpenAPI document:\n%s", st.event, h.body, strings.Join(msgs, "\n"))
			}
			got = append(got, h)
		}

		// The same validation rejects what breaks the document, so the
		// checks above can fail.
		if msgs := spec.check(t, host.EventPlantDeleted, got[0]); len(msgs) == 0 {
			t.Errorf("a plant.created body passed as plant.deleted: %s", got[0].body)
		}
		noName := hit{header: got[0].header, body: bytes.Replace(got[0].body, []byte(`"name":"Fern",`), nil, 1)}
		if msgs := spec.check(t, host.EventPlantCreated, noName); len(msgs) == 0 {
			t.Errorf("a plant.created body without name passed: %s", noName.body)
		}
		extra := hit{header: got[2].header, body: bytes.Replace(got[2].body, []byte(`{"id":7}`), []byte(`{"id":7,"name":"Fern"}`), 1)}
		if msgs := spec.check(t, host.EventPlantDeleted, extra); len(msgs) == 0 {
			t.Errorf("a plant.deleted body with an undeclared field passed: %s", extra.body)
		}
		unsigned := hit{header: got[2].header.Clone(), body: got[2].body}
		unsigned.header.Set("webhook-signature", "v2,abc")
		if msgs := spec.check(t, host.EventPlantDeleted, unsigned); len(msgs) == 0 {
			t.Error("a webhook-signature without v1, passed")
		}
		badTime := hit{header: got[2].header, body: bytes.Replace(got[2].body, []byte(`"timestamp":"`), []byte(`"timestamp":"yesterday `), 1)}
		if msgs := spec.check(t, host.EventPlantDeleted, badTime); len(msgs) == 0 {
			t.Errorf("a timestamp that is no date-time passed: %s", badTime.body)
		}
	})
}
