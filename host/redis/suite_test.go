package redis

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	goredis "github.com/redis/go-redis/v9"

	"github.com/plantgate/plantgate/host"
)

// fixture is one test's view of a backend: a Store with its own key prefix,
// and a plain client on the same server to inspect what the Store wrote.
type fixture struct {
	store  *Store
	raw    goredis.UniversalClient
	prefix string
	mr     *miniredis.Miniredis // set for the miniredis backend only
}

func (f fixture) key(suffix string) string { return f.prefix + suffix }

// shardKey is a key of the shard that holds id, spelt out as the package
// doc documents it: <prefix>{pNN}:<suffix>.
func (f fixture) shardKey(id int64, suffix string) string {
	return fmt.Sprintf("%s{p%02d}:%s", f.prefix, shardOf(id), suffix)
}

func (f fixture) plantKey(id int64) string  { return f.shardKey(id, "plant:"+strconv.FormatInt(id, 10)) }
func (f fixture) indexKey(id int64) string  { return f.shardKey(id, "index") }
func (f fixture) eventsKey(id int64) string { return f.shardKey(id, "events") }

// events returns the entries of the outbox stream of id's shard.
func (f fixture) events(t *testing.T, id int64) []goredis.XMessage {
	t.Helper()
	msgs, err := f.raw.XRange(context.Background(), f.eventsKey(id), "-", "+").Result()
	if err != nil {
		t.Fatalf("XRANGE %s: %v", f.eventsKey(id), err)
	}
	return msgs
}

