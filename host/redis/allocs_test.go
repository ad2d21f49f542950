package redis

import (
	"context"
	"testing"

	"github.com/plantgate/plantgate/host/redis/redistest"
)

// TestCreatePlantAllocs: a create's script call is one op (its command's
// arguments inline), its command, and one string for the plant's content,
// index member and time, besides what go-redis allocates for the round trip
// (a lone caller: the batcher lets it send its own command). The store sees
// the same command: the plant is created, a second create is the same.
func TestCreatePlantAllocs(t *testing.T) {
	s, err := Open(context.Background(), redistest.Start(t).URL(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	ctx := context.Background()
	id := int64(0)
	create := func() {
		id++
		if created, err := s.CreatePlant(ctx, tagged(id, "Monstera deliciosa", "tropical")); err != nil || !created {
			t.Fatalf("CreatePlant(%d) = %v, %v", id, created, err)
		}
	}
	create()
	if created, err := s.CreatePlant(ctx, tagged(id, "Monstera deliciosa", "tropical")); err != nil || created {
		t.Fatalf("CreatePlant(%d) again = %v, %v; want the same plant, not created", id, created, err)
	}
	if p, err := s.Plant(ctx, id); err != nil || p.Name != "Monstera deliciosa" || p.Tag != "tropical" {
		t.Fatalf("Plant(%d) = %+v, %v", id, p, err)
	}
	n := testing.AllocsPerRun(200, create)
	// go-redis's round trip: its reply and connection check, about 4.
	t.Logf("CreatePlant: %.0f allocations", n)
	if n > 8 {
		t.Errorf("CreatePlant: %.0f allocations, want at most 8", n)
	}
}
