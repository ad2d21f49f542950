package main

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
)

const sec = int64(time.Second)

// TestLinearizableStaleRead: the history CI's seed-23 run recorded for
// plant 35 (issue 23) is refused, with the plant named.
func TestLinearizableStaleRead(t *testing.T) {
	ops := []*op{
		{client: 1, kind: opCreate, id: 35, content: "plant 35", result: "created", outcome: outOK, call: 1 * sec, ret: 1*sec + 100},
		{client: 2, kind: opDelete, id: 35, outcome: outUnknown, status: 503, call: 3009 * sec / 1000, ret: -1},
		{client: 3, kind: opRead, id: 35, result: "absent", outcome: outOK, call: 5016 * sec / 1000, ret: 6012 * sec / 1000},
		{client: 4, kind: opDelete, id: 35, result: "deleted", outcome: outOK, call: 11124 * sec / 1000, ret: 11200 * sec / 1000},
	}
	res, found, visual := linearizable(ops, time.Minute, t.TempDir())
	if res != porcupine.Illegal || len(found) != 1 || found[0].kind != "not-linearizable" || found[0].id != 35 || !strings.HasSuffix(visual, "linearizability.html") {
		t.Fatalf("got %v, %+v, %q; want Illegal, one not-linearizable anomaly for plant 35, a visualization", res, found, visual)
	}
	// Without the read the same history fits: the unknown delete did not
	// happen.
	res, found, _ = linearizable([]*op{ops[0], ops[1], ops[3]}, time.Minute, t.TempDir())
	if res != porcupine.Ok || len(found) != 0 {
		t.Fatalf("without the read: %v, %+v; want Ok", res, found)
	}
}

// TestLinearizableUndecided: a history porcupine cannot decide in time is an
// anomaly, not a pass (runs with many unknown operations printed
// "porcupine: Unknown" and "PASS" before).
func TestLinearizableUndecided(t *testing.T) {
	var ops []*op
	// Many unknown creates and deletes of one plant, then a read of a name
	// nobody created: refusing it means trying every order of the unknown
	// ones.
	for i := range 40 {
		ops = append(ops,
			&op{client: i, kind: opCreate, id: 1, content: fmt.Sprint("name ", i), outcome: outUnknown, call: int64(i), ret: -1},
			&op{client: 100 + i, kind: opDelete, id: 1, outcome: outUnknown, call: int64(i), ret: -1})
	}
	ops = append(ops, &op{client: 999, kind: opRead, id: 1, content: "nobody's", result: "present", outcome: outOK, call: sec, ret: 2 * sec})
	res, found, _ := linearizable(ops, 200*time.Millisecond, t.TempDir())
	if res != porcupine.Unknown {
		t.Fatalf("porcupine answered %v; the test needs a history it cannot decide in 200 ms", res)
	}
	if len(found) != 1 || found[0].kind != "check-undecided" {
		t.Fatalf("anomalies %+v; want one check-undecided", found)
	}
}

// TestRefusedByPlugin: a 503 a plugin answered means the operation did not
// happen, and is left out of the history; a store's 503 may have happened.
func TestRefusedByPlugin(t *testing.T) {
	for body, want := range map[string]bool{
		`{"error":50302,"message":"no plugin instance was free in time"}`: true,
		`{"error":50350,"message":"token store unavailable"}`:             true,
		`{"error":50399,"message":"x"}`:                                   true,
		`{"error":50301,"message":"plant store unavailable"}`:             false,
		`{"error":50304,"message":"the write reached 0 of the 1 …"}`:      false,
		`not an error body`: false,
	} {
		if got := refusedByPlugin(answer{status: 503, body: body, header: http.Header{"Retry-After": {"1"}}}); got != want {
			t.Errorf("refusedByPlugin(%s) = %v, want %v", body, got, want)
		}
	}
	// A failed create is not in the history: the read of "absent" after
	// it fits.
	ops := []*op{
		{client: 1, kind: opCreate, id: 7, content: "Fern", outcome: outFail, status: 503, call: 1, ret: 2},
		{client: 2, kind: opRead, id: 7, result: "absent", outcome: outOK, call: 3, ret: 4},
	}
	if res, found, _ := linearizable(ops, time.Minute, t.TempDir()); res != porcupine.Ok || len(found) != 0 {
		t.Fatalf("%v, %+v; want Ok", res, found)
	}
}
