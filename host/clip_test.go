package host

import (
	"strings"
	"testing"
)

func TestClip(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		s     string
		n     int
		want  string
		total int
	}{
		{"Fern", 4, "Fern", 0},
		{"Ferns", 4, "Fern", 5},
		{"", 0, "", 0},
		{"éé", 3, "é", 4},   // never half a character
		{"é", 1, "", 2},     // a character longer than the bound
		{"a€b", 3, "a", 5},  // a three-byte character cut
		{"a€b", 4, "a€", 5}, // ends on its boundary
		{strings.Repeat("<", 1<<20), RecordNameBytes, strings.Repeat("<", RecordNameBytes), 1 << 20},
	} {
		got, total := Clip(tc.s, tc.n)
		if got != tc.want || total != tc.total {
			t.Errorf("Clip(%.10q, %d) = %q, %d; want %q, %d", tc.s, tc.n, got, total, tc.want, tc.total)
		}
	}
}

func TestShown(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		s        string
		total, n int
		quote    bool
		want     string
	}{
		{"Fern", 0, 8, true, `"Fern"`},
		{"/plants/1", 0, 8, false, `/plants/… (9 bytes)`},
		{"<<", 1 << 20, 8, true, `"<<"… (1048576 bytes)`}, // clipped by the writer
		{"<<<<", 0, 2, true, `"<<"… (4 bytes)`},           // an old, unclipped record
	} {
		if got := Shown(tc.s, tc.total, tc.n, tc.quote); got != tc.want {
			t.Errorf("Shown(%q, %d, %d, %v) = %s, want %s", tc.s, tc.total, tc.n, tc.quote, got, tc.want)
		}
	}
}
