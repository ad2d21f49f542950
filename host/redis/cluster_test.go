package redis

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/plantgate/plantgate/host/redis/redistest"
)

// These tests run the store on a real 3-primary Redis Cluster (redistest),
// where a script or pipeline whose keys span slots fails with CROSSSLOT and
// a key on another primary answers MOVED.

// clusterFixture opens a Store per (sub)test on c, with its own key prefix,
// in the cluster URL form.
func clusterFixture(c *redistest.Cluster, opts Options) newFixture {
	return func(t *testing.T) fixture {
		t.Helper()
		opts := opts
		opts.KeyPrefix = "c" + strconv.FormatInt(prefixes.Add(1), 10) + ":"
		s, err := Open(context.Background(), c.URL(), opts)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = s.Close() })
		if s.Mode() != modeCluster {
			t.Fatalf("Mode = %q, want %q", s.Mode(), modeCluster)
		}
		s.now = fixedNow
		co, err := goredis.ParseClusterURL(c.URL())
		if err != nil {
			t.Fatal(err)
		}
		raw := goredis.NewClusterClient(co)
		t.Cleanup(func() { _ = raw.Close() })
		return fixture{store: s, raw: raw, prefix: opts.KeyPrefix}
	}
}

func TestStoreCluster(t *testing.T) {
	t.Parallel()
	runStoreSuite(t, clusterFixture(cluster.Get(t), Options{}))
}

func TestBootstrapTokenCluster(t *testing.T) {
	t.Parallel()
	testBootstrapToken(t, clusterFixture(cluster.Get(t), Options{})(t))
}

