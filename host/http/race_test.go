package http_test

import (
	"fmt"
	"sync"
	"testing"
)

// TestConcurrentCreateSameID has many clients create one id at once, with
// identical and with conflicting content: exactly one content wins, every
// sender of the winning content gets 200 and every other sender gets 40003.
func TestConcurrentCreateSameID(t *testing.T) {
	t.Parallel()
	g := newGateway(t, gatewayOptions{})
	const senders, contents = 48, 3
	for round := range 5 {
		id := 7000 + round
		bodies := make([]string, contents)
		for i := range bodies {
			bodies[i] = fmt.Sprintf(`{"id":%d,"name":"content-%d"}`, id, i)
		}
		got := make([]response, senders)
		var wg sync.WaitGroup
		start := make(chan struct{})
		for s := range senders {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				got[s] = g.post(bodies[s%contents])
			}()
		}
		close(start)
		wg.Wait()
		winner := -1
		for s, r := range got {
			if r.status == 200 {
				if winner >= 0 && s%contents != winner {
					t.Fatalf("round %d: contents %d and %d both got 200", round, winner, s%contents)
				}
				winner = s % contents
			}
		}
		if winner < 0 {
			t.Fatalf("round %d: no sender got 200: %+v", round, got[0])
		}
		for s, r := range got {
			want, wantBody := 200, fmt.Sprintf(`{"name":"content-%d"}`, winner)
			if s%contents != winner {
				want, wantBody = 400, errorBody(40003, fmt.Sprintf("plant %d already exists with other content", id))
			}
			if r.status != want || r.body != wantBody {
				t.Errorf("round %d sender %d (content %d): %d %s, want %d %s", round, s, s%contents, r.status, r.body, want, wantBody)
			}
		}
		if s := g.stored(fmt.Sprint(id)); s != fmt.Sprintf(`{"id":%d,"name":"content-%d"}`, id, winner) {
			t.Fatalf("round %d: stored %q, winner %d", round, s, winner)
		}
	}
}
