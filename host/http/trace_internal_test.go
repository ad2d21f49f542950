package http

import (
	"fmt"
	"strings"
	"testing"
)

// TestCapTraceState: a client's tracestate is kept whole up to 512 bytes,
// else its leading members that fit.
func TestCapTraceState(t *testing.T) {
	t.Parallel()
	member := func(i int) string { return fmt.Sprintf("k%02d=%s", i, strings.Repeat("v", 96)) } // 100 bytes
	var five, six []string
	for i := range 6 {
		six = append(six, member(i))
	}
	five = six[:5]
	for _, tc := range []struct{ in, want string }{
		{"", ""},
		{"a=1,b=2", "a=1,b=2"},
		{strings.Join(five, ","), strings.Join(five, ",")}, // 504 bytes
		{strings.Join(six, ","), strings.Join(five, ",")},  // 605 bytes: the sixth goes
		{strings.Join(five, ",") + ",x=" + strings.Repeat("y", 4000), strings.Join(five, ",")},
		{"k=" + strings.Repeat("y", 600), ""}, // no member fits
	} {
		if got := capTraceState([]byte(tc.in)); got != tc.want {
			t.Errorf("capTraceState(%.40q…) = %.40q… (%d bytes), want %d bytes", tc.in, got, len(got), len(tc.want))
		}
	}
}
