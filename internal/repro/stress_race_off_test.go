//go:build !race

package repro

const stressRaceEnabled = false
