//go:build !(linux || darwin)

package fdeep

import "sync/atomic"

// weightArena keeps weights on the Go heap where anonymous mappings are not
// available; release only marks the model, it cannot make reads fault.
type weightArena struct {
	mem      []float32
	released atomic.Bool
}

const weightsAreMapped = false

func newWeightArena(count int) (*weightArena, []float32, error) {
	mem := make([]float32, count)
	return &weightArena{mem: mem}, mem, nil
}

func (a *weightArena) seal() error { return nil }

func (a *weightArena) release() bool { return a.released.CompareAndSwap(false, true) }

func (a *weightArena) isReleased() bool { return a.released.Load() }
