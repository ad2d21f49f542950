//go:build race

package http

// raceEnabled: the race detector makes sync.Pool drop items at random, so
// allocation counts that rely on a pool do not hold under it.
const raceEnabled = true
