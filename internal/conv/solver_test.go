package conv

import (
	"regexp"
	"strings"
	"testing"

	"miotool/internal/hip"
)

func TestSolversList(t *testing.T) {
	list := Solvers()
	if len(list) != 3 {
		t.Fatalf("%d solvers", len(list))
	}
	last := list[len(list)-1]
	if last.Name != "ConvDirectNaiveConvFwd" || !last.IsNaive() || last.Algorithm != "miopenConvolutionFwdAlgoDirect" {
		t.Errorf("last solver %+v, want the naive direct solver", last)
	}
	wantAlgo := map[string]string{
		SolverImplicitGemm: "miopenConvolutionFwdAlgoImplicitGEMM",
		SolverGemm1x1:      "miopenConvolutionFwdAlgoGEMM",
		SolverNaive:        "miopenConvolutionFwdAlgoDirect",
	}
	for _, s := range list {
		if s.Algorithm != wantAlgo[s.Name] {
			t.Errorf("%s: algorithm %q, want %q", s.Name, s.Algorithm, wantAlgo[s.Name])
		}
		if s.IsNaive() != (s.Name == SolverNaive) {
			t.Errorf("%s: IsNaive = %v", s.Name, s.IsNaive())
		}
		got, ok := SolverByName(s.Name)
		if !ok || got != s {
			t.Errorf("SolverByName(%q) = %v, %v", s.Name, got, ok)
		}
		if s.Workspace(base()) != 0 {
			t.Errorf("%s needs workspace", s.Name)
		}
	}
	if _, ok := SolverByName("GemmFwdRest"); ok {
		t.Error("found a solver that does not exist")
	}
	list[0] = nil
	if Solvers()[0] == nil {
		t.Error("Solvers exposes its internal slice")
	}
}

func TestApplicability(t *testing.T) {
	pointwise := Problem{N: 2, C: 64, H: 28, W: 28, K: 128, R: 1, S: 1, StrideH: 1, StrideW: 1, DilH: 1, DilW: 1, Groups: 1}
	strided1x1 := pointwise
	strided1x1.StrideH, strided1x1.StrideW = 2, 2
	manyGroups := Problem{N: 1, C: 70000, H: 2, W: 2, K: 70000, R: 1, S: 1, StrideH: 1, StrideW: 1, DilH: 1, DilW: 1, Groups: 70000}
	invalid := base()
	invalid.StrideW = 0
	cases := []struct {
		name string
		p    Problem
		want map[string]bool
	}{
		{"3x3", base(), map[string]bool{SolverImplicitGemm: true, SolverGemm1x1: false, SolverNaive: true}},
		{"1x1", pointwise, map[string]bool{SolverImplicitGemm: true, SolverGemm1x1: true, SolverNaive: true}},
		{"strided 1x1", strided1x1, map[string]bool{SolverImplicitGemm: true, SolverGemm1x1: false, SolverNaive: true}},
		{"groups past the grid limit", manyGroups, map[string]bool{SolverImplicitGemm: false, SolverGemm1x1: false, SolverNaive: true}},
		{"invalid", invalid, map[string]bool{SolverImplicitGemm: false, SolverGemm1x1: false, SolverNaive: false}},
	}
	for _, tc := range cases {
		for _, s := range Solvers() {
			got := s.IsApplicable(tc.p)
			if got != tc.want[s.Name] {
				t.Errorf("%s: %s.IsApplicable = %v (%v)", tc.name, s.Name, got, s.NotApplicable(tc.p))
			}
			plan := s.Plan(tc.p, Buffers{X: 1, W: 2, Y: 3})
			if got != (plan != nil) {
				t.Errorf("%s: %s.Plan gave %d launches while applicable = %v", tc.name, s.Name, len(plan), got)
			}
			if err := s.NotApplicable(tc.p); err != nil && (strings.Contains(err.Error(), "\n") || !got && err.Error() == "") {
				t.Errorf("%s: %s reason %q", tc.name, s.Name, err)
			}
		}
	}
	gemm, _ := SolverByName(SolverGemm1x1)
	if err := gemm.NotApplicable(base()); err == nil || !strings.Contains(err.Error(), "1x1 filter") {
		t.Errorf("reason for a 3x3 problem: %v", err)
	}
}

