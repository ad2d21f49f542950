package main

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"

	"github.com/plantgate/plantgate/host/redis/redistest"
)

// checkRequestTrace checks the spans of one POST /plants that carried
// traceparent(traceID, parentID) and was allowed by both plugins.
func checkRequestTrace(t *testing.T, got map[string]span, traceID, parentID, service string) {
	t.Helper()
	srv := got["POST /plants"]
	if srv.ParentID != parentID || srv.Kind != tracepb.Span_SPAN_KIND_SERVER || srv.Service != service {
		t.Fatalf("server span: %v (service %q), want parent %s, kind server, service %s", srv, srv.Service, parentID, service)
	}
	for k, v := range map[string]string{"http.request.method": "POST", "http.route": "/plants", "url.path": "/plants",
		"http.response.status_code": "200", "plantgate.request_id": "trace-req-1"} {
		if srv.Attrs[k] != v {
			t.Errorf("server span %s = %q, want %q", k, srv.Attrs[k], v)
		}
	}
	for name, want := range map[string]map[string]string{
		"plugin authorize bearer-auth": {"plantgate.plugin.name": "bearer-auth", "plantgate.plugin.phase": "authorize", "plantgate.plugin.decision": "allow"},
		"plugin validate plant-rules":  {"plantgate.plugin.name": "plant-rules", "plantgate.plugin.phase": "validate", "plantgate.plugin.decision": "allow"},
		"redis create_plant":           {"db.system.name": "redis", "db.operation.name": "create_plant", "plantgate.plant.id": "41", "plantgate.plant.created": "true"},
	} {
		s := got[name]
		if s.ParentID != srv.SpanID {
			t.Errorf("%s: parent %s, want the server span %s", name, s.ParentID, srv.SpanID)
		}
		for k, v := range want {
			if s.Attrs[k] != v {
				t.Errorf("%s: %s = %q, want %q", name, k, s.Attrs[k], v)
			}
		}
		if strings.HasPrefix(name, "plugin ") && (s.Attrs["plantgate.plugin.guest_time_ns"] == "" || s.Attrs["plantgate.plugin.guest_time_ns"] == "0" || len(s.Attrs["plantgate.plugin.sha256"]) != 64) {
			t.Errorf("%s: guest time %q, sha256 %q", name, s.Attrs["plantgate.plugin.guest_time_ns"], s.Attrs["plantgate.plugin.sha256"])
		}
	}
}

