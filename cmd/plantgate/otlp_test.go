package main

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	collectortracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"
)

// span is a received span, flattened for assertions.
type span struct {
	Name, TraceID, SpanID, ParentID string
	Kind                            tracepb.Span_SpanKind
	Attrs                           map[string]string
	Service                         string
	Status                          tracepb.Status_StatusCode
	Links                           []spanLink
	TraceState                      string
}

// spanLink is a received span's link.
type spanLink struct{ TraceID, SpanID, TraceState string }

func (s span) String() string {
	return fmt.Sprintf("%s trace=%s span=%s parent=%s kind=%v %v", s.Name, s.TraceID, s.SpanID, s.ParentID, s.Kind, s.Attrs)
}

// otlpSink keeps what an OTLP receiver decoded.
type otlpSink struct {
	mu    sync.Mutex
	spans []span
	reqs  int
}

func (k *otlpSink) add(req *collectortracepb.ExportTraceServiceRequest) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.reqs++
	for _, rs := range req.ResourceSpans {
		service := ""
		for _, kv := range rs.GetResource().GetAttributes() {
			if kv.Key == "service.name" {
				service = kv.Value.GetStringValue()
			}
		}
		for _, ss := range rs.ScopeSpans {
			for _, s := range ss.Spans {
				attrs := map[string]string{}
				for _, kv := range s.Attributes {
					attrs[kv.Key] = anyString(kv.Value)
				}
				var links []spanLink
				for _, l := range s.Links {
					links = append(links, spanLink{hex.EncodeToString(l.TraceId), hex.EncodeToString(l.SpanId), l.TraceState})
				}
				k.spans = append(k.spans, span{
					Name: s.Name, TraceID: hex.EncodeToString(s.TraceId), SpanID: hex.EncodeToString(s.SpanId),
					ParentID: hex.EncodeToString(s.ParentSpanId), Kind: s.Kind, Attrs: attrs, Service: service,
					Status: s.GetStatus().GetCode(), Links: links, TraceState: s.TraceState,
				})
			}
		}
	}
}

func anyString(v *commonpb.AnyValue) string {
	switch x := v.Value.(type) {
	case *commonpb.AnyValue_StringValue:
		return x.StringValue
	case *commonpb.AnyValue_IntValue:
		return fmt.Sprint(x.IntValue)
	case *commonpb.AnyValue_BoolValue:
		return fmt.Sprint(x.BoolValue)
	case *commonpb.AnyValue_DoubleValue:
		return fmt.Sprint(x.DoubleValue)
	}
	return v.String()
}

// waitSpan waits for a span that match reports and returns it.
func (k *otlpSink) waitSpan(t *testing.T, what string, match func(span) bool) span {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		k.mu.Lock()
		for _, s := range k.spans {
			if match(s) {
				k.mu.Unlock()
				return s
			}
		}
		all := k.spans
		k.mu.Unlock()
		if time.Now().After(deadline) {
			t.Fatalf("no span %s after 30s; received:\n%v", what, all)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// waitTrace waits until the spans of traceID include every name in names
// and returns them by name (each name once).
func (k *otlpSink) waitTrace(t *testing.T, traceID string, names ...string) map[string]span {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		k.mu.Lock()
		got := map[string]span{}
		for _, s := range k.spans {
			if s.TraceID == traceID {
				if _, dup := got[s.Name]; dup {
					k.mu.Unlock()
					t.Fatalf("two spans named %q in trace %s", s.Name, traceID)
				}
				got[s.Name] = s
			}
		}
		all := k.spans
		k.mu.Unlock()
		missing := []string{}
		for _, n := range names {
			if _, ok := got[n]; !ok {
				missing = append(missing, n)
			}
		}
		if len(missing) == 0 {
			return got
		}
		if time.Now().After(deadline) {
			t.Fatalf("trace %s: no span %q after 30s; received:\n%v", traceID, missing, all)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// newOTLPHTTPReceiver is an OTLP/HTTP receiver: it decodes each POST to
// /v1/traces as the protobuf ExportTraceServiceRequest the exporter sent.
func newOTLPHTTPReceiver(t *testing.T) (*otlpSink, string) {
	k := &otlpSink{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.URL.Path != "/v1/traces" || r.Header.Get("Content-Type") != "application/x-protobuf" {
			http.Error(w, "want POST /v1/traces application/x-protobuf", http.StatusBadRequest)
			return
		}
		var body io.Reader = r.Body
		if r.Header.Get("Content-Encoding") == "gzip" {
			zr, err := gzip.NewReader(r.Body)
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			body = zr
		}
		b, err := io.ReadAll(body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		var req collectortracepb.ExportTraceServiceRequest
		if err := proto.Unmarshal(b, &req); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		k.add(&req)
		out, _ := proto.Marshal(&collectortracepb.ExportTraceServiceResponse{})
		w.Header().Set("Content-Type", "application/x-protobuf")
		w.Write(out)
	}))
	t.Cleanup(srv.Close)
	return k, srv.URL
}

// grpcReceiver is an OTLP/gRPC trace service.
type grpcReceiver struct {
	collectortracepb.UnimplementedTraceServiceServer
	sink *otlpSink
}

func (g *grpcReceiver) Export(_ context.Context, req *collectortracepb.ExportTraceServiceRequest) (*collectortracepb.ExportTraceServiceResponse, error) {
	g.sink.add(req)
	return &collectortracepb.ExportTraceServiceResponse{}, nil
}

// newOTLPGRPCReceiver serves the OTLP trace service over gRPC (plaintext)
// on loopback and returns its endpoint URL.
func newOTLPGRPCReceiver(t *testing.T) (*otlpSink, string) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	k := &otlpSink{}
	srv := grpc.NewServer()
	collectortracepb.RegisterTraceServiceServer(srv, &grpcReceiver{sink: k})
	go srv.Serve(ln)
	t.Cleanup(srv.Stop)
	return k, "http://" + ln.Addr().String()
}

// traceparent is a W3C traceparent header value, sampled.
func traceparent(traceID, spanID string) string { return "00-" + traceID + "-" + spanID + "-01" }

// requestWith sends method path with the bearer token and extra headers.
func requestWith(t *testing.T, base, method, path, token, body string, headers ...string) (int, string) {
	t.Helper()
	var r io.Reader
	if body != "" {
		r = bytes.NewReader([]byte(body))
	}
	req, err := http.NewRequest(method, base+path, r)
	if err != nil {
		t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	status, b, _ := send(t, req, token)
	return status, strings.TrimSpace(b)
}

// patientPlugins is a plugins directory with bearer-auth and plant-rules,
// each given 5 s per call: on a loaded CI machine a guest call can wait on
// the CPU past the 100 ms default, and a fault would change the decisions
// these tests assert.
func patientPlugins(t *testing.T) string {
	t.Helper()
	dir := pluginsDir(t, "10-bearer-auth.wasm", "20-plant-rules.wasm")
	for _, f := range []string{"10-bearer-auth.json", "20-plant-rules.json"} {
		if err := os.WriteFile(filepath.Join(dir, f), []byte(`{"limits":{"timeout_ms":5000}}`), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}
