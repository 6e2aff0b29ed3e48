package conv

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"miotool/internal/hip"
)

// twinProblems cover padding, stride, dilation, groups (depthwise too), N>1,
// and tiles with partial rows, columns and k-slices.
var twinProblems = []Problem{
	{N: 1, C: 3, H: 32, W: 32, K: 64, R: 3, S: 3, PadH: 1, PadW: 1, StrideH: 1, StrideW: 1, DilH: 1, DilW: 1, Groups: 1},
	{N: 2, C: 5, H: 9, W: 11, K: 7, R: 3, S: 2, PadH: 2, PadW: 1, StrideH: 2, StrideW: 3, DilH: 1, DilW: 2, Groups: 1},
	{N: 3, C: 8, H: 10, W: 10, K: 12, R: 3, S: 3, PadH: 1, PadW: 1, StrideH: 1, StrideW: 1, DilH: 2, DilW: 2, Groups: 4},
	{N: 2, C: 6, H: 12, W: 7, K: 6, R: 3, S: 3, PadH: 1, PadW: 1, StrideH: 1, StrideW: 2, DilH: 1, DilW: 1, Groups: 6}, // depthwise
	{N: 1, C: 4, H: 8, W: 8, K: 12, R: 5, S: 5, PadH: 2, PadW: 2, StrideH: 1, StrideW: 1, DilH: 1, DilW: 1, Groups: 4}, // depthwise x3
	{N: 2, C: 16, H: 9, W: 9, K: 130, R: 1, S: 1, StrideH: 1, StrideW: 1, DilH: 1, DilW: 1, Groups: 1},                 // 1x1, 2+ row tiles
	{N: 3, C: 20, H: 7, W: 6, K: 10, R: 1, S: 1, StrideH: 1, StrideW: 1, DilH: 1, DilW: 1, Groups: 2},                  // grouped 1x1
	{N: 1, C: 2, H: 5, W: 5, K: 3, R: 5, S: 5, StrideH: 1, StrideW: 1, DilH: 1, DilW: 1, Groups: 1},                    // 1x1 output
	{N: 1, C: 3, H: 4, W: 4, K: 2, R: 3, S: 3, PadH: 3, PadW: 3, StrideH: 1, StrideW: 1, DilH: 1, DilW: 1, Groups: 1},  // windows fully in the padding
	{N: 1, C: 1, H: 1, W: 1, K: 1, R: 1, S: 1, StrideH: 1, StrideW: 1, DilH: 1, DilW: 1, Groups: 1},
	{N: 1, C: 3, H: 15, W: 17, K: 2, R: 7, S: 7, PadH: 3, PadW: 3, StrideH: 2, StrideW: 2, DilH: 1, DilW: 1, Groups: 1},
	{N: 2, C: 40, H: 12, W: 12, K: 70, R: 3, S: 3, PadH: 1, PadW: 1, StrideH: 1, StrideW: 1, DilH: 1, DilW: 1, Groups: 1}, // 360 terms: two twin panels
}

// randomProblem draws a small valid problem.
func randomProblem(rng *rand.Rand) Problem {
	for {
		g := []int{1, 1, 1, 2, 3, 4}[rng.IntN(6)]
		p := Problem{
			N: 1 + rng.IntN(3), H: 1 + rng.IntN(12), W: 1 + rng.IntN(12),
			R: 1 + rng.IntN(4), S: 1 + rng.IntN(4), PadH: rng.IntN(3), PadW: rng.IntN(3),
			StrideH: 1 + rng.IntN(3), StrideW: 1 + rng.IntN(3), DilH: 1 + rng.IntN(2), DilW: 1 + rng.IntN(2),
			Groups: g, C: g * (1 + rng.IntN(5)), K: g * (1 + rng.IntN(6)),
		}
		if rng.IntN(5) == 0 { // depthwise
			p.C, p.K, p.Groups = 4, 4*(1+rng.IntN(2)), 4
		}
		if rng.IntN(5) == 0 { // pointwise
			p.R, p.S, p.PadH, p.PadW, p.StrideH, p.StrideW = 1, 1, 0, 0, 1, 1
		}
		if p.Validate() == nil {
			return p
		}
	}
}

// runPlan allocates x, w and a poisoned y, runs the launches' twins and
// returns y with the inputs.
func runPlan(t *testing.T, p Problem, plan func(Buffers) []Launch, seed uint64) (x, w, y []float32) {
	t.Helper()
	mem := newSliceMemory()
	x = RandomTensor(p.InputElements(), seed)
	w = RandomTensor(p.WeightElements(), seed+1)
	y = poisoned(p.OutputElements())
	b := Buffers{X: mem.add(x), W: mem.add(w), Y: mem.add(y)}
	launches := plan(b)
	if len(launches) == 0 {
		t.Fatalf("%v: empty plan", p)
	}
	if err := RunTwins(mem, launches); err != nil {
		t.Fatalf("%v: %v", p, err)
	}
	return x, w, y
}

// plans are every way to launch each kernel on p: each solver's own plan,
// and each tile shape of the tiled kernels.
func plans(p Problem) map[string]func(Buffers) []Launch {
	out := map[string]func(Buffers) []Launch{}
	for _, s := range Solvers() {
		if s.IsApplicable(p) {
			out[s.Name] = func(b Buffers) []Launch { return s.Plan(p, b) }
		}
	}
	pointwise, _ := SolverByName(SolverGemm1x1)
	for _, t := range tileShapes {
		if t.pointwise && !pointwise.IsApplicable(p) {
			continue
		}
		out[t.kernel()] = func(b Buffers) []Launch { return tiledPlan(p, b, t, 1) }
	}
	return out
}

