package stress

import (
	_ "embed"
	"fmt"
	"math"
	"strconv"
	"strings"
	"sync"

	"miotool/internal/conv"
	"miotool/internal/hip"
)

//go:embed stress_kernels.cu
var stressKernelText string

// stressKernelPTX is stress_kernels.cu compiled by NVRTC (tools/gen-ptx),
// for machines without a runtime compiler. Its first line names the
// source's hash.
//
//go:embed stress_kernels.ptx
var stressKernelPTX string

// DivKernel is the in-place division's entry point in stress_kernels.cu.
const DivKernel = "div_scalar_inplace_f32"

// divBlock is the block size the division kernel is written for.
const divBlock = 256

var stressSource = sync.OnceValue(func() *hip.KernelSource {
	return &hip.KernelSource{
		Name:    "miotool-stress",
		Text:    stressKernelText,
		Kernels: []string{DivKernel},
		Twins:   map[string]hip.GoKernel{DivKernel: divTwin},
		PTX:     hip.MatchingPTX("stress_kernels.cu", stressKernelText, stressKernelPTX),
	}
})

// Source is the stress scenario's own kernel source (the division).
// It returns the same pointer on every call.
func Source() *hip.KernelSource { return stressSource() }

// divLaunch is the launch that divides the n floats at y by divisor.
func divLaunch(y hip.DevPtr, n int, divisor float32) (grid, block hip.Dim3, args []hip.KernelArg) {
	return hip.D1(uint32((n + divBlock - 1) / divBlock)), hip.D1(divBlock), []hip.KernelArg{y, uint32(n), divisor}
}

func twinError(format string, a ...any) error {
	return &hip.Error{Op: "LaunchKernel", Code: hip.ErrInvalidValue, Detail: fmt.Sprintf(format, a...)}
}

// divTwin is the Go twin of div_scalar_inplace_f32: thread i divides
// element i when i < n.
func divTwin(mem hip.Memory, grid, block hip.Dim3, args []hip.KernelArg) error {
	if len(args) != 3 {
		return twinError("%s takes 3 arguments, got %d", DivKernel, len(args))
	}
	y, ok1 := args[0].(hip.DevPtr)
	n, ok2 := args[1].(uint32)
	d, ok3 := args[2].(float32)
	if !ok1 || !ok2 || !ok3 {
		return twinError("%s takes (hip.DevPtr, uint32, float32), got (%T, %T, %T)", DivKernel, args[0], args[1], args[2])
	}
	if block.Count() == 0 || block.Count() > divBlock {
		return twinError("%s: block %dx%dx%d must have 1 to %d threads", DivKernel, block.X, block.Y, block.Z, divBlock)
	}
	total := uint64(n)
	// Threads beyond x of the grid or block repeat the same indices.
	if threads := uint64(grid.X) * uint64(block.X); threads < total {
		total = threads
	}
	v, err := mem.Float32s(y, int(total))
	if err != nil {
		return fmt.Errorf("y: %w", err)
	}
	if inv, ok := exactReciprocal(d); ok {
		// Dividing by a power of two and multiplying by its reciprocal
		// give the same IEEE result for every value; the product is
		// about twice as fast on a CPU.
		for i := range v {
			v[i] *= inv
		}
		return nil
	}
	for i := range v {
		v[i] /= d
	}
	return nil
}

// exactReciprocal returns 1/d when d is a power of two whose reciprocal is
// a normal float32, so that x*(1/d) == x/d for every x.
func exactReciprocal(d float32) (float32, bool) {
	bits := math.Float32bits(d)
	exp := bits >> 23 & 0xff
	if bits&0x807fffff != 0 || exp == 0 || exp == 0xff {
		return 0, false // negative, not a power of two, subnormal, Inf or NaN
	}
	inv := 1 / d
	if ib := math.Float32bits(inv); ib>>23&0xff == 0 || ib>>23&0xff == 0xff {
		return 0, false
	}
	return inv, true
}

// stressConvSource is conv.Source with the simulator's twins of the naive
// and implicit-GEMM entry points given a fast path for the shape the stress
// scenario runs a thousand times per thread: one input channel per output
// channel, a 2x2 filter, stride 1, no padding, no dilation. The fast path
// computes every output element with the same fp32 products added in the
// same order as the generic twins (c, r, s increasing, from zero), so the
// results are identical bit for bit; it only skips the generic index
// arithmetic. Any other shape, or a grid that does not cover the output,
// goes to the generic twin. The kernel text is conv's own, so GPUs run the
// same kernels as find.
var stressConvSource = sync.OnceValue(func() *hip.KernelSource {
	base := conv.Source()
	src := &hip.KernelSource{
		Name:    base.Name,
		Text:    base.Text,
		Kernels: append([]string(nil), base.Kernels...),
		Twins:   make(map[string]hip.GoKernel, len(base.Twins)),
		PTX:     base.PTX,
	}
	for name, twin := range base.Twins {
		src.Twins[name] = twin
		if name == conv.NaiveKernel {
			src.Twins[name] = fastConv2x2(twin, coversNaive)
		} else if bm, bn, ok := igemmTile(name); ok {
			src.Twins[name] = fastConv2x2(twin, coversTiled(bm, bn))
		}
	}
	return src
})

