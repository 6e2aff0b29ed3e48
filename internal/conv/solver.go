package conv

import (
	"fmt"
	"math"
	"strings"

	"miotool/internal/hip"
)

// MIOpen's directional forward algorithm names.
const (
	AlgoDirect       = "miopenConvolutionFwdAlgoDirect"
	AlgoGEMM         = "miopenConvolutionFwdAlgoGEMM"
	AlgoImplicitGEMM = "miopenConvolutionFwdAlgoImplicitGEMM"
)

// Solver names (MIOpen-style DbIds). Only the naive one is MIOpen's own.
const (
	SolverNaive        = "ConvDirectNaiveConvFwd"
	SolverImplicitGemm = "ConvImplicitGemmTiledFwd"
	SolverGemm1x1      = "GemmFwd1x1Tiled"
)

// Buffers are the device addresses a plan's launches use.
type Buffers struct {
	X, W, Y   hip.DevPtr
	Workspace hip.DevPtr // 0 when the solver needs none
}

// Launch is one kernel launch of a plan; Args are in the kernel's parameter
// order and of the types the backends accept (hip.DevPtr, int32).
type Launch struct {
	Kernel    string
	Grid      hip.Dim3
	Block     hip.Dim3
	SharedMem uint32 // dynamic shared memory in bytes
	Args      []hip.KernelArg
}

// Solver is one way to compute a forward convolution with the kernels of
// Source().
type Solver struct {
	Name      string // MIOpen-style DbId, as written in find-db records
	Algorithm string // MIOpen's directional algorithm name
	// notApplicable says why the solver cannot run p (nil: it can); p is valid.
	notApplicable func(p Problem) error
	plan          func(p Problem, b Buffers, alpha float32) []Launch
}

// IsNaive reports whether find must treat the solver as naive (MIOpen's rule:
// the name contains "Naive").
func (s *Solver) IsNaive() bool { return strings.Contains(s.Name, "Naive") }

// IsApplicable reports whether the solver can run p.
func (s *Solver) IsApplicable(p Problem) bool { return s.NotApplicable(p) == nil }

// NotApplicable says in one line why the solver cannot run p, or returns nil.
func (s *Solver) NotApplicable(p Problem) error {
	if err := p.Validate(); err != nil {
		return err
	}
	if err := s.notApplicable(p); err != nil {
		return fmt.Errorf("%s is not applicable: %w", s.Name, err)
	}
	return nil
}

// Workspace is the scratch memory the solver needs for p, in bytes. None of
// these solvers needs any.
func (s *Solver) Workspace(p Problem) int { return 0 }

// Plan lists the launches that compute y = conv(x, w) for p into b.Y, in
// order on one stream. It returns nil when the solver is not applicable.
func (s *Solver) Plan(p Problem, b Buffers) []Launch { return s.PlanScaled(p, b, 1) }

// PlanScaled is Plan for y = alpha * conv(x, w): every kernel multiplies
// each output by alpha once, after its sum, so alpha 1 computes exactly
// what Plan does, and 1/d for a power of two d exactly what a division of
// the output by d would give.
func (s *Solver) PlanScaled(p Problem, b Buffers, alpha float32) []Launch {
	if !s.IsApplicable(p) {
		return nil
	}
	return s.plan(p, b, alpha)
}

func (s *Solver) String() string { return s.Name }

// maxGridYZ is the CUDA/HIP limit on grid dimensions y and z.
const maxGridYZ = 65535

var solvers = []*Solver{
	{
		Name:      SolverImplicitGemm,
		Algorithm: AlgoImplicitGEMM,
		notApplicable: func(p Problem) error {
			if thinProblem(p) {
				return nil
			}
			return tiledLimits(p, chooseTile(p, false))
		},
		plan: func(p Problem, b Buffers, alpha float32) []Launch {
			if thinProblem(p) {
				return thinPlan(p, b, alpha)
			}
			return tiledPlan(p, b, chooseTile(p, false), alpha)
		},
	},
	{
		Name:      SolverGemm1x1,
		Algorithm: AlgoGEMM,
		notApplicable: func(p Problem) error {
			if p.R != 1 || p.S != 1 || p.StrideH != 1 || p.StrideW != 1 || p.PadH != 0 || p.PadW != 0 {
				return fmt.Errorf("needs a 1x1 filter with stride 1 and no padding, got %dx%d stride %dx%d pad %dx%d",
					p.R, p.S, p.StrideH, p.StrideW, p.PadH, p.PadW)
			}
			return tiledLimits(p, chooseTile(p, true))
		},
		plan: func(p Problem, b Buffers, alpha float32) []Launch { return tiledPlan(p, b, chooseTile(p, true), alpha) },
	},
	{
		Name:          SolverNaive,
		Algorithm:     AlgoDirect,
		notApplicable: func(Problem) error { return nil },
		plan: func(p Problem, b Buffers, alpha float32) []Launch {
			blocks := ceilDiv(p.OutputElements(), blockThreads)
			return []Launch{{Kernel: NaiveKernel, Grid: hip.D1(uint32(blocks)), Block: hip.D1(blockThreads), Args: problemArgs(p, b, alpha)}}
		},
	},
}

