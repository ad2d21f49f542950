package main

import (
	"errors"
	"math"
	"os"
	"runtime/debug"
)

// defaultMemoryLimitMiB is serve's soft memory limit unless GOMEMLIMIT is
// set. Without one the heap grows to twice the live data between
// collections (GOGC=100), and a loaded gateway's peak RSS went to 150–170
// MiB for ~20 MiB of plugin memory and a few MiB of live heap; at 80 MiB the
// collector runs before that (issue 4: ~120 MiB RSS). The limit is soft: a
// live heap above it is still served, with the collector's CPU capped by
// the runtime at about half the process.
const defaultMemoryLimitMiB = 80

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