// record turns on event recording (events.go), as the first webhook
// endpoint does, for a test that reads the outbox.
func record(t *testing.T, f fixture) {
	t.Helper()
	if err := f.store.RecordEvents(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// newFixture makes a fresh fixture for one (sub)test.
type newFixture func(t *testing.T) fixture

// runStoreSuite is the behaviour every backend must show. It runs against
// miniredis (TestStoreMiniredis) and a real redis-server (TestStoreRedisServer).
func runStoreSuite(t *testing.T, newF newFixture) {
	t.Run("CreatePlant", func(t *testing.T) { t.Parallel(); testCreatePlant(t, newF) })
	t.Run("PluginChain", func(t *testing.T) { t.Parallel(); testPluginChain(t, newF) })
	t.Run("PluginModuleGrace", func(t *testing.T) { t.Parallel(); testPluginModuleGrace(t, newF) })
	t.Run("PluginPrevious", func(t *testing.T) { t.Parallel(); testPluginPrevious(t, newF) })
	t.Run("ShadowDiffs", func(t *testing.T) { t.Parallel(); testShadowDiffs(t, newF) })
	t.Run("Fleet", func(t *testing.T) { t.Parallel(); testFleet(t, newF) })
	t.Run("Int64Edges", func(t *testing.T) { t.Parallel(); testInt64Edges(t, newF) })
	t.Run("Tokens", func(t *testing.T) { t.Parallel(); testTokens(t, newF) })
	t.Run("TokenSelectorCollision", func(t *testing.T) { t.Parallel(); testTokenSelectorCollision(t, newF) })
	t.Run("ConcurrentSameContent", func(t *testing.T) { t.Parallel(); testConcurrentSame(t, newF) })
	t.Run("ConcurrentOtherContent", func(t *testing.T) { t.Parallel(); testConcurrentOther(t, newF) })
	t.Run("GetDelete", func(t *testing.T) { t.Parallel(); testGetDelete(t, newF) })
	t.Run("EventsFromFirstEndpoint", func(t *testing.T) { t.Parallel(); testEventsFromFirstEndpoint(t, newF) })
	t.Run("ListOrder", func(t *testing.T) { t.Parallel(); testListOrder(t, newF) })
	t.Run("ListUnderWrites", func(t *testing.T) { t.Parallel(); testListUnderWrites(t, newF) })
	t.Run("CursorKey", func(t *testing.T) { t.Parallel(); testCursorKey(t, newF) })
	t.Run("KV", func(t *testing.T) { t.Parallel(); testKV(t, newF) })
	t.Run("KVLease", func(t *testing.T) { t.Parallel(); testKVLease(t, newF) })
	t.Run("KVLeaseSliding", func(t *testing.T) { t.Parallel(); testKVLeaseSliding(t, newF) })
}

// fixedNow is the fixtures' clock: every event records ts 1700000000123.
func fixedNow() time.Time { return time.UnixMilli(1_700_000_000_123) }

func plant(id int64, name string) host.Plant { return host.Plant{ID: id, Name: name} }

func tagged(id int64, name, tag string) host.Plant {
	return host.Plant{ID: id, Name: name, Tag: tag, HasTag: true}
}

// wantCode fails unless err is or wraps a *host.Error with exactly this code
// and, when msg is not empty, exactly this message.
func wantCode(t *testing.T, err error, code int32, msg string) {
	t.Helper()
	var he *host.Error
	if !errors.As(err, &he) {
		t.Fatalf("err = %v (%T), want *host.Error %d", err, err, code)
	}
	if he.Code != code || (msg != "" && he.Message != msg) {
		t.Fatalf("err = %d %q, want %d %q", he.Code, he.Message, code, msg)
	}
	if host.Code(err) != code {
		t.Fatalf("host.Code(err) = %d, want %d", host.Code(err), code)
	}
}

func testCreatePlant(t *testing.T, newF newFixture) {
	const conflict = "plant 7 already exists with other content"
	tests := []struct {
		name        string
		existing    *host.Plant // created first, when set
		create      host.Plant
		wantCreated bool
		wantCode    int32 // 0: nil error
		wantMsg     string
		wantStored  string // content at the plant key afterwards; "" none
	}{
		{name: "new", create: plant(7, "Fern"), wantCreated: true,
			wantStored: `{"id":7,"name":"Fern"}`},
		{name: "new with tag", create: tagged(7, "Fern", "indoor"), wantCreated: true,
			wantStored: `{"id":7,"name":"Fern","tag":"indoor"}`},
		{name: "new with empty tag", create: tagged(7, "Fern", ""), wantCreated: true,
			wantStored: `{"id":7,"name":"Fern","tag":""}`},
		{name: "identical", existing: ptr(plant(7, "Fern")), create: plant(7, "Fern"),
			wantStored: `{"id":7,"name":"Fern"}`},
		{name: "identical with tag", existing: ptr(tagged(7, "Fern", "indoor")), create: tagged(7, "Fern", "indoor"),
			wantStored: `{"id":7,"name":"Fern","tag":"indoor"}`},
		{name: "identical with empty tag", existing: ptr(tagged(7, "Fern", "")), create: tagged(7, "Fern", ""),
			wantStored: `{"id":7,"name":"Fern","tag":""}`},
		{name: "other name", existing: ptr(plant(7, "Fern")), create: plant(7, "Moss"),
			wantCode: host.ErrConflict, wantMsg: conflict, wantStored: `{"id":7,"name":"Fern"}`},
		{name: "name differs in case", existing: ptr(plant(7, "Fern")), create: plant(7, "fern"),
			wantCode: host.ErrConflict, wantMsg: conflict, wantStored: `{"id":7,"name":"Fern"}`},
		{name: "other tag", existing: ptr(tagged(7, "Fern", "indoor")), create: tagged(7, "Fern", "outdoor"),
			wantCode: host.ErrConflict, wantMsg: conflict, wantStored: `{"id":7,"name":"Fern","tag":"indoor"}`},
		{name: "tag absent then empty", existing: ptr(plant(7, "Fern")), create: tagged(7, "Fern", ""),
			wantCode: host.ErrConflict, wantMsg: conflict, wantStored: `{"id":7,"name":"Fern"}`},
		{name: "tag empty then absent", existing: ptr(tagged(7, "Fern", "")), create: plant(7, "Fern"),
			wantCode: host.ErrConflict, wantMsg: conflict, wantStored: `{"id":7,"name":"Fern","tag":""}`},
		{name: "tag present then absent", existing: ptr(tagged(7, "Fern", "x")), create: plant(7, "Fern"),
			wantCode: host.ErrConflict, wantMsg: conflict, wantStored: `{"id":7,"name":"Fern","tag":"x"}`},
		{name: "ignores Tag without HasTag", existing: ptr(plant(7, "Fern")), create: host.Plant{ID: 7, Name: "Fern", Tag: "junk"},
			wantStored: `{"id":7,"name":"Fern"}`},
		{name: "other id is independent", existing: ptr(plant(8, "Fern")), create: plant(7, "Fern"), wantCreated: true,
			wantStored: `{"id":7,"name":"Fern"}`},
		{name: "escapes", create: tagged(7, "a\"b\\c\n\u00e9\u2028", "\x01"), wantCreated: true,
			wantStored: `{"id":7,"name":"a\"b\\c\n` + "\u00e9\u2028" + `","tag":"\u0001"}`},
		{name: "invalid UTF-8 name", create: plant(7, "bad\xff"),
			wantCode: host.ErrInvalidUTF8, wantMsg: "plant 7: name or tag is not valid UTF-8"},
		{name: "invalid UTF-8 tag", create: tagged(7, "Fern", "\xc3"),
			wantCode: host.ErrInvalidUTF8, wantMsg: "plant 7: name or tag is not valid UTF-8"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := newF(t)
			record(t, f)
			ctx := context.Background()
			if tt.existing != nil {
				if created, err := f.store.CreatePlant(ctx, *tt.existing); !created || err != nil {
					t.Fatalf("create existing: created=%v err=%v", created, err)
				}
			}
			created, err := f.store.CreatePlant(ctx, tt.create)
			if tt.wantCode == 0 && err != nil {
				t.Fatalf("err = %v, want nil", err)
			}
			if tt.wantCode != 0 {
				wantCode(t, err, tt.wantCode, tt.wantMsg)
			}
			if created != tt.wantCreated {
				t.Fatalf("created = %v, want %v", created, tt.wantCreated)
			}

			got, err := f.raw.Get(ctx, f.plantKey(7)).Result()
			if tt.wantStored == "" {
				if !errors.Is(err, goredis.Nil) {
					t.Fatalf("plant key holds %q (err %v), want no key", got, err)
				}
			} else if err != nil || got != tt.wantStored {
				t.Fatalf("plant key = %q (err %v), want %q", got, err, tt.wantStored)
			}
			score, err := f.raw.ZScore(ctx, f.indexKey(7), "8000000000000007").Result()
			if indexed := err == nil; indexed != (tt.wantStored != "") || score != 0 {
				t.Fatalf("index member for 7: score %v err %v, want indexed=%v score 0", score, err, tt.wantStored != "")
			}
			// One plant.created event per create that created: none for a
			// retry, a conflict or a refusal.
			var wantData []string
			if tt.existing != nil && tt.existing.ID == 7 {
				wantData = append(wantData, tt.wantStored)
			}
			if tt.wantCreated {
				wantData = append(wantData, tt.wantStored)
			}
			var gotData []string
			for _, m := range f.events(t, 7) {
				if len(m.Values) != 3 || m.Values["type"] != "plant.created" || m.Values["ts"] != "1700000000123" {
					t.Fatalf("event %v, want type plant.created ts 1700000000123 and data", m.Values)
				}
				gotData = append(gotData, m.Values["data"].(string))
			}
			if !slices.Equal(gotData, wantData) {
				t.Fatalf("event data %q, want %q", gotData, wantData)
			}
		})
	}
}

func ptr[T any](v T) *T { return &v }

func testInt64Edges(t *testing.T, newF newFixture) {
	f := newF(t)
	ctx := context.Background()
	// Created out of order on purpose: the index, not the creation order,
	// must give numeric order.
	ids := []int64{0, math.MaxInt64, -1, math.MinInt64, 1, math.MinInt64 + 1, math.MaxInt64 - 1,
		-1 << 32, 1 << 32, -255, 255, -256, 256}
	for _, id := range ids {
		name := "p" + strconv.FormatInt(id, 10)
		if created, err := f.store.CreatePlant(ctx, plant(id, name)); !created || err != nil {
			t.Fatalf("create %d: created=%v err=%v", id, created, err)
		}
		if created, err := f.store.CreatePlant(ctx, plant(id, name)); created || err != nil {
			t.Fatalf("re-create %d: created=%v err=%v, want false nil", id, created, err)
		}
		key := f.plantKey(id)
		want := fmt.Sprintf(`{"id":%d,"name":%q}`, id, name)
		if got, err := f.raw.Get(ctx, key).Result(); err != nil || got != want {
			t.Fatalf("%s = %q (err %v), want %q", key, got, err, want)
		}
	}

	// Each id is in its own shard's index, and byte order of the members
	// is numeric order of the ids.
	var got []int64
	for shard := range Shards {
		members, err := f.raw.ZRangeByLex(ctx, fmt.Sprintf("%s{p%02d}:index", f.prefix, shard), &goredis.ZRangeBy{Min: "-", Max: "+"}).Result()
		if err != nil {
			t.Fatal(err)
		}
		var inShard []int64
		for _, m := range members {
			u, err := strconv.ParseUint(m, 16, 64)
			if err != nil || len(m) != 16 {
				t.Fatalf("index member %q is not 16 hex digits", m)
			}
			id := int64(u ^ (1 << 63))
			if shardOf(id) != shard {
				t.Fatalf("id %d is in the index of shard %d, want %d", id, shard, shardOf(id))
			}
			inShard = append(inShard, id)
		}
		if !slices.IsSorted(inShard) {
			t.Fatalf("shard %d: ZRANGEBYLEX ids %v are not in numeric order", shard, inShard)
		}
		got = append(got, inShard...)
	}
	slices.Sort(got)
	want := slices.Clone(ids)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("indexed ids = %v, want %v", got, want)
	}
	// The whole walk through Plants gives the same order.
	var walked []int64
	var after *int64
	for {
		page, err := f.store.Plants(ctx, after, 3)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range page.Plants {
			walked = append(walked, p.ID)
		}
		if !page.More {
			break
		}
		after = &page.Last
	}
	if !slices.Equal(walked, want) {
		t.Fatalf("Plants walk = %v, want %v", walked, want)
	}
}

