package stress

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"miotool/internal/aiheur/builtin"
	"miotool/internal/aiheur/cache"
	"miotool/internal/conv"
	"miotool/internal/hip"
	"miotool/internal/hip/sim"
)

// fusionRig is a simulated device with the scenario's sources loaded and
// a stream that a held kernel blocks, so that the launches queued behind it
// are there together when it lets go (and a Fusion is offered them).
type fusionRig struct {
	dev             *sim.Device
	s               hip.Stream
	guard, thin     hip.Function
	naive, hold     hip.Function
	release         chan struct{}
	bufs            [2]hip.DevPtr
	weights         [2]hip.DevPtr
	side, bufFloats int
	launches        int
}

// newFusionRig makes the rig; overlap puts the second buffer inside the
// first, half an image in.
func newFusionRig(t *testing.T, side int, fuse, overlap bool) *fusionRig {
	t.Helper()
	d, err := sim.New(hip.OpenOptions{Dialect: hip.DialectCUDA})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = d.Close() })
	d.FuseLaunches(fuse)
	r := &fusionRig{dev: d, side: side, bufFloats: side*side + 1, release: make(chan struct{})}
	t.Cleanup(func() {
		select {
		case <-r.release:
		default:
			close(r.release)
		}
	})
	fn := func(src *hip.KernelSource, name string) hip.Function {
		m, err := d.ModuleLoad(src)
		if err != nil {
			t.Fatal(err)
		}
		f, err := d.ModuleGetFunction(m, name)
		if err != nil {
			t.Fatal(err)
		}
		return f
	}
	r.guard = fn(Source(), GuardKernel)
	r.thin = fn(stressConvSource(), conv.DirectThinKernel)
	r.naive = fn(stressConvSource(), conv.NaiveKernel)
	r.hold = fn(&hip.KernelSource{Name: "hold", Kernels: []string{"hold"}, Twins: map[string]hip.GoKernel{
		"hold": func(hip.Memory, hip.Dim3, hip.Dim3, []hip.KernelArg) error {
			select {
			case <-r.release:
				return nil
			case <-time.After(30 * time.Second):
				return fmt.Errorf("the test never released the held stream")
			}
		}}}, "hold")
	if r.s, err = d.StreamCreate(hip.StreamNonBlocking); err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(uint64(side), 7))
	for i := range r.bufs {
		r.bufs[i] = r.alloc(t, r.bufFloats, func() float32 {
			// Mostly ones, with values of every kind among them, so that
			// an element computed from the wrong inputs shows.
			switch rng.IntN(8) {
			case 0:
				return float32(rng.NormFloat64())
			case 1:
				return []float32{0, float32(math.Inf(1)), float32(math.NaN()), poison, -1e-40}[rng.IntN(5)]
			}
			return 1
		})
		r.weights[i] = r.alloc(t, 4, func() float32 { return float32(rng.NormFloat64()) })
	}
	if overlap {
		whole := r.alloc(t, 2*r.bufFloats, func() float32 { return 1 })
		r.bufs = [2]hip.DevPtr{whole, whole + hip.DevPtr(4*(side*side/2))}
	}
	if err := d.LaunchKernel(r.hold, hip.D1(1), hip.D1(1), 0, r.s); err != nil {
		t.Fatal(err)
	}
	return r
}

func (r *fusionRig) alloc(t *testing.T, n int, value func() float32) hip.DevPtr {
	t.Helper()
	p, err := r.dev.Malloc(4 * n)
	if err != nil {
		t.Fatal(err)
	}
	v := make([]float32, n)
	for i := range v {
		v[i] = value()
	}
	if err := r.dev.MemcpyHtoD(p, conv.Float32Bytes(v)); err != nil {
		t.Fatal(err)
	}
	return p
}

func (r *fusionRig) launch(t *testing.T, f hip.Function, grid, block hip.Dim3, args ...hip.KernelArg) {
	t.Helper()
	if err := r.dev.LaunchKernel(f, grid, block, 0, r.s, args...); err != nil {
		t.Fatal(err)
	}
	r.launches++
}

