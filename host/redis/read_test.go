package redis

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"testing"

	goredis "github.com/redis/go-redis/v9"

	"github.com/plantgate/plantgate/host"
)

// eventValues is an outbox entry as "type ts data", for exact comparison.
func eventValues(m goredis.XMessage) string {
	return fmt.Sprintf("%v %v %v (%d fields)", m.Values["type"], m.Values["ts"], m.Values["data"], len(m.Values))
}

func eventsOf(t *testing.T, f fixture, id int64) []string {
	t.Helper()
	var out []string
	for _, m := range f.events(t, id) {
		out = append(out, eventValues(m))
	}
	return out
}

func testGetDelete(t *testing.T, newF newFixture) {
	f := newF(t)
	record(t, f)
	ctx := context.Background()
	_, err := f.store.Plant(ctx, 5)
	wantCode(t, err, host.ErrPlantNotFound, "no plant with id 5")

	for _, p := range []host.Plant{tagged(5, "Fern", "indoor"), plant(-9, "Moss"), tagged(6, "Ivy", ""), plant(math.MinInt64, "Min")} {
		if created, err := f.store.CreatePlant(ctx, p); !created || err != nil {
			t.Fatalf("create %d: %v %v", p.ID, created, err)
		}
	}
	for _, want := range []host.Plant{tagged(5, "Fern", "indoor"), plant(-9, "Moss"), tagged(6, "Ivy", ""), plant(math.MinInt64, "Min")} {
		if got, err := f.store.Plant(ctx, want.ID); err != nil || got != want {
			t.Fatalf("Plant(%d) = %+v, %v; want %+v", want.ID, got, err, want)
		}
	}

	if err := f.store.DeletePlant(ctx, 5); err != nil {
		t.Fatalf("delete 5: %v", err)
	}
	_, err = f.store.Plant(ctx, 5)
	wantCode(t, err, host.ErrPlantNotFound, "no plant with id 5")
	if n, err := f.raw.Exists(ctx, f.plantKey(5)).Result(); n != 0 || err != nil {
		t.Fatalf("plant key after delete: exists=%d err=%v", n, err)
	}
	if _, err := f.raw.ZScore(ctx, f.indexKey(5), indexMember(5)).Result(); !errors.Is(err, goredis.Nil) {
		t.Fatalf("index member after delete: err %v, want none", err)
	}
	// A second delete finds nothing and records nothing.
	wantCode(t, f.store.DeletePlant(ctx, 5), host.ErrPlantNotFound, "no plant with id 5")
	// The other plants are untouched.
	if got, err := f.store.Plant(ctx, -9); err != nil || got != plant(-9, "Moss") {
		t.Fatalf("Plant(-9) after deleting 5 = %+v, %v", got, err)
	}

	// A deleted id can be created again, with other content.
	if created, err := f.store.CreatePlant(ctx, plant(5, "Palm")); !created || err != nil {
		t.Fatalf("re-create 5: %v %v", created, err)
	}
	if got, err := f.store.Plant(ctx, 5); err != nil || got != plant(5, "Palm") {
		t.Fatalf("Plant(5) after re-create = %+v, %v", got, err)
	}
	want := []string{
		`plant.created 1700000000123 {"id":5,"name":"Fern","tag":"indoor"} (3 fields)`,
		`plant.deleted 1700000000123 {"id":5} (3 fields)`,
		`plant.created 1700000000123 {"id":5,"name":"Palm"} (3 fields)`,
	}
	var got5 []string // the shard's events about plant 5
	for _, e := range eventsOf(t, f, 5) {
		if strings.Contains(e, `{"id":5,`) || strings.Contains(e, `{"id":5}`) {
			got5 = append(got5, e)
		}
	}
	if !slices.Equal(got5, want) {
		t.Fatalf("events of 5's shard = %q, want %q", got5, want)
	}

	// Deleting an id never stored records nothing.
	before := len(f.events(t, 77))
	wantCode(t, f.store.DeletePlant(ctx, 77), host.ErrPlantNotFound, "no plant with id 77")
	if after := len(f.events(t, 77)); after != before {
		t.Fatalf("delete of an absent plant added %d events", after-before)
	}

	// Corrupt content at a plant key is an internal error, not a plant.
	if err := f.raw.Set(ctx, f.plantKey(8), `{"id":9,"name":"x"}`, 0).Err(); err != nil {
		t.Fatal(err)
	}
	_, err = f.store.Plant(ctx, 8)
	wantCode(t, err, host.ErrInternal, "plant store error")
}

