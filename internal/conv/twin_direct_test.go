package conv

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"miotool/internal/hip"
)

// thinProblems are thin (the tiled solver plans the direct thin kernel),
// with and without the 2x2 fast path's shape.
var thinProblems = []Problem{
	{N: 1, C: 1, H: 37, W: 41, K: 1, R: 2, S: 2, StrideH: 1, StrideW: 1, DilH: 1, DilW: 1, Groups: 1},                 // the stress shape
	{N: 2, C: 3, H: 9, W: 7, K: 6, R: 2, S: 2, StrideH: 1, StrideW: 1, DilH: 1, DilW: 1, Groups: 3},                   // 2x2, depthwise x2
	{N: 1, C: 1, H: 3, W: 300, K: 2, R: 2, S: 2, StrideH: 1, StrideW: 1, DilH: 1, DilW: 1, Groups: 1},                 // rows wider than a block
	{N: 1, C: 2, H: 9, W: 9, K: 1, R: 2, S: 2, StrideH: 1, StrideW: 1, DilH: 1, DilW: 1, Groups: 1},                   // two channels: generic
	{N: 2, C: 4, H: 8, W: 9, K: 4, R: 3, S: 3, PadH: 1, PadW: 1, StrideH: 2, StrideW: 1, DilH: 1, DilW: 2, Groups: 4}, // padded depthwise
	{N: 1, C: 1, H: 9, W: 9, K: 1, R: 2, S: 2, PadH: 1, PadW: 1, StrideH: 1, StrideW: 1, DilH: 1, DilW: 1, Groups: 1}, // 2x2 padded: generic
}

func TestThinProblemsTakeTheDirectKernel(t *testing.T) {
	igemm, _ := SolverByName(SolverImplicitGemm)
	for _, p := range thinProblems {
		if err := p.Validate(); err != nil {
			t.Fatal(err)
		}
		if l := igemm.Plan(p, Buffers{}); len(l) != 1 || l[0].Kernel != DirectThinKernel {
			t.Errorf("%v: plan %+v, want the direct thin kernel", p, l)
		}
		checkAllPlans(t, p, 3)
	}
	for _, p := range []Problem{twinProblems[0], twinProblems[11]} {
		if thinProblem(p) {
			t.Errorf("%v is not thin", p)
		}
	}
}

// The direct thin twin computes the naive twin's sums bit for bit (same
// terms, same order), scaled by alpha, on the fast path and off it.
func TestDirectThinTwinMatchesNaiveBitForBit(t *testing.T) {
	naive, _ := SolverByName(SolverNaive)
	for i, p := range thinProblems {
		for _, alpha := range []float32{1, 0.25, -3} {
			x := RandomTensor(p.InputElements(), uint64(i))
			x[0], x[1], x[2] = float32(math.Copysign(0, -1)), 1e-40, float32(math.NaN())
			w := RandomTensor(p.WeightElements(), uint64(i+50))
			want := runWith(t, p, x, w, naive.PlanScaled(p, Buffers{}, alpha))
			got := runWith(t, p, x, w, thinPlan(p, Buffers{}, alpha))
			for j := range want {
				if !sameBits(got[j], want[j]) {
					t.Fatalf("%v alpha %v: element %d is %v (%#x), naive %v (%#x)", p, alpha, j, got[j], math.Float32bits(got[j]), want[j], math.Float32bits(want[j]))
				}
			}
		}
	}
}

// sameBits reports whether a and b are the same float32 bit for bit, any
// NaN matching any NaN: which of two NaN operands an add or multiply passes
// on is the compiler's choice of operand order in Go and unspecified on
// GPUs, so no twin promises a NaN's payload.
func sameBits(a, b float32) bool {
	return math.Float32bits(a) == math.Float32bits(b) || (a != a && b != b)
}

// runWith runs launches (planned for zero Buffers) on copies of x and w and
// a poisoned y.
func runWith(t *testing.T, p Problem, x, w []float32, launches []Launch) []float32 {
	t.Helper()
	mem := newSliceMemory()
	b := Buffers{X: mem.add(append([]float32(nil), x...)), W: mem.add(append([]float32(nil), w...)), Y: mem.add(poisoned(p.OutputElements()))}
	for i := range launches {
		args := append([]hip.KernelArg(nil), launches[i].Args...)
		args[0], args[1], args[2] = b.X, b.W, b.Y
		launches[i].Args = args
	}
	if err := RunTwins(mem, launches); err != nil {
		t.Fatal(err)
	}
	y, _ := mem.Float32s(b.Y, p.OutputElements())
	return y
}

// The vector row is the scalar row, bit for bit, at every length and
// alignment, with special values among the inputs and weights, at every
// vector width this CPU has.
func TestConv2x2RowVectorMatchesScalar(t *testing.T) {
	for _, w := range vectorWidths() {
		t.Run(w.name, func(t *testing.T) {
			defer w.use()()
			checkConv2x2RowMatchesScalar(t)
		})
	}
}

