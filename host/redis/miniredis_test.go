package redis

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	goredis "github.com/redis/go-redis/v9"

	"github.com/plantgate/plantgate/host"
)

// miniredisFixture gives each test its own miniredis, opened through Open.
func miniredisFixture(t *testing.T) fixture {
	t.Helper()
	mr := miniredis.RunT(t)
	s, err := Open(context.Background(), "redis://"+mr.Addr(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	s.now = fixedNow
	raw := goredis.NewClient(&goredis.Options{Addr: mr.Addr()})
	t.Cleanup(func() { _ = raw.Close() })
	return fixture{store: s, raw: raw, prefix: "plantgate:", mr: mr}
}

func TestStoreMiniredis(t *testing.T) {
	t.Parallel()
	runStoreSuite(t, miniredisFixture)
}

// TestMiniredisKeys checks the key layout through miniredis's own view.
func TestMiniredisKeys(t *testing.T) {
	t.Parallel()
	mr := miniredis.RunT(t)
	s := New(goredis.NewClient(&goredis.Options{Addr: mr.Addr()}), Options{KeyPrefix: "pg:"})
	t.Cleanup(func() { _ = s.Close() })
	s.now = fixedNow
	ctx := context.Background()

	// Events are recorded from the first webhook endpoint on (events.go).
	if _, err := s.CreatePlant(ctx, tagged(-4, "Moss", "")); err != nil {
		t.Fatal(err)
	}
	if mr.Exists("pg:{p07}:events") || mr.Exists("pg:{p07}:events:on") || shardOf(-4) != 7 {
		t.Fatalf("without an endpoint: keys %v, want no outbox stream or flag of shard 7", mr.Keys())
	}
	if err := s.AddEndpoint(ctx, host.Endpoint{ID: "ep1", URL: "https://hooks.example/plants", Events: []string{"plant.created"}, Secret: "whsec_x", Created: fixedNow()}); err != nil {
		t.Fatal(err)
	}
	for shard := range Shards {
		mr.CheckGet(t, fmt.Sprintf("pg:{p%02d}:events:on", shard), "1")
	}
	if _, err := s.CreatePlant(ctx, tagged(-3, "Fern", "")); err != nil {
		t.Fatal(err)
	}
	if err := s.PutToken(ctx, host.Token{Digest: digest(0xab, 0xcd), Name: "ops", Scopes: host.AllScopes()}); err != nil {
		t.Fatal(err)
	}
	// Plant -3 lives in shard 15 (see shardOf).
	if shardOf(-3) != 15 {
		t.Fatalf("shardOf(-3) = %d, want 15: the stored layout changed", shardOf(-3))
	}
	mr.CheckGet(t, "pg:{p15}:plant:-3", `{"id":-3,"name":"Fern","tag":""}`)
	if zs, err := mr.SortedSet("pg:{p15}:index"); err != nil || len(zs) != 1 || zs["7ffffffffffffffd"] != 0 {
		t.Fatalf("index = %v (err %v), want {7ffffffffffffffd: 0}", zs, err)
	}
	if es, err := mr.Stream("pg:{p15}:events"); err != nil || len(es) != 1 ||
		strings.Join(es[0].Values, " ") != `type plant.created ts 1700000000123 data {"id":-3,"name":"Fern","tag":""}` {
		t.Fatalf("events stream = %v (err %v), want one plant.created entry", es, err)
	}
	if got := mr.HGet("pg:{tokens}:token:abababababababab", "scopes"); got != "plants:delete plants:read plants:write" {
		t.Fatalf("scopes field = %q", got)
	}
	if ok, err := mr.IsMember("pg:{tokens}:index", "abababababababab"); !ok || err != nil {
		t.Fatalf("selector not indexed: %v %v", ok, err)
	}
	var want []string
	for shard := range Shards {
		want = append(want, fmt.Sprintf("pg:{p%02d}:events:on", shard))
	}
	want = append(want, "pg:{p07}:index", "pg:{p07}:plant:-4", "pg:{p15}:events", "pg:{p15}:index", "pg:{p15}:plant:-3",
		"pg:{tokens}:index", "pg:{tokens}:token:abababababababab", "pg:{webhooks}:endpoint:ep1", "pg:{webhooks}:endpoints")
	slices.Sort(want)
	if got := mr.Keys(); strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("keys = %v, want %v", got, want)
	}
}

// wantUnavailable checks the 503 error: the client-safe *host.Error, and the
// cause kept for the logs.
func wantUnavailable(t *testing.T, err error) {
	t.Helper()
	wantCode(t, err, host.ErrStoreUnavailable, "plant store unavailable")
	var oe *opError
	if !errors.As(err, &oe) || oe.cause == nil || !strings.Contains(err.Error(), oe.cause.Error()) {
		t.Fatalf("err %q does not show its cause", err)
	}
}

// storeCalls runs every Store method once and returns the errors, by name.
func storeCalls(ctx context.Context, s *Store) map[string]error {
	_, createErr := s.CreatePlant(ctx, plant(1, "Fern"))
	_, tokenErr := s.Token(ctx, digest(1, 1))
	_, tokensErr := s.Tokens(ctx)
	_, revokeErr := s.RevokeToken(ctx, "x")
	_, persistErr := s.Persistence(ctx)
	return map[string]error{
		"CreatePlant": createErr,
		"Token":       tokenErr,
		"Tokens":      tokensErr,
		"RevokeToken": revokeErr,
		"PutToken":    s.PutToken(ctx, host.Token{Digest: digest(1, 1), Name: "x"}),
		"Ping":        s.Ping(ctx),
		"Persistence": persistErr,
	}
}

func TestStoreDownMiniredis(t *testing.T) {
	t.Parallel()
	f := miniredisFixture(t)
	ctx := context.Background()
	if err := f.store.Ping(ctx); err != nil {
		t.Fatal(err)
	}
	f.mr.Close()
	for name, err := range storeCalls(ctx, f.store) {
		t.Run(name, func(t *testing.T) { wantUnavailable(t, err) })
	}
}

// TestDeadlines: a server that accepts connections and never answers costs a
// caller its context's deadline or the ReadTimeout, whichever is first, and
// then answers 503.
func TestDeadlines(t *testing.T) {
	t.Parallel()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			t.Cleanup(func() { _ = c.Close() }) // hold it open, silent
		}
	}()

	tests := []struct {
		name        string
		readTimeout time.Duration
		ctxTimeout  time.Duration // 0: no deadline
		wantWithin  time.Duration
	}{
		{name: "context deadline first", readTimeout: 5 * time.Second, ctxTimeout: 100 * time.Millisecond, wantWithin: time.Second},
		{name: "read timeout first", readTimeout: 100 * time.Millisecond, wantWithin: time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			co := &goredis.Options{Addr: l.Addr().String()}
			opts := optionsDefault(Options{ReadTimeout: tt.readTimeout})
			opts.apply(co)
			s := New(goredis.NewClient(co), opts)
			t.Cleanup(func() { _ = s.Close() })

			ctx := context.Background()
			if tt.ctxTimeout > 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, tt.ctxTimeout)
				defer cancel()
			}
			start := time.Now()
			_, err := s.CreatePlant(ctx, plant(1, "Fern"))
			if took := time.Since(start); took > tt.wantWithin {
				t.Fatalf("took %v, want under %v", took, tt.wantWithin)
			}
			wantUnavailable(t, err)
		})
	}
}