// Through the real server with OTLP/HTTP (the default protocol): a POST
// /plants with a traceparent makes a server span, child of the caller's
// span, with the plugin calls and the store call under it; a denied
// request's plugin span says deny and the code; and the webhook delivery
// of the create is a span of the same trace, under the store call that
// wrote the event, whose POST carries its traceparent.
func TestTraceOTLPHTTP(t *testing.T) {
	t.Parallel()
	const token = "trace-token-0123456789abcdef"
	redisSrv := redistest.Start(t)
	hooks := make(chan string, 10)
	states := make(chan string, 10)
	recv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hooks <- r.Header.Get("traceparent")
		states <- r.Header.Get("tracestate")
		w.WriteHeader(204)
	}))
	t.Cleanup(recv.Close)
	addWebhook(t, redisSrv.URL(), recv.URL)
	sink, endpoint := newOTLPHTTPReceiver(t)
	g := startGateway(t, []string{"OTEL_EXPORTER_OTLP_ENDPOINT=" + endpoint, "OTEL_SERVICE_NAME=plantgate-trace-test", "PLANTGATE_TRACE_INCOMING=honour"},
		"--redis-url", redisSrv.URL(), "--plugins", patientPlugins(t),
		"--bootstrap-token", token, "--webhook-allow-private", "--token-cache-ttl", "0")
	if !strings.Contains(g.stderr.String(), `msg="exporting traces" protocol=http/protobuf endpoint=`+endpoint+`/v1/traces sampler=parentbased_always_on service=plantgate-trace-test`) {
		t.Fatalf("no start-up line for tracing:\n%s", g.stderr)
	}

	const traceID, parentID = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
	if status, body := requestWith(t, g.base, "POST", "/plants", token, `{"id":41,"name":"Fern"}`,
		"traceparent", traceparent(traceID, parentID), "X-Request-ID", "trace-req-1", "tracestate", hugeTraceState); status != 200 {
		t.Fatalf("POST /plants: %d %s", status, body)
	}
	got := sink.waitTrace(t, traceID, "POST /plants", "plugin authorize bearer-auth", "plugin validate plant-rules", "redis create_plant", "redis token", "webhook plant.created")
	checkRequestTrace(t, got, traceID, parentID, "plantgate-trace-test")
	byID := map[string]string{parentID: "(the caller's span)"}
	for name, s := range got {
		byID[s.SpanID] = name
	}
	for _, name := range []string{"POST /plants", "plugin authorize bearer-auth", "redis token", "plugin validate plant-rules", "redis create_plant", "webhook plant.created"} {
		t.Logf("%-30s kind=%-6s parent=%s", name, strings.TrimPrefix(got[name].Kind.String(), "SPAN_KIND_"), byID[got[name].ParentID])
	}
	if tok := got["redis token"]; tok.ParentID != got["POST /plants"].SpanID {
		t.Errorf("token lookup span %v: want a child of the server span", tok)
	}

	hook := got["webhook plant.created"]
	if hook.ParentID != got["redis create_plant"].SpanID || hook.Kind != tracepb.Span_SPAN_KIND_CLIENT ||
		hook.Attrs["http.response.status_code"] != "204" || hook.Attrs["plantgate.webhook.type"] != "plant.created" || hook.Attrs["server.address"] != "127.0.0.1" {
		t.Fatalf("webhook span %v: want a client span under redis create_plant (%s)", hook, got["redis create_plant"].SpanID)
	}
	select {
	case tp := <-hooks:
		if want := traceparent(traceID, hook.SpanID); tp != want {
			t.Fatalf("webhook POST traceparent %q, want %q (the delivery span's)", tp, want)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("no webhook delivery in 30s")
	}
	// What the gateway keeps of the client's tracestate is capped: its
	// first members within 512 bytes. The outbox carries the traceparent
	// alone, so none reaches a webhook receiver.
	if ts := got["POST /plants"].TraceState; ts != cappedTraceState {
		t.Fatalf("server span tracestate of %d bytes %.80q, want the first %d bytes of members", len(ts), ts, len(cappedTraceState))
	}
	if ts := <-states; ts != "" {
		t.Fatalf("webhook POST tracestate %.80q, want none", ts)
	}

	// A denied request: the plugin's span says so, with the code.
	const deniedTrace = "5bf92f3577b34da6a3ce929d0e0e4737"
	if status, _ := requestWith(t, g.base, "POST", "/plants", "wrong-token", `{"id":42,"name":"Fern"}`,
		"traceparent", traceparent(deniedTrace, parentID)); status != 401 {
		t.Fatalf("bad token: %d", status)
	}
	denied := sink.waitTrace(t, deniedTrace, "POST /plants", "plugin authorize bearer-auth")
	if s := denied["plugin authorize bearer-auth"]; s.Attrs["plantgate.plugin.decision"] != "deny" || s.Attrs["plantgate.plugin.code"] != "40151" || s.ParentID != denied["POST /plants"].SpanID {
		t.Fatalf("denied plugin span: %v", s)
	}
	if s := denied["POST /plants"]; s.Attrs["http.response.status_code"] != "401" || s.Attrs["plantgate.error"] != "40151" {
		t.Fatalf("denied server span: %v", s)
	}
	if len(denied) != 3 { // server, plugin, token lookup: no validate, no create
		t.Fatalf("denied request's spans: %v", denied)
	}
}

// With OTEL_EXPORTER_OTLP_PROTOCOL=grpc the same spans reach an OTLP/gRPC
// receiver (--trace-incoming honour given as a flag here, as the
// environment variable in TestTraceOTLPHTTP).
func TestTraceOTLPGRPC(t *testing.T) {
	t.Parallel()
	const token = "trace-grpc-token-0123456789ab"
	sink, endpoint := newOTLPGRPCReceiver(t)
	g := startGateway(t, []string{"OTEL_EXPORTER_OTLP_ENDPOINT=" + endpoint, "OTEL_EXPORTER_OTLP_PROTOCOL=grpc", "OTEL_SERVICE_NAME=plantgate-grpc"},
		"--plugins", patientPlugins(t), "--bootstrap-token", token, "--trace-incoming", "honour")
	const traceID, parentID = "6bf92f3577b34da6a3ce929d0e0e4738", "10f067aa0ba902b8"
	if status, body := requestWith(t, g.base, "POST", "/plants", token, `{"id":41,"name":"Fern"}`,
		"traceparent", traceparent(traceID, parentID), "X-Request-ID", "trace-req-1"); status != 200 {
		t.Fatalf("POST /plants: %d %s", status, body)
	}
	got := sink.waitTrace(t, traceID, "POST /plants", "plugin authorize bearer-auth", "plugin validate plant-rules", "redis create_plant")
	checkRequestTrace(t, got, traceID, parentID, "plantgate-grpc")
}