func checkConv2x2RowMatchesScalar(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	special := []float32{0, float32(math.Copysign(0, -1)), 1e-40, -1e-45, 3.4e38, float32(math.Inf(1)), float32(math.Inf(-1)), float32(math.NaN()), 1}
	value := func() float32 {
		if rng.IntN(4) == 0 {
			return special[rng.IntN(len(special))]
		}
		return float32(rng.NormFloat64())
	}
	for n := 0; n < 100; n++ {
		for off := 0; off < 3; off++ {
			top, bot := make([]float32, n+1+off), make([]float32, n+1+off)
			for i := range top {
				top[i], bot[i] = value(), value()
			}
			coef := [5]float32{value(), value(), value(), value(), []float32{1, 0.25, -2, 1e-30}[rng.IntN(4)]}
			if n%5 == 0 {
				coef = [5]float32{1, 1, 1, 1, 0.25}
			}
			want, got := make([]float32, n), make([]float32, n)
			conv2x2RowGo(top[off:], bot[off:], want, &coef)
			conv2x2Row(top[off:], bot[off:], got, &coef)
			for i := range want {
				if !sameBits(got[i], want[i]) {
					t.Fatalf("n %d offset %d coef %v: element %d is %#x, scalar %#x", n, off, coef, i, math.Float32bits(got[i]), math.Float32bits(want[i]))
				}
			}
		}
	}
}

// Negative zeros stay as the scalar sum leaves them: 0 + (-0) is +0.
func TestConv2x2RowNegativeZero(t *testing.T) {
	nz := float32(math.Copysign(0, -1))
	top, bot := make([]float32, 17), make([]float32, 17)
	for i := range top {
		top[i], bot[i] = nz, nz
	}
	out := make([]float32, 16)
	conv2x2Row(top, bot, out, &[5]float32{1, 1, 1, 1, 1})
	for i, v := range out {
		if math.Float32bits(v) != 0 {
			t.Fatalf("element %d: %#x, want +0", i, math.Float32bits(v))
		}
	}
}

// A short grid leaves the outputs of the missing blocks untouched, in each
// of the three grid dimensions.
func TestDirectThinTwinHonoursGrid(t *testing.T) {
	for _, p := range []Problem{thinProblems[2], thinProblems[4]} {
		ho, wo, nk := p.OutH(), p.OutW(), p.N*p.K
		full := thinPlan(p, Buffers{}, 1)[0].Grid
		for _, grid := range []hip.Dim3{{X: 1, Y: full.Y, Z: full.Z}, {X: full.X, Y: 2, Z: full.Z}, {X: full.X, Y: full.Y, Z: 1}} {
			_, _, y := runPlan(t, p, func(b Buffers) []Launch {
				l := thinPlan(p, b, 1)
				l[0].Grid = grid
				return l
			}, 9)
			for i, v := range y {
				ow, oh, plane := i%wo, i/wo%ho, i/(wo*ho)
				inside := ow < int(grid.X)*blockThreads && oh < int(grid.Y) && plane < min(nk, int(grid.Z))
				if written := !math.IsNaN(float64(v)); written != inside {
					t.Fatalf("%v grid %+v: output (plane %d, %d, %d) written=%v, want %v", p, grid, plane, oh, ow, written, inside)
				}
			}
		}
	}
}

func TestDirectThinTwinRejectsBadLaunches(t *testing.T) {
	p := thinProblems[0]
	mem := newSliceMemory()
	b := Buffers{X: mem.add(make([]float32, p.InputElements())), W: mem.add(make([]float32, 4)), Y: mem.add(make([]float32, p.OutputElements()))}
	good := thinPlan(p, b, 1)[0]
	for name, l := range map[string]Launch{
		"alpha as float64": func() Launch {
			l := good
			l.Args = append(append([]hip.KernelArg(nil), good.Args[:NumConvArgs-1]...), 0.25)
			return l
		}(),
		"no alpha":    func() Launch { l := good; l.Args = good.Args[:NumConvArgs-1]; return l }(),
		"512 threads": func() Launch { l := good; l.Block = hip.D1(512); return l }(),
		"y too small": func() Launch {
			l := good
			l.Args = append([]hip.KernelArg(nil), good.Args...)
			l.Args[2] = mem.add(make([]float32, 3))
			return l
		}(),
	} {
		if err := RunTwins(mem, []Launch{l}); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

func BenchmarkDirectThinTwin2x2(b *testing.B) {
	for _, side := range []int{2048, 1048} {
		b.Run(fmt.Sprint(side), func(b *testing.B) {
			p := Problem{N: 1, C: 1, H: side, W: side, K: 1, R: 2, S: 2, StrideH: 1, StrideW: 1, DilH: 1, DilW: 1, Groups: 1}
			benchPlan(b, p, func(bufs Buffers) []Launch { return thinPlan(p, bufs, 0.25) })
		})
	}
}

// DirectSource is kernels.cu up to the tiled kernels: both direct entry
// points with their twins, nothing of the tiled kernels, and the whole
// file's PTX (which has the direct entry points too) when it is current.
func TestDirectSource(t *testing.T) {
	d, full := DirectSource(), Source()
	if d != DirectSource() {
		t.Fatal("DirectSource returns a new pointer per call")
	}
	if !strings.HasPrefix(full.Text, d.Text) || len(d.Text) >= len(full.Text) {
		t.Fatal("the direct text is not a proper prefix of kernels.cu")
	}
	for _, k := range []string{NaiveKernel, DirectThinKernel} {
		if !strings.Contains(d.Text, "\n"+k+"(MIO_CONV_PARAMS)") || d.Twins[k] == nil {
			t.Errorf("the direct source lacks %s or its twin", k)
		}
	}
	if len(d.Kernels) != 2 || len(d.Twins) != 2 || strings.Contains(d.Text, "igemm_fwd_tile") || strings.Contains(d.Text, "MIO_IGEMM_ENTRY") {
		t.Errorf("the direct source holds more than the direct kernels: %v", d.Kernels)
	}
	if d.PTX != full.PTX {
		t.Error("the direct source does not carry kernels.cu's PTX")
	}
}
