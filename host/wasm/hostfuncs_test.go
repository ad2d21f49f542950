package wasm

import (
	"context"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/plantgate/plantgate/host"
	"github.com/plantgate/plantgate/sdk/abi"
)

func TestTokenLookup(t *testing.T) {
	t.Parallel()
	alice := host.Token{Digest: digestOf(cred32), Name: "alice", Scopes: []string{host.ScopePlantsWrite}, Created: testTime}
	long := "0123456789abcdef0123456789ABCDEF"
	revoked := "revoked-revoked-revoked-revoked-"
	tokens := map[[32]byte]host.Token{
		digestOf(cred32):  alice,
		digestOf(long):    {Name: strings.Repeat("n", 300)},
		digestOf(revoked): {Name: "mallory", Revoked: true},
	}
	tests := []struct {
		name       string
		tokens     TokenSource // nil: none configured
		credential string
		want       string
		wantErr    *host.Error
	}{
		{"found", &fakeTokens{tokens: tokens}, cred32, "alice", nil},
		{"not found", &fakeTokens{tokens: tokens}, strings.Repeat("z", 32), "",
			&host.Error{Code: 40150, Message: "token not found"}},
		{"store fails", &fakeTokens{err: host.Errorf(host.ErrStoreUnavailable, "down")}, cred32, "",
			&host.Error{Code: 50350, Message: "token store unavailable"}},
		{"no token source", nil, cred32, "",
			&host.Error{Code: 50350, Message: "token store unavailable"}},
		{"revoked", &fakeTokens{tokens: tokens}, revoked, "",
			&host.Error{Code: 40353, Message: "token revoked"}},
		{"record over the guest's buffer", &fakeTokens{tokens: tokens}, long, "",
			&host.Error{Code: 40152, Message: "record too large"}},
		{"digest not 32 bytes", &fakeTokens{tokens: tokens}, "short", "",
			&host.Error{Code: 40151, Message: "bad argument"}},
		{"output outside memory", &fakeTokens{tokens: tokens}, cred32 + "!", "",
			&host.Error{Code: 40151, Message: "bad argument"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p := load(t, "tokenlookup", nil, Limits{}, Options{Tokens: tt.tokens})
			principal, err := p.Authorize(context.Background(), host.AuthorizeRequest{Credential: tt.credential})
			wantError(t, err, tt.wantErr)
			if principal != tt.want {
				t.Fatalf("principal = %q, want %q", principal, tt.want)
			}
		})
	}
}

func TestTokenLookupGetsCallDeadline(t *testing.T) {
	t.Parallel()
	tokens := &fakeTokens{}
	p := load(t, "tokenlookup", nil, Limits{}, Options{Tokens: tokens})
	_, _ = p.Authorize(context.Background(), host.AuthorizeRequest{Credential: cred32})
	tokens.mu.Lock()
	defer tokens.mu.Unlock()
	if !tokens.hadDeadline {
		t.Fatal("the token lookup's context has no deadline; want the call's")
	}
}

func TestAppendTokenRecord(t *testing.T) {
	t.Parallel()
	tok := host.Token{
		Digest:  digestOf(cred32),
		Name:    "alice",
		Scopes:  []string{host.ScopePlantsRead, host.ScopePlantsWrite},
		Created: testTime,
		Expires: testTime.Add(time.Hour),
		Revoked: true,
	}
	r, err := abi.ParseTokenRecord(appendTokenRecord(nil, tok))
	if err != nil {
		t.Fatal(err)
	}
	if r.Created != testTime.UnixMilli() || r.Expires != testTime.Add(time.Hour).UnixMilli() || !r.Revoked ||
		string(r.Digest) != cred32 || string(r.Name) != "alice" || string(r.Scopes) != "plants:read plants:write" {
		t.Fatalf("record %+v does not match %+v", r, tok)
	}
	r, err = abi.ParseTokenRecord(appendTokenRecord(nil, host.Token{Name: "forever"}))
	if err != nil || r.Created != 0 || r.Expires != 0 || r.Revoked || len(r.Scopes) != 0 {
		t.Fatalf("zero times: %+v, %v; want created and expires 0", r, err)
	}
}

func TestLogRateLimit(t *testing.T) {
	t.Parallel()
	var now atomic.Pointer[time.Time]
	now.Store(&testTime)
	opts, logs := testOptions()
	opts.clock = func() time.Time { return *now.Load() }
	p := load(t, "logspam", nil, Limits{}, opts)
	ctx := context.Background()

	// 100 lines at once: the burst of 50 passes.
	if _, err := p.Authorize(ctx, host.AuthorizeRequest{}); err != nil {
		t.Fatal(err)
	}
	if n, d := logs.count("spam"), p.Stats().LogDropped; n != 50 || d != 50 {
		t.Fatalf("%d lines logged, %d dropped; want 50 and 50", n, d)
	}
	rec := logs.find(t, "spam")
	if rec.Level != slog.LevelInfo || rec.Attrs["plugin"] != "logspam" {
		t.Fatalf("log %+v, want level INFO and plugin=logspam", rec)
	}

	// A second later: 20 more, after a line counting the dropped ones.
	later := testTime.Add(time.Second)
	now.Store(&later)
	if _, err := p.Authorize(ctx, host.AuthorizeRequest{}); err != nil {
		t.Fatal(err)
	}
	if n, d := logs.count("spam"), p.Stats().LogDropped; n != 70 || d != 130 {
		t.Fatalf("%d lines logged, %d dropped; want 70 and 130", n, d)
	}
	if rec := logs.find(t, "plugin log lines dropped by the rate limit"); rec.Attrs["dropped"] != "50" || rec.Level != slog.LevelWarn {
		t.Fatalf("drop report %+v, want dropped=50 at WARN", rec)
	}

	// Much later: one line over abi.MaxLog, cut.
	evenLater := later.Add(time.Hour)
	now.Store(&evenLater)
	if err := p.Validate(ctx, host.Plant{}, ""); err != nil {
		t.Fatal(err)
	}
	want := strings.Repeat("x", abi.MaxLog)
	if rec := logs.find(t, want); rec.Level != slog.LevelWarn {
		t.Fatalf("long line logged at %v, want WARN", rec.Level)
	}
}

func TestLogWriter(t *testing.T) {
	t.Parallel()
	opts, logs := testOptions()
	opts = opts.withDefaults()
	p := &Plugin{log: opts.Logger, clock: opts.clock}
	p.logs.init(opts.clock())
	w := newLogWriter(p, "stderr", slog.LevelWarn)
	for _, s := range []string{"one\ntw", "o\n", strings.Repeat("y", abi.MaxLog+10) + "\nthree\n", "part"} {
		if n, err := w.Write([]byte(s)); n != len(s) || err != nil {
			t.Fatalf("Write = %d, %v", n, err)
		}
	}
	w.flush()
	var got []string
	for _, r := range logs.records() {
		got = append(got, r.Msg)
	}
	want := []string{"one", "two", strings.Repeat("y", abi.MaxLog), "three", "part"}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("lines %q, want %q", got, want)
	}
}