// igemmTile reads BM and BN from an implicit-GEMM entry point's name,
// "igemm_fwd_nchw_f32_<BM>x<BN>".
func igemmTile(name string) (bm, bn int, ok bool) {
	rest, found := strings.CutPrefix(name, "igemm_fwd_nchw_f32_")
	if !found {
		return 0, 0, false
	}
	m, n, found := strings.Cut(rest, "x")
	if !found {
		return 0, 0, false
	}
	bm, err1 := strconv.Atoi(m)
	bn, err2 := strconv.Atoi(n)
	return bm, bn, err1 == nil && err2 == nil && bm > 0 && bn > 0
}

// convShape is the part of conv's kernel arguments the fast path needs.
type convShape struct {
	x, w, y                                                             hip.DevPtr
	n, c, h, wd, k, r, s, ho, wo, padH, padW, strH, strW, dilH, dilW, g int
}

// parseConvShape reads conv's 19 kernel arguments; ok is false for
// anything the generic twin should see (and refuse, if it is malformed).
func parseConvShape(args []hip.KernelArg) (a convShape, ok bool) {
	if len(args) != 19 {
		return a, false
	}
	for i, dst := range []*hip.DevPtr{&a.x, &a.w, &a.y} {
		v, isPtr := args[i].(hip.DevPtr)
		if !isPtr {
			return a, false
		}
		*dst = v
	}
	ints := []*int{&a.n, &a.c, &a.h, &a.wd, &a.k, &a.r, &a.s, &a.ho, &a.wo, &a.padH, &a.padW, &a.strH, &a.strW, &a.dilH, &a.dilW, &a.g}
	for i, dst := range ints {
		v, isInt := args[3+i].(int32)
		if !isInt || v < 0 {
			return a, false
		}
		*dst = int(v)
	}
	return a, true
}

// fast2x2 reports whether the shape is the one the fast path computes.
func (a convShape) fast2x2() bool {
	return a.g > 0 && a.c == a.g && a.k%a.g == 0 && a.n > 0 && a.k > 0 &&
		a.r == 2 && a.s == 2 && a.padH == 0 && a.padW == 0 &&
		a.strH == 1 && a.strW == 1 && a.dilH == 1 && a.dilW == 1 &&
		a.h >= 2 && a.wd >= 2 && a.ho == a.h-1 && a.wo == a.wd-1 &&
		int64(a.n)*int64(a.c)*int64(a.h)*int64(a.wd) < 1<<31 &&
		int64(a.n)*int64(a.k)*int64(a.ho)*int64(a.wo) < 1<<31
}

// coversNaive: the naive kernel computes every output element only when
// its grid has a thread for each, in blocks of at most 256.
func coversNaive(a convShape, grid, block hip.Dim3) bool {
	if block.Count() == 0 || block.Count() > 256 {
		return false
	}
	return uint64(grid.X)*uint64(block.X) >= uint64(a.n*a.k*a.ho*a.wo)
}

// coversTiled: a tiled kernel computes every output element only when its
// grid covers every pixel tile, row tile and group, with 256-thread blocks.
func coversTiled(bm, bn int) func(a convShape, grid, block hip.Dim3) bool {
	return func(a convShape, grid, block hip.Dim3) bool {
		if block != hip.D1(256) {
			return false
		}
		npix, mg := a.n*a.ho*a.wo, a.k/a.g
		return int(grid.X)*bn >= npix && int(grid.Y)*bm >= mg && int(grid.Z) >= a.g
	}
}

// fastConv2x2 wraps a generic twin with the 2x2 single-channel fast path.
func fastConv2x2(generic hip.GoKernel, covers func(convShape, hip.Dim3, hip.Dim3) bool) hip.GoKernel {
	return func(mem hip.Memory, grid, block hip.Dim3, args []hip.KernelArg) error {
		a, ok := parseConvShape(args)
		if !ok || !a.fast2x2() || !covers(a, grid, block) {
			return generic(mem, grid, block, args)
		}
		x, err := mem.Float32s(a.x, a.n*a.c*a.h*a.wd)
		if err != nil {
			return generic(mem, grid, block, args) // the generic twin reports it
		}
		w, err := mem.Float32s(a.w, a.k*4)
		if err != nil {
			return generic(mem, grid, block, args)
		}
		y, err := mem.Float32s(a.y, a.n*a.k*a.ho*a.wo)
		if err != nil {
			return generic(mem, grid, block, args)
		}
		conv2x2(x, w, y, a)
		return nil
	}
}

// conv2x2 computes y for the fast shape: each output channel k reads input
// channel k/(K/G) through its 2x2 filter.
func conv2x2(x, w, y []float32, a convShape) {
	kg := a.k / a.g
	plane, out := a.h*a.wd, a.ho*a.wo
	for n := 0; n < a.n; n++ {
		for k := 0; k < a.k; k++ {
			xs := x[(n*a.c+k/kg)*plane:][:plane]
			ys := y[(n*a.k+k)*out:][:out]
			w0, w1, w2, w3 := w[4*k], w[4*k+1], w[4*k+2], w[4*k+3]
			for oh := 0; oh < a.ho; oh++ {
				top := xs[oh*a.wd:][:a.wo+1]
				bot := xs[(oh+1)*a.wd:][:a.wo+1]
				row := ys[oh*a.wo:][:a.wo]
				for ow := range row {
					var acc float32
					acc += top[ow] * w0
					acc += top[ow+1] * w1
					acc += bot[ow] * w2
					acc += bot[ow+1] * w3
					row[ow] = acc
				}
			}
		}
	}
}
