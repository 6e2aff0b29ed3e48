package stress

import (
	"embed"
	"fmt"
	"slices"
	"sync"

	"miotool/internal/conv"
	"miotool/internal/hip"
)

// stressKernelFiles are stress_kernels.cu, its PTX and whatever cubins were
// compiled from it (stress_kernels.sm_XY.cubin and their sidecars,
// scripts/gen-cubin.sh). The pattern leaves out this Go file.
//
//go:embed stress_kernels.[cps]*
var stressKernelFiles embed.FS

var stressKernelText = mustRead("stress_kernels.cu")

// stressKernelPTX is stress_kernels.cu compiled by NVRTC (tools/gen-ptx),
// for machines without a runtime compiler. Its first line names the
// source's hash.
var stressKernelPTX = mustRead("stress_kernels.ptx")

// mustRead is an embedded file's text; the embed pattern guarantees it.
func mustRead(name string) string {
	b, err := stressKernelFiles.ReadFile(name)
	if err != nil {
		panic(err)
	}
	return string(b)
}

// The entry points of stress_kernels.cu.
const (
	FillKernel  = "fill_f32"
	GuardKernel = "guard_f32"
)

// stressBlock is the block size stress_kernels.cu is written for.
const stressBlock = 256

var stressSource = sync.OnceValue(func() *hip.KernelSource {
	return &hip.KernelSource{
		Name:    "miotool-stress",
		Text:    stressKernelText,
		Kernels: []string{FillKernel, GuardKernel},
		Twins:   map[string]hip.GoKernel{FillKernel: fillTwin, GuardKernel: guardTwin},
		PTX:     hip.MatchingPTX("stress_kernels.cu", stressKernelText, stressKernelPTX),
		Cubins:  stressKernelCubins,
	}
})

// stressKernelCubins are the cubins compiled from this stress_kernels.cu.
var stressKernelCubins, _ = hip.MatchingCubins(stressKernelFiles, "stress_kernels.cu", stressKernelText)

// Source is the stress scenario's own kernel source (fill and guard).
// It returns the same pointer on every call.
func Source() *hip.KernelSource { return stressSource() }

// fillBlocks bounds the fill's grid: each thread strides over the rest.
const fillBlocks = 1024

// fillLaunch is the launch that sets the n floats at y to value.
func fillLaunch(y hip.DevPtr, n int, value float32) (grid, block hip.Dim3, args []hip.KernelArg) {
	blocks := min(fillBlocks, max(1, (n+stressBlock-1)/stressBlock))
	return hip.D1(uint32(blocks)), hip.D1(stressBlock), []hip.KernelArg{y, uint32(n), value}
}

// guardLaunch is the launch that sets the guard elements of an n-element
// output at y (first, middle, last, and the one after) to value.
func guardLaunch(y hip.DevPtr, n int, value float32) (grid, block hip.Dim3, args []hip.KernelArg) {
	return hip.D1(1), hip.D1(32), []hip.KernelArg{y, uint32(n), value}
}

func twinError(format string, a ...any) error {
	return &hip.Error{Op: "LaunchKernel", Code: hip.ErrInvalidValue, Detail: fmt.Sprintf(format, a...)}
}

// fillArgs reads (y, n, value) as both kernels take them.
func fillArgs(kernel string, block hip.Dim3, args []hip.KernelArg) (y hip.DevPtr, n uint32, value float32, err error) {
	if len(args) != 3 {
		return 0, 0, 0, twinError("%s takes 3 arguments, got %d", kernel, len(args))
	}
	y, ok1 := args[0].(hip.DevPtr)
	n, ok2 := args[1].(uint32)
	value, ok3 := args[2].(float32)
	if !ok1 || !ok2 || !ok3 {
		return 0, 0, 0, twinError("%s takes (hip.DevPtr, uint32, float32), got (%T, %T, %T)", kernel, args[0], args[1], args[2])
	}
	if block.Count() == 0 || block.Count() > stressBlock {
		return 0, 0, 0, twinError("%s: block %dx%dx%d must have 1 to %d threads", kernel, block.X, block.Y, block.Z, stressBlock)
	}
	return y, n, value, nil
}