// digest returns a test digest: b repeated, with the last byte set to last.
func digest(b, last byte) [32]byte {
	var d [32]byte
	for i := range d {
		d[i] = b
	}
	d[31] = last
	return d
}

func testTokens(t *testing.T, newF newFixture) {
	f := newF(t)
	ctx := context.Background()
	created := time.UnixMilli(1_700_000_000_123).UTC()
	expires := time.UnixMilli(1_800_000_000_456).UTC()
	alice1 := host.Token{Digest: digest(0xa1, 1), Name: "alice", Scopes: host.AllScopes(), Created: created}
	alice2 := host.Token{Digest: digest(0xa2, 2), Name: "alice", Scopes: []string{host.ScopePlantsRead},
		Created: created.Add(time.Second), Expires: expires}
	bob := host.Token{Digest: digest(0xb0, 3), Name: "bob", Created: created, Revoked: true}
	for _, tok := range []host.Token{bob, alice2, alice1} {
		if err := f.store.PutToken(ctx, tok); err != nil {
			t.Fatalf("put %s: %v", tok.Name, err)
		}
	}

	// The record is the documented hash.
	rec, err := f.raw.HGetAll(ctx, f.key("{tokens}:token:a2a2a2a2a2a2a2a2")).Result()
	wantRec := map[string]string{
		"digest":  "a2a2a2a2a2a2a2a2a2a2a2a2a2a2a2a2a2a2a2a2a2a2a2a2a2a2a2a2a2a2a202",
		"name":    "alice",
		"scopes":  "plants:read",
		"created": "1700000001123",
		"expires": "1800000000456",
		"revoked": "0",
	}
	if err != nil || fmt.Sprint(rec) != fmt.Sprint(wantRec) {
		t.Fatalf("record = %v (err %v), want %v", rec, err, wantRec)
	}
	index, err := f.raw.SMembers(ctx, f.key("{tokens}:index")).Result()
	slices.Sort(index)
	if want := []string{"a1a1a1a1a1a1a1a1", "a2a2a2a2a2a2a2a2", "b0b0b0b0b0b0b0b0"}; err != nil || !slices.Equal(index, want) {
		t.Fatalf("index = %v (err %v), want %v", index, err, want)
	}

	for _, want := range []host.Token{alice1, alice2, bob} {
		got, err := f.store.Token(ctx, want.Digest)
		if err != nil || !tokenEqual(got, want) {
			t.Fatalf("Token(%s) = %+v, %v; want %+v", want.Name, got, err, want)
		}
	}
	_, err = f.store.Token(ctx, digest(0xcc, 0))
	wantCode(t, err, host.ErrTokenNotFound, "token not found")

	list, err := f.store.Tokens(ctx)
	if err != nil || !tokensEqual(list, []host.Token{alice1, alice2, bob}) {
		t.Fatalf("Tokens = %+v, %v", list, err)
	}

	for _, step := range []struct {
		name string
		want int
	}{{"alice", 2}, {"alice", 2}, {"nobody", 0}, {"", 0}} {
		if n, err := f.store.RevokeToken(ctx, step.name); n != step.want || err != nil {
			t.Fatalf("RevokeToken(%q) = %d, %v; want %d", step.name, n, err, step.want)
		}
	}
	for _, d := range [][32]byte{alice1.Digest, alice2.Digest} {
		if got, err := f.store.Token(ctx, d); err != nil || !got.Revoked {
			t.Fatalf("after revoke: %+v, %v; want revoked", got, err)
		}
	}

	// PutToken replaces by digest: one record, one index entry.
	alice1.Name, alice1.Revoked = "carol", false
	if err := f.store.PutToken(ctx, alice1); err != nil {
		t.Fatal(err)
	}
	if got, err := f.store.Token(ctx, alice1.Digest); err != nil || !tokenEqual(got, alice1) {
		t.Fatalf("replaced token = %+v, %v; want %+v", got, err, alice1)
	}
	if n, err := f.raw.SCard(ctx, f.key("{tokens}:index")).Result(); n != 3 || err != nil {
		t.Fatalf("index size = %d (err %v), want 3", n, err)
	}

	for _, bad := range []host.Token{
		{Digest: digest(1, 1), Name: ""},
		{Digest: digest(1, 1), Name: "x", Scopes: []string{"plants:read plants:write"}},
		{Digest: digest(1, 1), Name: "x", Scopes: []string{""}},
	} {
		if err := f.store.PutToken(ctx, bad); err == nil {
			t.Fatalf("PutToken(%+v) = nil, want an error", bad)
		}
	}
}

