package finder

import (
	"fmt"
	"math/rand/v2"
	"sync"

	"miotool/internal/conv"
	"miotool/internal/hip"
)

// Tensors are a problem's device buffers and their host copies. The caller
// frees them (Free waits for the device, so it belongs after the work that
// must not wait, such as the scenario that follows a find).
type Tensors struct {
	Problem        conv.Problem
	X, W, Y        hip.DevPtr
	Workspace      hip.DevPtr
	WorkspaceBytes int

	dev   hip.Device
	hostX []float32
	hostW []float32

	refOnce sync.Once
	ref     []float32
	sample  []int // flat output indices checked; nil: every element
}

// sampledAbove is the work (in flops) above which outputs are checked on a
// random sample of elements instead of all: the CPU reference of a larger
// problem would take longer than the scenario it checks.
var sampledAbove = 2e10

// sampleSize is how many output elements a sampled check compares.
const sampleSize = 1 << 16

// NewTensors allocates x, w, y and the largest workspace any solver needs,
// and uploads seeded random x and w. A problem whose tensors exceed the
// device's memory is refused first (ErrTooLarge), with nothing allocated.
func NewTensors(dev hip.Device, p conv.Problem, solvers []*conv.Solver, seed uint64) (*Tensors, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	if solvers == nil {
		solvers = conv.Solvers()
	}
	// Refuse what cannot fit before the host tensors are made: for a
	// problem of gigabytes that alone takes minutes.
	// (Without the naive timeout, Need counts no naive scratch: only
	// what is allocated here.)
	need, err := Need(p, Options{Solvers: solvers})
	if err != nil {
		return nil, err
	}
	if err := need.Fits(dev.Props().TotalMemory); err != nil {
		return nil, err
	}
	ts := &Tensors{Problem: p, dev: dev}
	ts.hostX = conv.RandomTensor(p.InputElements(), seed)
	ts.hostW = conv.RandomTensor(p.WeightElements(), seed+1)
	ts.WorkspaceBytes = int(need.Workspace)
	alloc := func(n int, what string) hip.DevPtr {
		if err != nil {
			return 0
		}
		var ptr hip.DevPtr
		if ptr, err = dev.Malloc(n); err != nil {
			err = fmt.Errorf("allocate %s (%d bytes): %w", what, n, err)
		}
		return ptr
	}
	ts.X = alloc(4*p.InputElements(), "x")
	ts.W = alloc(4*p.WeightElements(), "w")
	ts.Y = alloc(ts.OutputBytes(), "y")
	if ts.WorkspaceBytes > 0 {
		ts.Workspace = alloc(ts.WorkspaceBytes, "workspace")
	}
	if err == nil {
		err = dev.MemcpyHtoD(ts.X, conv.Float32Bytes(ts.hostX))
	}
	if err == nil {
		err = dev.MemcpyHtoD(ts.W, conv.Float32Bytes(ts.hostW))
	}
	if err != nil {
		_ = ts.Free()
		return nil, err
	}
	return ts, nil
}

// OutputBytes is the size of y.
func (ts *Tensors) OutputBytes() int { return 4 * ts.Problem.OutputElements() }

// Output copies y to the host.
func (ts *Tensors) Output() ([]float32, error) {
	return ts.Read(ts.Y)
}

// Read copies an output-sized buffer to the host.
func (ts *Tensors) Read(p hip.DevPtr) ([]float32, error) {
	buf := make([]byte, ts.OutputBytes())
	if err := ts.dev.MemcpyDtoH(buf, p); err != nil {
		return nil, err
	}
	return conv.BytesFloat32(buf)
}

// ClearOutput zeroes y so a later check cannot pass on stale data.
func (ts *Tensors) ClearOutput() error { return ts.dev.Memset(ts.Y, 0, ts.OutputBytes()) }

// reference computes the CPU result once: every element, or a seeded
// random sample of them (plus the first and last) for large problems.
func (ts *Tensors) reference() {
	ts.refOnce.Do(func() {
		p := ts.Problem
		n := p.OutputElements()
		if float64(p.Flops()) <= sampledAbove || n <= sampleSize {
			ts.ref = conv.Reference(p, ts.hostX, ts.hostW)
			return
		}
		rng := rand.New(rand.NewPCG(uint64(n), 7))
		ts.sample = make([]int, sampleSize)
		ts.sample[0], ts.sample[1] = 0, n-1
		for i := 2; i < sampleSize; i++ {
			ts.sample[i] = rng.IntN(n)
		}
		ts.ref = conv.ReferenceAt(p, ts.hostX, ts.hostW, ts.sample)
	})
}

// Check compares an output read back from the device with the CPU
// reference (on a sample of elements for problems above sampledAbove flops).
func (ts *Tensors) Check(got []float32) conv.CheckResult {
	ts.reference()
	if ts.sample == nil {
		return conv.Check(ts.Problem, got, ts.ref)
	}
	picked := make([]float32, len(ts.sample))
	for i, f := range ts.sample {
		if f < len(got) {
			picked[i] = got[f]
		}
	}
	return conv.CheckSampled(ts.Problem, picked, ts.ref, ts.sample)
}

// Free releases the device buffers.
func (ts *Tensors) Free() error {
	var first error
	for _, p := range []*hip.DevPtr{&ts.X, &ts.W, &ts.Y, &ts.Workspace} {
		if *p != 0 {
			if err := ts.dev.Free(*p); err != nil && first == nil {
				first = err
			}
			*p = 0
		}
	}
	return first
}
