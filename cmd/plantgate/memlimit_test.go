package main

import (
	"strings"
	"testing"
)

// TestMemoryLimit: a gateway process runs with a soft memory limit of
// --memory-limit-mib (default none), which bounds its heap (and the
// plugins' linear memory in it) under load; GOMEMLIMIT, when set, wins,
// and 0 turns the limit off. Read from the process's own /metrics.
func TestMemoryLimit(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		env  []string
		args []string
		want string
	}{
		{"default: none", nil, nil, "go_gc_gomemlimit_bytes 9.223372036854776e+18"},
		{"flag", nil, []string{"--memory-limit-mib", "200"}, "go_gc_gomemlimit_bytes 2.097152e+08"},
		{"GOMEMLIMIT wins", []string{"GOMEMLIMIT=150MiB"}, []string{"--memory-limit-mib", "200"}, "go_gc_gomemlimit_bytes 1.572864e+08"},
		{"off", nil, []string{"--memory-limit-mib", "0"}, "go_gc_gomemlimit_bytes 9.223372036854776e+18"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			admin := "127.0.0.1:" + freePort(t)
			startGateway(t, append([]string{"GOMEMLIMIT="}, tc.env...),
				append([]string{"--insecure-no-auth", "--admin-listen", admin}, tc.args...)...)
			status, body, _ := get(t, "http://"+admin+"/metrics")
			if status != 200 {
				t.Fatalf("/metrics: %d", status)
			}
			for line := range strings.SplitSeq(body, "\n") {
				if strings.HasPrefix(line, "go_gc_gomemlimit_bytes ") {
					if line != tc.want {
						t.Fatalf("%s, want %s", line, tc.want)
					}
					return
				}
			}
			t.Fatalf("/metrics has no go_gc_gomemlimit_bytes:\n%s", body)
		})
	}
}
