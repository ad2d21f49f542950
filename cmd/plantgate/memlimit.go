package main

import (
	"errors"
	"math"
	"os"
	"runtime/debug"
)

// defaultMemoryLimitMiB is serve's soft memory limit unless GOMEMLIMIT is
// set: none. A limit keeps RSS down only while the live heap stays below it;
// the heap holds every plugin instance's linear memory, so one plugin more
// can put it above any fixed default, and from there the collector runs
// back to back (capped by the runtime at about half the CPU). Measured on a
// 2-vCPU VM: bearer-auth + plant-rules + rate-limit with ~95 MiB in use
// served 12.7k creates/s at an 80 MiB limit and 24.0k with none (the GC
// ~40% of the CPU profile at 80 MiB); the two-plugin chain 24.1k at 80 MiB
// (124 MiB peak RSS) and 25.7k with none (150 MiB). Operators who want the
// smaller RSS set --memory-limit-mib to about 1.5x the in-use heap their
// chain shows (go_memstats_heap_inuse_bytes under load).
const defaultMemoryLimitMiB = 0

// applyMemoryLimit sets the process's soft memory limit to mib MiB (0: no
// limit) unless the operator set GOMEMLIMIT, which the runtime has applied.
func applyMemoryLimit(mib int64) error {
	if os.Getenv("GOMEMLIMIT") != "" {
		return nil
	}
	switch {
	case mib < 0:
		return errors.New("--memory-limit-mib must be 0 (no limit) or more")
	case mib == 0:
		debug.SetMemoryLimit(math.MaxInt64)
	default:
		debug.SetMemoryLimit(mib << 20)
	}
	return nil
}
