package redis

import (
	"context"
	"fmt"
	"reflect"
	"testing"
	"time"
)

// testShadowDiffs: the diff log keeps the newest entries first, reads back
// what was written, and stays capped at about ShadowDiffCap.
func testShadowDiffs(t *testing.T, newF newFixture) {
	f := newF(t)
	ctx := context.Background()
	if ds, err := f.store.ShadowDiffs(ctx, 10); err != nil || len(ds) != 0 {
		t.Fatalf("empty log: %v %v", ds, err)
	}
	id := int64(7)
	tag := "green"
	first := ShadowDiff{At: time.UnixMilli(1700000000000).UTC(), Gateway: "gw-1", RequestID: "r-1", Plugin: "plant-rules",
		File: "20-plant-rules.shadow.wasm", Phase: "authorize", Outcome: "would_deny", Live: Decision{Decision: "allow"},
		Shadow: Decision{Decision: "deny", Code: 40355}, Principal: "alice", Method: "GET", Route: "GET /plants/{id}",
		Path: "/plants/7", PathID: &id}
	if err := f.store.AddShadowDiff(ctx, first); err != nil {
		t.Fatal(err)
	}
	second := ShadowDiff{At: first.At.Add(time.Second), RequestID: "r-2", Plugin: "plant-rules", Phase: "validate",
		Outcome: "would_allow", Live: Decision{Decision: "deny", Code: 40051}, Shadow: Decision{Decision: "allow"},
		Plant: &DiffPlant{ID: 3, Name: "Fern", Tag: &tag}}
	if err := f.store.AddShadowDiff(ctx, second); err != nil {
		t.Fatal(err)
	}
	ds, err := f.store.ShadowDiffs(ctx, 10)
	if err != nil || len(ds) != 2 {
		t.Fatalf("ShadowDiffs = %d, %v", len(ds), err)
	}
	if ds[0].ID == "" || ds[1].ID == "" {
		t.Fatalf("entries without their ids: %+v", ds)
	}
	got0, got1 := ds[0], ds[1]
	got0.ID, got1.ID = "", ""
	if !reflect.DeepEqual(got0.Plant, second.Plant) || got0.RequestID != "r-2" || got0.Live != second.Live || got0.Shadow != second.Shadow {
		t.Fatalf("newest = %+v", got0)
	}
	if got1.RequestID != "r-1" || *got1.PathID != 7 || got1.Route != first.Route || !got1.At.Equal(first.At) || got1.Gateway != "gw-1" {
		t.Fatalf("oldest = %+v", got1)
	}
	for i := range 2 * ShadowDiffCap {
		if err := f.store.AddShadowDiff(ctx, ShadowDiff{RequestID: fmt.Sprint("bulk-", i)}); err != nil {
			t.Fatal(err)
		}
	}
	n, err := f.raw.XLen(ctx, f.key("{shadow}:diffs")).Result()
	if err != nil || n < ShadowDiffCap || n > ShadowDiffCap+200 {
		t.Fatalf("stream length %d after %d adds, want about %d (%v)", n, 2*ShadowDiffCap+2, ShadowDiffCap, err)
	}
	if ds, _ := f.store.ShadowDiffs(ctx, 1); len(ds) != 1 || ds[0].RequestID != fmt.Sprint("bulk-", 2*ShadowDiffCap-1) {
		t.Fatalf("newest after the bulk: %+v", ds)
	}
}

// testPluginPrevious: each publish keeps the manifest it replaced, with its
// version, for plugin rollback.
func testPluginPrevious(t *testing.T, newF newFixture) {
	f := newF(t)
	ctx := context.Background()
	a, _ := f.store.PutPluginModule(ctx, []byte("a"))
	b, _ := f.store.PutPluginModule(ctx, []byte("b"))
	publish := func(d string) {
		t.Helper()
		base, err := f.store.PluginManifest(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.store.PublishPlugins(ctx, base, PluginManifest{Plugins: []PluginEntry{{File: "10-p.wasm", Module: d}}, Sig: []byte(d)}); err != nil {
			t.Fatal(err)
		}
	}
	publish(a)
	m, err := f.store.PluginManifest(ctx)
	if err != nil || m.Previous == nil || m.Previous.Version != 0 || len(m.Previous.Plugins) != 0 {
		t.Fatalf("after the first publish: previous %+v, %v", m.Previous, err)
	}
	publish(b)
	m, err = f.store.PluginManifest(ctx)
	if err != nil || m.Version != 2 || m.Previous == nil || m.Previous.Version != 1 || len(m.Previous.Plugins) != 1 ||
		m.Previous.Plugins[0].Module != a || string(m.Previous.Sig) != a || m.Previous.Previous != nil {
		t.Fatalf("after the second publish: %+v previous %+v, %v", m, m.Previous, err)
	}
}