func TestExpiredContext(t *testing.T) {
	t.Parallel()
	f := miniredisFixture(t)
	ctx, cancel := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
	defer cancel()
	_, err := f.store.CreatePlant(ctx, plant(1, "Fern"))
	wantUnavailable(t, err)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err %v does not wrap context.DeadlineExceeded", err)
	}
}

func TestReplyErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		reply string
		want  int32
	}{
		{"LOADING Redis is loading the dataset in memory", host.ErrStoreUnavailable},
		{"READONLY You can't write against a read only replica.", host.ErrStoreUnavailable},
		{"OOM command not allowed when used memory > 'maxmemory'.", host.ErrStoreUnavailable},
		{"NOAUTH Authentication required.", host.ErrStoreUnavailable},
		{"WRONGTYPE Operation against a key holding the wrong kind of value", host.ErrInternal},
		{"ERR Error running script", host.ErrInternal},
	}
	for _, tt := range tests {
		t.Run(strings.Fields(tt.reply)[0], func(t *testing.T) {
			t.Parallel()
			f := miniredisFixture(t)
			f.mr.SetError(tt.reply)
			_, err := f.store.CreatePlant(context.Background(), plant(1, "Fern"))
			msg := map[int32]string{host.ErrStoreUnavailable: "plant store unavailable", host.ErrInternal: "plant store error"}[tt.want]
			wantCode(t, err, tt.want, msg)
			if !strings.Contains(err.Error(), tt.reply) {
				t.Fatalf("err %q does not show the reply", err)
			}
		})
	}
}

// TestWrongTypeKey: a foreign value at a plant key is a bug or corruption,
// reported as 500 rather than as the client's conflict.
func TestWrongTypeKey(t *testing.T) {
	t.Parallel()
	f := miniredisFixture(t)
	f.mr.HSet(f.plantKey(1), "x", "y")
	_, err := f.store.CreatePlant(context.Background(), plant(1, "Fern"))
	wantCode(t, err, host.ErrInternal, "plant store error")
}

