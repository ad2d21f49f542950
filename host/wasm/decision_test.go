package wasm

import (
	"context"
	"sync"
	"testing"

	"github.com/plantgate/plantgate/host"
)

// recorder keeps the decisions it is given; want decides Wants.
type recorder struct {
	mu   sync.Mutex
	want bool
	got  []host.Decision
}

func (r *recorder) Wants(context.Context) bool { return r.want }
func (r *recorder) Record(_ context.Context, d *host.Decision) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.got = append(r.got, *d)
}

// Every plugin call of a chain is recorded once, with its plugin, module
// digest, phase, outcome, code and message, and the input's non-secret
// fields; the credential is in no field. A recorder that does not want the
// request is given nothing.
func TestChainRecordsDecisions(t *testing.T) {
	t.Parallel()
	rec := &recorder{want: true}
	opts := Options{Decisions: rec}
	allow, deny := load(t, "allow", nil, Limits{}, opts), load(t, "deny", nil, Limits{}, opts)
	c := NewChain(allow, deny)
	ctx := context.Background()
	r := host.AuthorizeRequest{Method: "GET", Path: "/plants/9", Route: "GET /plants/{id}", PathID: 9, HasPathID: true, Credential: cred32}
	if _, err := c.Authorize(ctx, r); host.Code(err) != 40355 {
		t.Fatalf("Authorize: %v", err)
	}
	plant := host.Plant{ID: 3, Name: "Ivy", Tag: "green", HasTag: true}
	if err := NewChain(allow).Validate(ctx, plant, "alice"); err != nil {
		t.Fatal(err)
	}
	if len(rec.got) != 3 {
		t.Fatalf("%d decisions, want 3: %+v", len(rec.got), rec.got)
	}
	authIn := host.DecisionInput{Method: "GET", Path: "/plants/9", Route: "GET /plants/{id}", PathID: 9, HasPathID: true}
	for i, want := range []host.Decision{
		{Plugin: "allow", SHA256: allow.info.SHA256, Phase: "authorize", Outcome: "allow", Input: authIn},
		{Plugin: "deny", SHA256: deny.info.SHA256, Phase: "authorize", Outcome: "deny", Code: 40355, Message: "denied by fixture", Input: authIn},
		{Plugin: "allow", SHA256: allow.info.SHA256, Phase: "validate", Outcome: "allow",
			Input: host.DecisionInput{Method: "POST", Path: "/plants", Route: "POST /plants", Plant: &plant, Principal: "alice"}},
	} {
		got := rec.got[i]
		if got.Start.IsZero() || got.Took <= 0 {
			t.Fatalf("decision %d: start %v took %v", i, got.Start, got.Took)
		}
		got.Start, got.Took = want.Start, want.Took
		if got.Input.Plant != nil && *got.Input.Plant == plant {
			got.Input.Plant = &plant
		}
		if got != want {
			t.Fatalf("decision %d:\n got %+v\nwant %+v", i, got, want)
		}
	}

	rec.want = false
	if _, err := c.Authorize(ctx, r); host.Code(err) != 40355 {
		t.Fatal(err)
	}
	if len(rec.got) != 3 {
		t.Fatalf("a recorder that wants nothing got %d more", len(rec.got)-3)
	}
}

// A chain whose recorder wants nothing allocates no more per call than a
// chain with no recorder: the Decision is built only after Wants.
func TestDecisionsOffAllocateNothing(t *testing.T) {
	// Not parallel: AllocsPerRun counts the whole process's allocations.
	if raceEnabled {
		t.Skip("under the race detector sync.Pool drops items at random: allocation counts hold in normal builds only")
	}
	ctx := context.Background()
	r := host.AuthorizeRequest{Method: "POST", Path: "/plants", Route: "POST /plants", Credential: cred32}
	plant := host.Plant{ID: 3, Name: "Ivy"}
	allocs := func(opts Options) float64 {
		c := NewChain(load(t, "allow", nil, Limits{}, opts))
		return testing.AllocsPerRun(200, func() {
			if _, err := c.Authorize(ctx, r); err != nil {
				t.Fatal(err)
			}
			if err := c.Validate(ctx, plant, "alice"); err != nil {
				t.Fatal(err)
			}
		})
	}
	none, off := allocs(Options{}), allocs(Options{Decisions: &recorder{}})
	if off != none {
		t.Fatalf("%.1f allocations per request with a recorder that wants nothing, %.1f with none", off, none)
	}
	if on := allocs(Options{Decisions: &recorder{want: true}}); on <= none {
		t.Fatalf("recording: %.1f allocations, without: %.1f; the test measures nothing", on, none)
	}
}
