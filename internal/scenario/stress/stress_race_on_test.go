//go:build race

package stress

// stressRaceEnabled: the unlocked cache is racy by design, so tests that
// run it from several threads are skipped under the race detector.
const stressRaceEnabled = true