func checkAllPlans(t *testing.T, p Problem, seed uint64) {
	t.Helper()
	for name, plan := range plans(p) {
		x, w, y := runPlan(t, p, plan, seed)
		if r := Check(p, y, Reference(p, x, w)); !r.OK {
			t.Errorf("%s on %v: %v", name, p, r)
		}
	}
}

func TestTwinsMatchReference(t *testing.T) {
	for i, p := range twinProblems {
		t.Run(fmt.Sprintf("%d", i), func(t *testing.T) {
			if err := p.Validate(); err != nil {
				t.Fatal(err)
			}
			checkAllPlans(t, p, uint64(100+i))
		})
	}
}

func TestTwinsMatchReferenceRandom(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 11))
	for i := range 50 {
		p := randomProblem(rng)
		checkAllPlans(t, p, uint64(1000+i))
	}
}

// A twin computes exactly what its launch covers: with a smaller grid the
// elements of the missing blocks stay untouched.
func TestTwinsHonourGrid(t *testing.T) {
	p := Problem{N: 2, C: 4, H: 20, W: 20, K: 80, R: 3, S: 3, PadH: 1, PadW: 1, StrideH: 1, StrideW: 1, DilH: 1, DilW: 1, Groups: 2}
	naive, _ := SolverByName(SolverNaive)
	_, _, y := runPlan(t, p, func(b Buffers) []Launch {
		l := naive.Plan(p, b)
		l[0].Grid.X = 3
		return l
	}, 5)
	for i, v := range y {
		if written := !math.IsNaN(float64(v)); written != (i < 3*blockThreads) {
			t.Fatalf("naive with 3 blocks: element %d written=%v", i, written)
		}
	}

	shape := tileShape{bm: 64, bn: 64}
	_, _, y = runPlan(t, p, func(b Buffers) []Launch {
		l := tiledPlan(p, b, shape, 1)
		l[0].Grid = hip.Dim3{X: 2, Y: 1, Z: 1} // pixels 0..127, channels 0..39 of group 0
		return l
	}, 5)
	howo := p.OutH() * p.OutW()
	for i, v := range y {
		n, k, q := i/(p.K*howo), i/howo%p.K, i%howo
		inside := k < 40 && n*howo+q < 128
		if written := !math.IsNaN(float64(v)); written != inside {
			t.Fatalf("tiled 2x1x1 grid: y(n=%d,k=%d,pixel=%d) written=%v, want %v", n, k, q, written, inside)
		}
	}
}

func TestTwinsRejectBadLaunches(t *testing.T) {
	p := twinProblems[1]
	mem := newSliceMemory()
	b := Buffers{
		X: mem.add(make([]float32, p.InputElements())),
		W: mem.add(make([]float32, p.WeightElements())),
		Y: mem.add(make([]float32, p.OutputElements())),
	}
	good := tiledPlan(p, b, tileShape{bm: 64, bn: 64}, 1)[0]
	withArgs := func(f func([]hip.KernelArg) []hip.KernelArg) Launch {
		l := good
		l.Args = f(append([]hip.KernelArg(nil), good.Args...))
		return l
	}
	cases := []struct {
		name string
		l    Launch
		code hip.Code
	}{
		{"too few args", withArgs(func(a []hip.KernelArg) []hip.KernelArg { return a[:10] }), hip.ErrInvalidValue},
		{"int instead of int32", withArgs(func(a []hip.KernelArg) []hip.KernelArg { a[5] = 3; return a }), hip.ErrInvalidValue},
		{"pointer as int", withArgs(func(a []hip.KernelArg) []hip.KernelArg { a[0] = int32(0); return a }), hip.ErrInvalidValue},
		{"zero groups", withArgs(func(a []hip.KernelArg) []hip.KernelArg { a[18] = int32(0); return a }), hip.ErrInvalidValue},
		{"groups not dividing C", withArgs(func(a []hip.KernelArg) []hip.KernelArg { a[18] = int32(2); return a }), hip.ErrInvalidValue},
		{"unmapped y", withArgs(func(a []hip.KernelArg) []hip.KernelArg { a[2] = hip.DevPtr(8); return a }), hip.ErrIllegalAddress},
		{"x too small for N", withArgs(func(a []hip.KernelArg) []hip.KernelArg { a[3] = int32(p.N + 1); return a }), hip.ErrIllegalAddress},
		{"wrong block", func() Launch { l := good; l.Block = hip.D1(128); return l }(), hip.ErrInvalidValue},
		{"unknown kernel", func() Launch { l := good; l.Kernel = "nope"; return l }(), hip.ErrInvalidValue},
		{"1x1 kernel on 3x2 filter", func() Launch { l := good; l.Kernel = tileShape{64, 64, true}.kernel(); return l }(), hip.ErrInvalidValue},
		{"naive with 512-thread blocks", func() Launch {
			l := naiveLaunch(p, b)
			l.Block = hip.D1(512)
			return l
		}(), hip.ErrInvalidValue},
	}
	for _, tc := range cases {
		err := RunTwins(mem, []Launch{tc.l})
		if err == nil {
			t.Errorf("%s: accepted", tc.name)
			continue
		}
		if hip.CodeOf(err) != tc.code {
			t.Errorf("%s: %v has code %d, want %d", tc.name, err, hip.CodeOf(err), tc.code)
		}
	}
}

func naiveLaunch(p Problem, b Buffers) Launch {
	s, _ := SolverByName(SolverNaive)
	return s.Plan(p, b)[0]
}