// walk pages through every plant with this limit and returns the ids, one
// page's ids per element.
func walk(t *testing.T, s *Store, limit int) [][]int64 {
	t.Helper()
	var pages [][]int64
	var after *int64
	for {
		page, err := s.Plants(context.Background(), after, limit)
		if err != nil {
			t.Fatal(err)
		}
		var ids []int64
		for _, p := range page.Plants {
			ids = append(ids, p.ID)
		}
		pages = append(pages, ids)
		if !page.More {
			return pages
		}
		if len(pages) > 10000 {
			t.Fatal("walk does not end")
		}
		last := page.Last
		after = &last
	}
}

func testListOrder(t *testing.T, newF newFixture) {
	f := newF(t)
	ctx := context.Background()
	if page, err := f.store.Plants(ctx, nil, 20); err != nil || len(page.Plants) != 0 || page.More {
		t.Fatalf("empty store: %+v, %v", page, err)
	}
	if _, err := f.store.Plants(ctx, nil, 0); err == nil {
		t.Fatal("limit 0: no error")
	}
	// 21 ids, negatives included, over many shards, created out of order.
	ids := []int64{math.MaxInt64, 3, -3, 0, math.MinInt64, 17, -17, 1 << 40, -(1 << 40), 255, 256, -256,
		42, 43, 44, 45, 46, 47, 48, -1, 1}
	for _, id := range ids {
		if _, err := f.store.CreatePlant(ctx, tagged(id, fmt.Sprint("n", id), "t")); err != nil {
			t.Fatal(err)
		}
	}
	sorted := slices.Clone(ids)
	slices.Sort(sorted)
	shards := map[int]bool{}
	for _, id := range ids {
		shards[shardOf(id)] = true
	}
	if len(shards) < 8 {
		t.Fatalf("the ids span %d shards; the test wants many", len(shards))
	}
	for _, tc := range []struct {
		limit int
		sizes []int
	}{
		{1, slices.Repeat([]int{1}, 21)},
		{7, []int{7, 7, 7}}, // exactly full: the last page says no more
		{8, []int{8, 8, 5}},
		{20, []int{20, 1}},
		{100, []int{21}},
	} {
		pages := walk(t, f.store, tc.limit)
		var all []int64
		var sizes []int
		for _, p := range pages {
			all = append(all, p...)
			sizes = append(sizes, len(p))
		}
		if !slices.Equal(all, sorted) || !slices.Equal(sizes, tc.sizes) {
			t.Fatalf("limit %d: ids %v in pages of %v; want %v in pages of %v", tc.limit, all, sizes, sorted, tc.sizes)
		}
	}
	page, err := f.store.Plants(ctx, nil, 2)
	if want := []host.Plant{tagged(math.MinInt64, fmt.Sprint("n", int64(math.MinInt64)), "t"), tagged(-(1 << 40), "n-1099511627776", "t")}; err != nil ||
		!slices.Equal(page.Plants, want) || !page.More || page.Last != -(1<<40) {
		t.Fatalf("first page = %+v, %v; want %+v, more, last %d", page, err, want, -(1 << 40))
	}
	// After the highest id there is nothing.
	after := int64(math.MaxInt64)
	if page, err := f.store.Plants(ctx, &after, 5); err != nil || len(page.Plants) != 0 || page.More {
		t.Fatalf("after MaxInt64: %+v, %v", page, err)
	}
}

// testListUnderWrites walks the plants again and again while another
// goroutine creates and deletes other ids between (and during) its pages:
// no walk returns an id twice or out of order, and every walk returns every
// plant that existed throughout.
func testListUnderWrites(t *testing.T, newF newFixture) {
	f := newF(t)
	ctx := context.Background()
	var stable []int64
	for id := int64(-300); id < 300; id += 6 {
		stable = append(stable, id)
		if _, err := f.store.CreatePlant(ctx, plant(id, "stable")); err != nil {
			t.Fatal(err)
		}
	}
	stop := make(chan struct{})
	wrote := make(chan struct{}, 1)
	var wg sync.WaitGroup
	wg.Go(func() {
		// Churn: ids not in stable, over the same range, each created and
		// deleted again one step later.
		var prev int64 = 1
		for i := int64(0); ; i++ {
			id := -301 + (i*7)%600
			if id%6 == 0 {
				id++
			}
			_, err := f.store.CreatePlant(ctx, plant(id, "churn"))
			if err == nil && i > 0 {
				err = f.store.DeletePlant(ctx, prev)
			}
			if host.Code(err) == host.ErrPlantNotFound {
				err = nil
			}
			prev = id
			if err != nil {
				t.Errorf("churn: %v", err)
				return
			}
			select {
			case wrote <- struct{}{}:
			default:
			}
			select {
			case <-stop:
				return
			default:
			}
		}
	})
	defer func() { close(stop); wg.Wait() }()

	for range 5 {
		var seen []int64
		var after *int64
		for {
			<-wrote // at least one write between any two pages
			page, err := f.store.Plants(ctx, after, 7)
			if err != nil {
				t.Fatal(err)
			}
			for _, p := range page.Plants {
				if n := len(seen); n > 0 && p.ID <= seen[n-1] {
					t.Fatalf("id %d after %d: repeated or out of order", p.ID, seen[n-1])
				}
				seen = append(seen, p.ID)
			}
			if !page.More {
				break
			}
			last := page.Last
			after = &last
		}
		for _, id := range stable {
			if _, ok := slices.BinarySearch(seen, id); !ok {
				t.Fatalf("walk skipped id %d, which existed throughout", id)
			}
		}
	}
}