// Solvers lists every solver, the naive one last.
func Solvers() []*Solver { return append([]*Solver(nil), solvers...) }

// SolverByName finds a solver by its DbId.
func SolverByName(name string) (*Solver, bool) {
	for _, s := range solvers {
		if s.Name == name {
			return s, true
		}
	}
	return nil, false
}

// busyBlocks is how many 256-thread blocks run at once on the GPU the tile
// choice is tuned for (two per multiprocessor on a 132-SM H200).
const busyBlocks = 264

// tileEfficiency is the relative fp32 throughput of a tile shape on a full
// GPU, measured on an H200: bigger register tiles do more arithmetic per
// shared-memory read.
func tileEfficiency(t tileShape) float64 {
	switch t.bm * t.bn {
	case 128 * 128:
		return 1.0
	case 64 * 128:
		return 0.9
	}
	return 0.8
}

// chooseTile picks the tile shape with the least estimated time: blocks run
// in waves of busyBlocks, so a launch costs (waves * tile area) / efficiency.
// That favours big tiles on big problems and small ones when big tiles would
// leave most of the GPU idle or add a mostly empty last wave.
func chooseTile(p Problem, pointwise bool) tileShape {
	mg := p.K / p.Groups
	npix := p.N * p.OutH() * p.OutW()
	var best tileShape
	bestCost := math.Inf(1)
	for _, t := range tileShapes {
		if t.pointwise != pointwise {
			continue
		}
		blocks := ceilDiv(mg, t.bm) * ceilDiv(npix, t.bn) * p.Groups
		cost := float64(ceilDiv(blocks, busyBlocks)*t.bm*t.bn) / tileEfficiency(t)
		if cost < bestCost {
			best, bestCost = t, cost
		}
	}
	return best
}

// tiledLimits checks the grid limits and the 32-bit index headroom of the
// tiled kernel for p.
func tiledLimits(p Problem, t tileShape) error {
	mg := p.K / p.Groups
	npix := p.N * p.OutH() * p.OutW()
	switch {
	case ceilDiv(mg, t.bm) > maxGridYZ:
		return fmt.Errorf("%d output channels per group need %d row tiles, more than the grid limit %d", mg, ceilDiv(mg, t.bm), maxGridYZ)
	case p.Groups > maxGridYZ:
		return fmt.Errorf("group_count %d is more than the grid limit %d", p.Groups, maxGridYZ)
	case npix > math.MaxInt32-t.bn:
		return fmt.Errorf("%d output pixels leave no 32-bit index headroom for %d-wide tiles", npix, t.bn)
	case int64(p.K+t.bm)*int64(p.C/p.Groups*p.R*p.S)+64 > math.MaxInt32:
		// The kernel forms weight offsets for the rows of a partial last tile too.
		return fmt.Errorf("%d weights leave no 32-bit index headroom for %d-row tiles", p.WeightElements(), t.bm)
	}
	return nil
}

func tiledPlan(p Problem, b Buffers, t tileShape, alpha float32) []Launch {
	mg := p.K / p.Groups
	npix := p.N * p.OutH() * p.OutW()
	grid := hip.Dim3{X: uint32(ceilDiv(npix, t.bn)), Y: uint32(ceilDiv(mg, t.bm)), Z: uint32(p.Groups)}
	return []Launch{{Kernel: t.kernel(), Grid: grid, Block: hip.D1(blockThreads), Args: problemArgs(p, b, alpha)}}
}

// Thin problems: at most thinRows output channels per group and thinDepth
// terms per output. The smallest tile has 64 rows, so a thin problem would
// leave at least 15/16 of every tile's rows and arithmetic idle (a 1-channel
// 2x2 convolution ran at ~1/36 of an H200's memory bandwidth that way); the
// tiled solver gives such problems to the direct thin kernel instead.
const (
	thinRows  = 4
	thinDepth = 64
)

// thinProblem reports whether the tiled solver plans p with the direct thin
// kernel: p is thin and its grid (ceil(Wo/256), Ho, N*K) is within limits.
func thinProblem(p Problem) bool {
	return p.K/p.Groups <= thinRows && p.C/p.Groups*p.R*p.S <= thinDepth &&
		p.OutH() <= maxGridYZ && p.N*p.K <= maxGridYZ
}

// thinPlan is the direct thin kernel's launch for p.
func thinPlan(p Problem, b Buffers, alpha float32) []Launch {
	grid := hip.Dim3{X: uint32(ceilDiv(p.OutW(), blockThreads)), Y: uint32(p.OutH()), Z: uint32(p.N * p.K)}
	return []Launch{{Kernel: DirectThinKernel, Grid: grid, Block: hip.D1(blockThreads), Args: problemArgs(p, b, alpha)}}
}