func testTokenSelectorCollision(t *testing.T, newF newFixture) {
	f := newF(t)
	ctx := context.Background()
	stored := host.Token{Digest: digest(0x5e, 1), Name: "stored", Scopes: host.AllScopes()}
	if err := f.store.PutToken(ctx, stored); err != nil {
		t.Fatal(err)
	}
	// Same first 8 bytes (the selector), different tail.
	other := digest(0x5e, 2)
	if selector(other) != selector(stored.Digest) {
		t.Fatal("test digests must share a selector")
	}
	_, err := f.store.Token(ctx, other)
	wantCode(t, err, host.ErrTokenNotFound, "token not found")

	err = f.store.PutToken(ctx, host.Token{Digest: other, Name: "intruder"})
	wantCode(t, err, host.ErrConflict, "token selector 5e5e5e5e5e5e5e5e is taken by another token")
	if got, err := f.store.Token(ctx, stored.Digest); err != nil || !tokenEqual(got, stored) {
		t.Fatalf("stored token after collision = %+v, %v; want unchanged", got, err)
	}
}

func tokenEqual(a, b host.Token) bool {
	return a.Digest == b.Digest && a.Name == b.Name && slices.Equal(a.Scopes, b.Scopes) &&
		a.Created.Equal(b.Created) && a.Expires.Equal(b.Expires) && a.Revoked == b.Revoked
}