func testCursorKey(t *testing.T, newF newFixture) {
	f := newF(t)
	ctx := context.Background()
	k1, err := f.store.CursorKey(ctx)
	if err != nil || len(k1) != 32 {
		t.Fatalf("CursorKey = %x, %v; want 32 bytes", k1, err)
	}
	// Another store on the same data (another gateway) gets the same key.
	var oc goredis.UniversalClient
	switch raw := f.raw.(type) {
	case *goredis.Client:
		oc = goredis.NewClient(raw.Options())
	case *goredis.ClusterClient:
		oc = goredis.NewClusterClient(raw.Options())
	default:
		t.Fatalf("raw client %T", f.raw)
	}
	other := New(oc, Options{KeyPrefix: f.prefix})
	defer other.Close()
	k2, err := other.CursorKey(ctx)
	if err != nil || !slices.Equal(k1, k2) {
		t.Fatalf("second gateway's key = %x, %v; want %x", k2, err, k1)
	}
	if v, err := f.raw.Get(ctx, f.key("{meta}:cursor-key")).Result(); err != nil || len(v) != 64 {
		t.Fatalf("stored key = %q, %v; want 64 hex digits", v, err)
	}
}

// testEventsFromFirstEndpoint checks when the outbox records (events.go):
// not before a webhook endpoint exists, from the first one on, after it is
// removed too. A store with an endpoint and no flags is the deliverer's to
// mend (host/webhook, TestEndpointWithoutRecordingGetsEvents).
func testEventsFromFirstEndpoint(t *testing.T, newF newFixture) {
	f := newF(t)
	ctx := context.Background()
	outbox := func() (n int64) {
		t.Helper()
		for shard := range Shards {
			l, err := f.raw.XLen(ctx, fmt.Sprintf("%s{p%02d}:events", f.prefix, shard)).Result()
			if err != nil {
				t.Fatal(err)
			}
			n += l
		}
		return n
	}
	create := func(id int64) {
		t.Helper()
		if created, err := f.store.CreatePlant(ctx, plant(id, "Fern")); !created || err != nil {
			t.Fatalf("create %d: %v %v", id, created, err)
		}
	}
	for id := range int64(32) {
		create(id)
	}
	for id := range int64(8) {
		if err := f.store.DeletePlant(ctx, id); err != nil {
			t.Fatal(err)
		}
	}
	if n := outbox(); n != 0 {
		t.Fatalf("without a webhook endpoint the outbox holds %d events, want 0", n)
	}

	ep := host.Endpoint{ID: "ep1", URL: "https://hooks.example/plants", Events: []string{"plant.created"}, Secret: "whsec_x", Created: fixedNow()}
	if err := f.store.AddEndpoint(ctx, ep); err != nil {
		t.Fatal(err)
	}
	for id := int64(100); id < 132; id++ {
		create(id)
	}
	if err := f.store.DeletePlant(ctx, 100); err != nil {
		t.Fatal(err)
	}
	if n := outbox(); n != 33 {
		t.Fatalf("with an endpoint: %d events, want 33 (32 creates, 1 delete)", n)
	}
	if removed, err := f.store.RemoveEndpoint(ctx, "ep1"); !removed || err != nil {
		t.Fatalf("remove endpoint: %v %v", removed, err)
	}
	create(200)
	if n := outbox(); n != 34 {
		t.Fatalf("after the endpoint's removal: %d events, want 34: recording never turns off", n)
	}

}
