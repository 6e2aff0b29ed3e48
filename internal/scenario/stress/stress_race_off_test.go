//go:build !race

package stress

const stressRaceEnabled = false
