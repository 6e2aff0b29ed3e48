//go:build race

package cache

// raceEnabled: the unlocked cache is racy by design, so tests that run it
// concurrently are skipped under the race detector.
const raceEnabled = true