// TestClusterKeySpread: 3,000 plants spread over the three primaries with
// none holding half of the store's keys, and the list walks them all in
// order, page by page, across the shards.
func TestClusterKeySpread(t *testing.T) {
	t.Parallel()
	c := cluster.Get(t)
	f := clusterFixture(c, Options{})(t)
	record(t, f) // the outbox streams are spread too
	ctx := context.Background()
	const n = 3000
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for w := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for id := int64(w); id < n; id += 16 {
				created, err := f.store.CreatePlant(ctx, plant(id*7919, fmt.Sprint("plant ", id)))
				if err != nil || !created {
					errs <- fmt.Errorf("create %d: created=%v err=%v", id, created, err)
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}

	// Count this test's keys on each primary (other tests share the
	// cluster under other prefixes).
	primaries := c.Primaries(t)
	if len(primaries) != 3 {
		t.Fatalf("%d primaries, want 3", len(primaries))
	}
	total, counts := 0, make([]int, len(primaries))
	for i, p := range primaries {
		cl := goredis.NewClient(&goredis.Options{Addr: p.Addr()})
		iter := cl.Scan(ctx, 0, f.prefix+"*", 1000).Iterator()
		for iter.Next(ctx) {
			counts[i]++
		}
		if err := iter.Err(); err != nil {
			t.Fatal(err)
		}
		_ = cl.Close()
		total += counts[i]
	}
	// Every plant, and each shard's index, outbox stream and recording flag.
	if want := n + 3*Shards; total != want {
		t.Fatalf("%d keys on the primaries %v, want %d", total, counts, want)
	}
	for i, k := range counts {
		if 2*k > total {
			t.Fatalf("primary %d holds %d of %d keys (%v): more than half", i, k, total, counts)
		}
	}
	t.Logf("keys per primary: %v of %d", counts, total)

	var got []int64
	var after *int64
	for {
		page, err := f.store.Plants(ctx, after, 101)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range page.Plants {
			got = append(got, p.ID)
		}
		if !page.More {
			break
		}
		last := page.Last
		after = &last
	}
	want := make([]int64, n)
	for i := range want {
		want[i] = int64(i) * 7919
	}
	if !slices.Equal(got, want) {
		t.Fatalf("list walked %d plants, want the %d in order", len(got), n)
	}
}

// TestDialDetectsCluster: one address of a cluster node, in the plain URL
// form, gets a cluster client (said by Mode), which reaches keys on every
// primary; a database other than 0 is refused, since a cluster has none.
func TestDialDetectsCluster(t *testing.T) {
	t.Parallel()
	c := cluster.Get(t)
	ctx := context.Background()
	s, err := Open(ctx, "redis://"+c.Nodes[0].Addr(), Options{KeyPrefix: "detect" + strconv.FormatInt(prefixes.Add(1), 10) + ":"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	if s.Mode() != modeDetected {
		t.Fatalf("Mode = %q, want %q", s.Mode(), modeDetected)
	}
	for id := range int64(Shards * 4) {
		if created, err := s.CreatePlant(ctx, plant(id, "Fern")); !created || err != nil {
			t.Fatalf("create %d: created=%v err=%v", id, created, err)
		}
	}
	if _, err := Dial("redis://"+c.Nodes[0].Addr()+"/2", Options{}); err == nil || !strings.Contains(err.Error(), "drop the /db") {
		t.Fatalf("Dial with /2 on a cluster node: %v", err)
	}
}

// TestDialModes: the URL forms and what each becomes, without a server.
func TestDialModes(t *testing.T) {
	t.Parallel()
	tests := []struct {
		url, mode, addr, err string
	}{
		{url: "redis://127.0.0.1:1/0", mode: modeSingleUnprobed, addr: "127.0.0.1:1"},
		{url: "redis://:secret@127.0.0.1:1?addr=127.0.0.1:2&addr=127.0.0.1:3", mode: modeCluster, addr: "127.0.0.1:1"},
		{url: "redis+sentinel://:secret@127.0.0.1:1?addr=127.0.0.1:2&master_name=mymaster", mode: modeSentinel + " (primary mymaster)", addr: "127.0.0.1:1"},
		{url: "redis+sentinel://127.0.0.1:1", err: "a sentinel url needs master_name=NAME"},
		{url: "redis://:secret@127.0.0.1:1?addr=127.0.0.1:2&bogus=1", err: "invalid cluster url"},
		{url: "redis://:secret@[::1", err: "invalid url"},
	}
	for _, tt := range tests {
		t.Run(tt.url, func(t *testing.T) {
			s, err := Dial(tt.url, Options{DialTimeout: 100 * time.Millisecond})
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) || strings.Contains(err.Error(), "secret") {
					t.Fatalf("err = %v, want one containing %q and no password", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			if s.Mode() != tt.mode || s.Addr() != tt.addr {
				t.Fatalf("Mode, Addr = %q, %q; want %q, %q", s.Mode(), s.Addr(), tt.mode, tt.addr)
			}
		})
	}
}

// TestClusterPersistence: the start-up log's persistence line asks every
// primary. Alike, they read as one; one that differs is named with its
// own, rather than the line describing whichever node answered.
func TestClusterPersistence(t *testing.T) {
	t.Parallel()
	c := cluster.Get(t)
	f := clusterFixture(c, Options{})(t)
	ctx := context.Background()
	got, err := f.store.Persistence(ctx)
	if want := `aof=off rdb_save="" rdb_last_bgsave=ok (all 3 primaries)`; err != nil || got != want {
		t.Fatalf("Persistence = %q, %v; want %q", got, err, want)
	}

	// One primary saving RDB snapshots, the others not: named.
	one := c.Primaries(t)[0]
	oc := goredis.NewClient(&goredis.Options{Addr: one.Addr()})
	defer oc.Close()
	if err := oc.ConfigSet(ctx, "save", "3600 1").Err(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = oc.ConfigSet(context.Background(), "save", "").Err() })
	got, err = f.store.Persistence(ctx)
	if err != nil || !strings.HasPrefix(got, "primaries differ: ") || !strings.Contains(got, one.Addr()+`: aof=off rdb_save="3600 1" rdb_last_bgsave=ok`) {
		t.Fatalf("with %s saving snapshots: Persistence = %q, %v", one.Addr(), got, err)
	}

	if want := "primaries differ: a: aof=on appendfsync=always; b: aof=off"; clusterPersistence(map[string]string{
		"b": "aof=off", "a": "aof=on appendfsync=always",
	}) != want {
		t.Fatalf("clusterPersistence of two that differ = %q, want %q", clusterPersistence(map[string]string{
			"b": "aof=off", "a": "aof=on appendfsync=always",
		}), want)
	}
}