func TestEmbedded(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, closeFn, err := Embedded(ctx, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if created, err := s.CreatePlant(ctx, plant(1, "Fern")); !created || err != nil {
		t.Fatalf("created=%v err=%v", created, err)
	}
	if p, err := s.Persistence(ctx); err != nil || p != "none (embedded miniredis: in memory, lost on exit)" {
		t.Fatalf("Persistence = %q, %v", p, err)
	}
	closeFn()
	closeFn()
	if err := s.Close(); err != nil {
		t.Fatalf("Close after closeFn = %v, want the first close's nil", err)
	}
	wantUnavailable(t, s.Ping(ctx))
}

func TestPersistenceMiniredis(t *testing.T) {
	t.Parallel()
	f := miniredisFixture(t)
	if p, err := f.store.Persistence(context.Background()); err != nil || p != "unknown (server does not report INFO persistence)" {
		t.Fatalf("Persistence = %q, %v", p, err)
	}
}

func TestOpen(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	mr := miniredis.RunT(t)

	t.Run("timeouts: options, then URL, then defaults", func(t *testing.T) {
		t.Parallel()
		s, err := Open(ctx, "redis://"+mr.Addr()+"/0?read_timeout=3s&dial_timeout=4s&max_retries=7",
			Options{DialTimeout: 5 * time.Second, PoolSize: 3})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		o := s.client.(*goredis.Client).Options()
		got := []any{o.DialTimeout, o.ReadTimeout, o.WriteTimeout, o.PoolTimeout, o.PoolSize, o.MaxRetries, o.ContextTimeoutEnabled}
		want := []any{5 * time.Second, 3 * time.Second, time.Second, time.Second, 3, 0, true} // go-redis turns its "never" -1 into 0 once set up
		for i := range want {
			if got[i] != want[i] {
				t.Fatalf("client options %v, want %v", got, want)
			}
		}
	})
	t.Run("retries from options", func(t *testing.T) {
		t.Parallel()
		s, err := Open(ctx, "redis://"+mr.Addr(), Options{MaxRetries: 2})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		if got := s.client.(*goredis.Client).Options().MaxRetries; got != 2 {
			t.Fatalf("MaxRetries = %d, want 2", got)
		}
	})
	t.Run("bad URL hides the password", func(t *testing.T) {
		t.Parallel()
		for _, u := range []string{"redis://:s3cret@127.0.0.1:notaport", "http://:s3cret@127.0.0.1:6379", "redis://:s3cret@%zz"} {
			_, err := Open(ctx, u, Options{})
			if err == nil || strings.Contains(err.Error(), "s3cret") {
				t.Fatalf("Open(%q) = %v, want an error without the password", u, err)
			}
		}
	})
	t.Run("unreachable", func(t *testing.T) {
		t.Parallel()
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := l.Addr().String()
		_ = l.Close() // now nothing listens there
		_, err = Open(ctx, "redis://:s3cret@"+addr, Options{})
		wantUnavailable(t, err)
		if strings.Contains(err.Error(), "s3cret") {
			t.Fatalf("err %q shows the password", err)
		}
	})
}

func TestNewRejectsBraces(t *testing.T) {
	t.Parallel()
	defer func() {
		if r := recover(); r == nil {
			t.Fatal("New with a brace in the prefix did not panic")
		}
	}()
	New(goredis.NewClient(&goredis.Options{}), Options{KeyPrefix: "x{y}:"})
}

// TestTokenErrorsNameNoDigest: a failed token read names no part of the
// token's digest (its selector keys the record): the error reaches the log
// and, as a span's status, the exported traces, which carry no credential
// nor its digest.
func TestTokenErrorsNameNoDigest(t *testing.T) {
	t.Parallel()
	f := miniredisFixture(t)
	d := digest(7, 7)
	sel := selector(d)
	f.mr.SetError("LOADING Redis is loading the dataset in memory")
	_, down := f.store.Token(context.Background(), d)
	f.mr.SetError("")
	if err := f.mr.Set(f.store.tokenKey(sel), "not a hash"); err != nil {
		t.Fatal(err)
	}
	_, corrupt := f.store.Token(context.Background(), d)
	for _, err := range []error{down, corrupt} {
		if err == nil || strings.Contains(err.Error(), sel) || strings.Contains(err.Error(), sel[:8]) {
			t.Errorf("token read error %v: want an error that names no part of the digest %s", err, sel)
		}
	}
}