// hugeTraceState is a tracestate of 32 members of 100 bytes; its first 5
// members (504 bytes with their commas) are what fits in 512.
var hugeTraceState, cappedTraceState = func() (string, string) {
	var ms []string
	for i := range 32 {
		ms = append(ms, fmt.Sprintf("v%02d=%s", i, strings.Repeat("x", 96)))
	}
	return strings.Join(ms, ","), strings.Join(ms[:5], ",")
}()

// By default (--trace-incoming link) a public listener does not trust the
// client's traceparent: the request starts a trace of its own, sampled by
// the gateway's sampler alone (a client's not-sampled flag does not opt it
// out), with a link to the client's span; the webhook receiver sees the
// gateway's trace, never the client's id or tracestate. A long raw path is
// cut in the span's url.path.
func TestTraceIncomingLink(t *testing.T) {
	t.Parallel()
	const token = "trace-link-token-0123456789abcdef"
	redisSrv := redistest.Start(t)
	hooks := make(chan [2]string, 10)
	recv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hooks <- [2]string{r.Header.Get("traceparent"), r.Header.Get("tracestate")}
		w.WriteHeader(204)
	}))
	t.Cleanup(recv.Close)
	addWebhook(t, redisSrv.URL(), recv.URL)
	sink, endpoint := newOTLPHTTPReceiver(t)
	g := startGateway(t, []string{"OTEL_EXPORTER_OTLP_ENDPOINT=" + endpoint},
		"--redis-url", redisSrv.URL(), "--plugins", patientPlugins(t),
		"--bootstrap-token", token, "--webhook-allow-private")
	const clientTrace, clientSpan = "7bf92f3577b34da6a3ce929d0e0e4739", "20f067aa0ba902b9"
	notSampled := "00-" + clientTrace + "-" + clientSpan + "-00"
	if status, body := requestWith(t, g.base, "POST", "/plants", token, `{"id":43,"name":"Fern"}`,
		"traceparent", notSampled, "tracestate", hugeTraceState, "X-Request-ID", "link-req-1"); status != 200 {
		t.Fatalf("POST /plants: %d %s", status, body)
	}
	srv := sink.waitSpan(t, "for link-req-1", func(s span) bool { return s.Attrs["plantgate.request_id"] == "link-req-1" })
	if srv.Name != "POST /plants" || srv.ParentID != "" || srv.TraceID == clientTrace ||
		len(srv.Links) != 1 || srv.Links[0].TraceID != clientTrace || srv.Links[0].SpanID != clientSpan || len(srv.Links[0].TraceState) > 512 ||
		srv.TraceState != "" {
		t.Fatalf("server span %v links %+v: want a root of a new trace linked to the client's span, its tracestate capped", srv, srv.Links)
	}
	got := sink.waitTrace(t, srv.TraceID, "POST /plants", "plugin authorize bearer-auth", "redis create_plant", "webhook plant.created")
	select {
	case h := <-hooks:
		if want := traceparent(srv.TraceID, got["webhook plant.created"].SpanID); h[0] != want || h[1] != "" {
			t.Fatalf("webhook POST traceparent %q tracestate %q, want %q and none", h[0], h[1], want)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("no webhook delivery in 30s")
	}

	long := "/plants/" + strings.Repeat("9", 4000)
	if status, _ := requestWith(t, g.base, "GET", long, token, "", "X-Request-ID", "link-req-2"); status != 400 && status != 404 {
		t.Fatalf("GET of a 4 KB path: %d", status)
	}
	s := sink.waitSpan(t, "for link-req-2", func(s span) bool { return s.Attrs["plantgate.request_id"] == "link-req-2" })
	if p := s.Attrs["url.path"]; p != long[:512] {
		t.Fatalf("url.path of %d bytes, want the first 512", len(p))
	}
}