// convArgs are conv's kernel arguments for iteration i of the rig's chain.
func (r *fusionRig) convArgs(p conv.Problem, x, w, y hip.DevPtr, alpha float32) []hip.KernelArg {
	s, _ := conv.SolverByName(conv.SolverNaive)
	return s.PlanScaled(p, conv.Buffers{X: x, W: w, Y: y}, alpha)[0].Args
}

// finish lets the stream go, waits for it and returns both buffers' bytes.
func (r *fusionRig) finish(t *testing.T) [2][]byte {
	t.Helper()
	close(r.release)
	if err := r.dev.StreamSynchronize(r.s); err != nil {
		t.Fatal(err)
	}
	var out [2][]byte
	for i, p := range r.bufs {
		out[i] = make([]byte, 4*r.bufFloats)
		if err := r.dev.MemcpyDtoH(out[i], p); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// A chain of iterations run fused leaves every byte of both buffers as the
// same launches run one by one do: the scenario's own sequence, chains
// that begin with a convolution or end with a guard, short guards, longer
// chains than one fused run takes, and launches that must break a chain
// (a convolution that covers part of its output, one that writes a third
// buffer) among them.
func TestFusedIterationsLeaveWhatLaunchesOneByOneLeave(t *testing.T) {
	type step struct {
		guard      bool
		guardBlock uint32 // 0: the scenario's guard launch
		kernel     string // conv.DirectThinKernel or conv.NaiveKernel
		shortGrid  bool   // the direct thin kernel, one output row short
		otherY     bool   // writes into a third buffer
		sameSide   bool   // convolves the previous output as if it had not shrunk
		guardMore  int    // the guard's n is this much more than the output
	}
	scenario := func(n int, kernel string) []step {
		out := make([]step, n)
		for i := range out {
			out[i] = step{guard: true, kernel: kernel}
		}
		return out
	}
	for _, tt := range []struct {
		name    string
		side    int
		steps   []step
		fused   bool // some launches must run fused
		overlap bool // the two buffers overlap
	}{
		{"the scenario, direct thin", 37, scenario(12, conv.DirectThinKernel), true, false},
		{"the scenario, naive", 29, scenario(9, conv.NaiveKernel), true, false},
		{"more iterations than one fused run", 80, scenario(70, conv.DirectThinKernel), true, false},
		{"odd and even chains, solvers mixed", 23, []step{
			{kernel: conv.DirectThinKernel}, {guard: true, kernel: conv.NaiveKernel}, {kernel: conv.DirectThinKernel},
			{guard: true, guardBlock: 2, kernel: conv.DirectThinKernel}, {guard: true, guardBlock: 3, kernel: conv.NaiveKernel},
			{guard: true, kernel: conv.DirectThinKernel}, {guard: true}}, true, false},
		{"a short grid breaks the chain", 31, []step{
			{guard: true, kernel: conv.DirectThinKernel}, {guard: true, kernel: conv.DirectThinKernel},
			{guard: true, kernel: conv.DirectThinKernel, shortGrid: true},
			{guard: true, kernel: conv.DirectThinKernel}, {guard: true, kernel: conv.DirectThinKernel}}, true, false},
		{"a convolution that does not shrink breaks the chain", 21, []step{
			{guard: true, kernel: conv.DirectThinKernel}, {guard: true, kernel: conv.DirectThinKernel, sameSide: true},
			{guard: true, kernel: conv.DirectThinKernel}}, false, false},
		{"a third buffer breaks the chain", 19, []step{
			{guard: true, kernel: conv.DirectThinKernel}, {guard: true, kernel: conv.DirectThinKernel, otherY: true},
			{guard: true, kernel: conv.DirectThinKernel}}, false, false},
		{"a guard of another length breaks the chain", 25, []step{
			{guard: true, kernel: conv.DirectThinKernel}, {guard: true, kernel: conv.DirectThinKernel, guardMore: 7},
			{guard: true, kernel: conv.DirectThinKernel}, {guard: true, kernel: conv.DirectThinKernel}}, true, false},
		{"buffers that overlap are not fused", 27, scenario(6, conv.DirectThinKernel), false, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var results [2][2][]byte
			for i, fuse := range []bool{false, true} {
				r := newFusionRig(t, tt.side, fuse, tt.overlap)
				third := r.alloc(t, r.bufFloats, func() float32 { return 0 })
				cur, next := r.bufs[0], r.bufs[1]
				side := tt.side + 1
				for j, st := range tt.steps {
					if !st.sameSide {
						side--
					}
					p := conv.Problem{N: 1, C: 1, H: side, W: side, K: 1, R: 2, S: 2, StrideH: 1, StrideW: 1, DilH: 1, DilW: 1, Groups: 1}
					y := next
					if st.otherY {
						y = third
					}
					if st.guard {
						grid, block, args := guardLaunch(y, p.OutputElements()+st.guardMore, poison)
						if st.guardBlock != 0 {
							block = hip.D1(st.guardBlock)
						}
						r.launch(t, r.guard, grid, block, args...)
					}
					if st.kernel == "" {
						break
					}
					args := r.convArgs(p, cur, r.weights[j%2], y, []float32{0.25, 1, -0.5}[j%3])
					switch st.kernel {
					case conv.NaiveKernel:
						r.launch(t, r.naive, hip.D1(uint32((p.OutputElements()+255)/256)), hip.D1(256), args...)
					default:
						grid := hip.Dim3{X: uint32((p.OutW() + 255) / 256), Y: uint32(p.OutH()), Z: 1}
						if st.shortGrid {
							grid.Y--
						}
						r.launch(t, r.thin, grid, hip.D1(256), args...)
					}
					cur, next = next, cur
				}
				results[i] = r.finish(t)
				switch fused := r.dev.FusedLaunches(); {
				case fuse && tt.fused && fused == 0:
					t.Error("no launch ran fused: the test checks nothing")
				case (!fuse || tt.overlap) && fused != 0:
					t.Errorf("%d launches ran fused (fusion %t, buffers overlap %t)", fused, fuse, tt.overlap)
				}
			}
			for b := range results[0] {
				if !bytes.Equal(results[0][b], results[1][b]) {
					t.Errorf("buffer %d differs between the launches one by one and fused, first at float %d", b, firstDiff(results[0][b], results[1][b])/4)
				}
			}
		})
	}
}

func firstDiff(a, b []byte) int {
	for i := range a {
		if a[i] != b[i] {
			return i
		}
	}
	return -1
}

// A whole run on the simulator fuses its iterations and gets the exact sum
// in every thread and trial, the same result as with fusion off.
func TestAFusedRunGetsTheSameResult(t *testing.T) {
	var sums [2][][]float64
	for i, fuse := range []bool{false, true} {
		d, err := sim.New(hip.OpenOptions{Dialect: hip.DialectCUDA})
		if err != nil {
			t.Fatal(err)
		}
		d.FuseLaunches(fuse)
		run, err := RunHere(context.Background(), d, Options{Threads: 2, Iters: 45, Trials: 2, Size: 64,
			Policy: cache.Locked, Models: builtin.FS})
		fused := d.FusedLaunches()
		_ = d.Close()
		if err != nil {
			t.Fatal(err)
		}
		if !run.OK() {
			t.Fatalf("fusion %t: wrong result: %s", fuse, run.WrongDetail)
		}
		if fuse && fused == 0 {
			t.Log("no launch ran fused (the host never got ahead of the device); the sums are still checked")
		}
		sums[i] = run.Sums
	}
	if fmt.Sprint(sums[0]) != fmt.Sprint(sums[1]) {
		t.Fatalf("sums %v unfused, %v fused", sums[0], sums[1])
	}
}