func TestPlans(t *testing.T) {
	b := Buffers{X: 0x1000, W: 0x2000, Y: 0x3000}
	p := Problem{N: 2, C: 8, H: 9, W: 7, K: 12, R: 3, S: 3, PadH: 1, PadW: 0, StrideH: 2, StrideW: 1, DilH: 1, DilW: 2, Groups: 4}
	wantArgs := []hip.KernelArg{b.X, b.W, b.Y, int32(2), int32(8), int32(9), int32(7), int32(12), int32(3), int32(3),
		int32(p.OutH()), int32(p.OutW()), int32(1), int32(0), int32(2), int32(1), int32(1), int32(2), int32(4), float32(1)}
	for _, s := range Solvers() {
		plan := s.Plan(p, b)
		if !s.IsApplicable(p) {
			continue
		}
		if len(plan) != 1 {
			t.Fatalf("%s: %d launches", s.Name, len(plan))
		}
		l := plan[0]
		if l.Block != hip.D1(256) || l.SharedMem != 0 || len(l.Args) != len(wantArgs) {
			t.Errorf("%s: launch %+v", s.Name, l)
		}
		for i := range wantArgs {
			if l.Args[i] != wantArgs[i] {
				t.Errorf("%s: arg %d = %#v, want %#v", s.Name, i, l.Args[i], wantArgs[i])
			}
		}
		if _, ok := Source().Twins[l.Kernel]; !ok {
			t.Errorf("%s: kernel %q has no twin", s.Name, l.Kernel)
		}
	}
	naive, _ := SolverByName(SolverNaive)
	if g := naive.Plan(p, b)[0].Grid; g != hip.D1(uint32(ceilDiv(p.OutputElements(), 256))) {
		t.Errorf("naive grid %+v", g)
	}
	igemm, _ := SolverByName(SolverImplicitGemm)
	// 3 output channels per group: thin, so the direct thin kernel.
	if l := igemm.Plan(p, b)[0]; l.Kernel != DirectThinKernel || l.Grid != (hip.Dim3{X: 1, Y: uint32(p.OutH()), Z: 2 * 12}) {
		t.Errorf("implicit GEMM on a thin problem: kernel %s, grid %+v", l.Kernel, l.Grid)
	}
	wide := p
	wide.K = 32 // 8 per group
	if l := igemm.Plan(wide, b)[0]; l.Kernel == DirectThinKernel || l.Grid != (hip.Dim3{X: uint32(ceilDiv(2*p.OutH()*p.OutW(), 64)), Y: 1, Z: 4}) {
		t.Errorf("implicit GEMM grid %+v (%s)", l.Grid, l.Kernel)
	}
	// alpha is the last argument, as given.
	if l := naive.PlanScaled(p, b, 0.25)[0]; l.Args[NumConvArgs-1] != float32(0.25) {
		t.Errorf("scaled plan's alpha %#v", l.Args[NumConvArgs-1])
	}
}

func TestChooseTile(t *testing.T) {
	mk := func(n, c, hw, k, r int) Problem {
		return Problem{N: n, C: c, H: hw, W: hw, K: k, R: r, S: r, PadH: r / 2, PadW: r / 2,
			StrideH: 1, StrideW: 1, DilH: 1, DilW: 1, Groups: 1}
	}
	cases := []struct {
		p         Problem
		pointwise bool
		bm, bn    int
	}{
		{mk(1, 3, 32, 64, 3), false, 64, 64},      // one wave at most: the smallest tile
		{mk(32, 64, 56, 64, 3), false, 64, 128},   // 64 channels never take 128-row tiles
		{mk(32, 512, 7, 512, 3), false, 64, 64},   // few pixels: 64x64 still fits one wave
		{mk(32, 512, 28, 512, 1), true, 128, 128}, // large on both sides
		{mk(32, 512, 28, 512, 1), false, 128, 128},
	}
	for _, tc := range cases {
		if got := chooseTile(tc.p, tc.pointwise); got.bm != tc.bm || got.bn != tc.bn || got.pointwise != tc.pointwise {
			t.Errorf("%v: tile %+v, want %dx%d", tc.p, got, tc.bm, tc.bn)
		}
	}
}

func TestSource(t *testing.T) {
	src := Source()
	if src != Source() {
		t.Fatal("Source returns a new pointer per call")
	}
	if len(src.Kernels) != 2+len(tileShapes) || len(src.Twins) != len(src.Kernels) {
		t.Fatalf("%d kernels, %d twins", len(src.Kernels), len(src.Twins))
	}
	entry := regexp.MustCompile(`(?m)^MIO_IGEMM_ENTRY\((\w+),`)
	declared := map[string]bool{}
	for _, m := range entry.FindAllStringSubmatch(src.Text, -1) {
		declared[m[1]] = true
	}
	for _, k := range []string{NaiveKernel, DirectThinKernel} {
		if strings.Contains(src.Text, `extern "C" __global__ void __launch_bounds__(256)`+"\n"+k+"(") {
			declared[k] = true
		}
	}
	for _, k := range src.Kernels {
		if src.Twins[k] == nil {
			t.Errorf("kernel %s has no twin", k)
		}
		if !declared[k] {
			t.Errorf("kernel %s is not an entry point of the source text", k)
		}
	}
	if len(declared) != len(src.Kernels) {
		t.Errorf("source declares %d entry points, the list has %d", len(declared), len(src.Kernels))
	}
	// Both runtime compilers start without standard headers; keep the text to
	// what NVRTC and hiprtc accept unchanged.
	for _, banned := range []string{"#include", "printf", "assert", "std::", "__shfl", "warpSize", "float4", "__forceinline__", "size_t"} {
		if strings.Contains(src.Text, banned) {
			t.Errorf("kernel source uses %q", banned)
		}
	}
}