// fillTwin is the Go twin of fill_f32: any non-empty grid strides over all
// n elements.
func fillTwin(mem hip.Memory, grid, block hip.Dim3, args []hip.KernelArg) error {
	y, n, value, err := fillArgs(FillKernel, block, args)
	if err != nil || grid.X == 0 || n == 0 {
		return err
	}
	v, err := mem.Float32s(y, int(n))
	if err != nil {
		return fmt.Errorf("y: %w", err)
	}
	for i := range v {
		v[i] = value
	}
	return nil
}

// guardTwin is the Go twin of guard_f32: threads 0..3 of block 0 in x set
// elements 0, n/2, n-1 and n.
func guardTwin(mem hip.Memory, grid, block hip.Dim3, args []hip.KernelArg) error {
	y, n, value, err := fillArgs(GuardKernel, block, args)
	if err != nil || grid.X == 0 || n == 0 {
		return err
	}
	v, err := mem.Float32s(y, int(n)+1)
	if err != nil {
		return fmt.Errorf("y: %w", err)
	}
	for _, at := range []uint32{0, n / 2, n - 1, n}[:min(4, block.X)] {
		v[at] = value
	}
	return nil
}

// stressConvSource is conv.DirectSource, the direct kernels only: every
// launch a solver plans for the stress problems (one channel, 2x2) is the
// naive or the direct thin kernel, and a runtime compiler builds these in a
// fraction of the time the whole of conv's source takes, which every fresh
// process pays (launchSource falls back to conv.Source for any other
// kernel). On the simulator the naive twin gets a fast path for this shape
// when the MIOpen model picks the naive solver: the launch is computed by
// the twin of the direct thin kernel, which adds the same fp32 products in
// the same order (conv's tests hold the two to the same bits) and
// vectorizes the shape. Any other shape, or a grid that does not cover the
// output, goes to the naive twin. The kernel text is conv's own, so GPUs
// run the same kernels as find.
var stressConvSource = sync.OnceValue(func() *hip.KernelSource {
	base := conv.DirectSource()
	src := &hip.KernelSource{
		Name:    base.Name,
		Text:    base.Text,
		Kernels: append([]string(nil), base.Kernels...),
		Twins:   make(map[string]hip.GoKernel, len(base.Twins)),
		PTX:     base.PTX,
		Cubins:  base.Cubins,
	}
	for name, twin := range base.Twins {
		src.Twins[name] = twin
	}
	src.Twins[conv.NaiveKernel] = fastNaive2x2(base.Twins[conv.NaiveKernel], base.Twins[conv.DirectThinKernel])
	return src
})

// launchSource is src when it has the kernel, else conv's whole source.
func launchSource(src *hip.KernelSource, kernel string) *hip.KernelSource {
	if slices.Contains(src.Kernels, kernel) {
		return src
	}
	return conv.Source()
}

// convShape is the part of conv's kernel arguments the fast path needs.
type convShape struct {
	n, c, h, wd, k, r, s, ho, wo, padH, padW, strH, strW, dilH, dilW, g int
}

// parseConvShape reads the sizes among conv's kernel arguments; ok is false
// for anything the generic twin should see (and refuse, if it is
// malformed).
func parseConvShape(args []hip.KernelArg) (a convShape, ok bool) {
	if len(args) != conv.NumConvArgs {
		return a, false
	}
	for i := range 3 {
		if _, isPtr := args[i].(hip.DevPtr); !isPtr {
			return a, false
		}
	}
	if _, isFloat := args[conv.NumConvArgs-1].(float32); !isFloat {
		return a, false
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

// fastNaive2x2 wraps the naive twin: a covering launch of the fast shape
// runs as the direct thin kernel's launch over the whole output.
func fastNaive2x2(naive, direct hip.GoKernel) hip.GoKernel {
	return func(mem hip.Memory, grid, block hip.Dim3, args []hip.KernelArg) error {
		a, ok := parseConvShape(args)
		if !ok || !a.fast2x2() || !coversNaive(a, grid, block) {
			return naive(mem, grid, block, args)
		}
		whole := hip.Dim3{X: uint32((a.wo + stressBlock - 1) / stressBlock), Y: uint32(a.ho), Z: uint32(a.n * a.k)}
		return direct(mem, whole, hip.D1(stressBlock), args)
	}
}