func tokensEqual(a, b []host.Token) bool {
	return slices.EqualFunc(a, b, tokenEqual)
}

const racers = 50

// testConcurrentSame: racers creating one plant with the same content all
// succeed, and exactly one of them created it.
func testConcurrentSame(t *testing.T, newF newFixture) {
	f := newF(t)
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		created int
		errs    []error
	)
	for range racers {
		wg.Go(func() {
			c, err := f.store.CreatePlant(context.Background(), tagged(42, "Fern", "indoor"))
			mu.Lock()
			defer mu.Unlock()
			if c {
				created++
			}
			if err != nil {
				errs = append(errs, err)
			}
		})
	}
	wg.Wait()
	if created != 1 || len(errs) != 0 {
		t.Fatalf("created %d times, errors %v; want once, none", created, errs)
	}
}

// testConcurrentOther: racers creating one id with different contents: one
// wins, every other gets ErrConflict, and the winner's content is stored.
func testConcurrentOther(t *testing.T, newF newFixture) {
	f := newF(t)
	ctx := context.Background()
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		winners []int
		codes   = map[int32]int{}
	)
	for i := range racers {
		wg.Go(func() {
			c, err := f.store.CreatePlant(ctx, plant(42, "racer"+strconv.Itoa(i)))
			mu.Lock()
			defer mu.Unlock()
			switch {
			case c && err == nil:
				winners = append(winners, i)
			case !c && err != nil:
				codes[host.Code(err)]++
			default:
				t.Errorf("racer %d: created=%v err=%v", i, c, err)
			}
		})
	}
	wg.Wait()
	if len(winners) != 1 || codes[host.ErrConflict] != racers-1 || len(codes) != 1 {
		t.Fatalf("winners %v, error codes %v; want one winner and %d × %d", winners, codes, racers-1, host.ErrConflict)
	}
	want := fmt.Sprintf(`{"id":42,"name":"racer%d"}`, winners[0])
	if got, err := f.raw.Get(ctx, f.plantKey(42)).Result(); err != nil || got != want {
		t.Fatalf("stored %q (err %v), want the winner's %q", got, err, want)
	}
}
