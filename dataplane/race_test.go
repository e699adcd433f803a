//go:build race

package dataplane

// raceEnabled: the race detector makes sync.Pool drop values at random, so
// allocation counts are not meaningful under it.
const raceEnabled = true
