package redis

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"testing"
	"time"
)

// TestSetLogger: go-redis's line about a store it cannot dial arrives as
// one JSON record from the gateway's logger.
func TestSetLogger(t *testing.T) {
	var buf bytes.Buffer
	SetLogger(slog.New(slog.NewJSONHandler(&buf, nil)))
	t.Cleanup(func() { SetLogger(slog.New(slog.DiscardHandler)) })
	st, err := Dial("redis://127.0.0.1:1", Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := st.Ping(ctx); err == nil {
		t.Fatal("ping of a closed port succeeded")
	}
	var rec struct {
		Level, Msg, Component string
	}
	line, _, _ := bytes.Cut(buf.Bytes(), []byte("\n"))
	if err := json.Unmarshal(line, &rec); err != nil {
		t.Fatalf("not one JSON record: %q", buf.String())
	}
	if rec.Level != "WARN" || rec.Component != "go-redis" || !bytes.Contains([]byte(rec.Msg), []byte("connection pool: failed to dial")) {
		t.Fatalf("record %+v", rec)
	}
}
