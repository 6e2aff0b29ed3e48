package conv

import (
	"embed"
	"fmt"
	"strings"
	"sync"

	"miotool/internal/hip"
)

// kernelFiles are kernels.cu, its PTX and whatever cubins were compiled
// from it (kernels.sm_XY.cubin and their sidecars, scripts/gen-cubin.sh).
//
//go:embed kernels.*
var kernelFiles embed.FS

// kernelText is kernels.cu. The embedded files are read on first use, not
// at start: every command pays a package's initialization, and most never
// compile a kernel (a traced program waits for it).
var kernelText = sync.OnceValue(func() string { return mustRead(kernelFiles, "kernels.cu") })

// kernelPTX is kernels.cu compiled by NVRTC (tools/gen-ptx), for machines
// without a runtime compiler. Its first line names the source's hash.
var kernelPTX = sync.OnceValue(func() string { return mustRead(kernelFiles, "kernels.ptx") })

// kernelCubins are the cubins compiled from this kernels.cu, by arch.
var kernelCubins = sync.OnceValue(func() map[string][]byte {
	cubins, _ := hip.MatchingCubins(kernelFiles, "kernels.cu", kernelText())
	return cubins
})

// mustRead is an embedded file's text; the embed pattern guarantees it.
func mustRead(files embed.FS, name string) string {
	b, err := files.ReadFile(name)
	if err != nil {
		panic(err)
	}
	return string(b)
}

// PTXArch is the virtual architecture the committed PTX files are compiled for:
// the oldest NVRTC 13 accepts; the driver compiles it for the device.
const PTXArch = "compute_75"

// ptxFor returns the committed PTX when it was generated from text.
func ptxFor(text string) string { return hip.MatchingPTX("kernels.cu", text, kernelPTX()) }

// NaiveKernel is the naive direct kernel's entry point.
const NaiveKernel = "naive_conv_fwd_nchw_f32"

// DirectThinKernel is the direct kernel the tiled solver plans for thin
// problems (see thinProblem).
const DirectThinKernel = "direct_thin_fwd_nchw_f32"

// blockThreads is the block size every kernel in kernels.cu is written for.
const blockThreads = 256

// tileShape is one instantiation of the tiled GEMM kernel.
type tileShape struct {
	bm, bn    int
	pointwise bool // the 1x1 GEMM variant
}

// kernel is the entry point name of this instantiation in kernels.cu.
func (t tileShape) kernel() string {
	prefix := "igemm_fwd_nchw_f32"
	if t.pointwise {
		prefix = "gemm1x1_fwd_nchw_f32"
	}
	return fmt.Sprintf("%s_%dx%d", prefix, t.bm, t.bn)
}

// tileShapes are the instantiations in kernels.cu, largest tile first.
var tileShapes = func() []tileShape {
	var out []tileShape
	for _, pw := range []bool{false, true} {
		for _, mn := range [][2]int{{128, 128}, {64, 128}, {64, 64}} {
			out = append(out, tileShape{bm: mn[0], bn: mn[1], pointwise: pw})
		}
	}
	return out
}()

var source = sync.OnceValue(func() *hip.KernelSource {
	src := &hip.KernelSource{
		Name:    "miotool-conv-fwd",
		Text:    kernelText(),
		Kernels: []string{NaiveKernel, DirectThinKernel},
		Twins:   map[string]hip.GoKernel{NaiveKernel: naiveTwin, DirectThinKernel: directThinTwin},
		PTX:     ptxFor(kernelText()),
		Cubins:  kernelCubins(),
	}
	for _, t := range tileShapes {
		src.Kernels = append(src.Kernels, t.kernel())
		src.Twins[t.kernel()] = tiledTwin(t)
	}
	return src
})

// tiledSection starts the tiled kernels in kernels.cu; the direct kernels
// and the definitions they use come before it.
const tiledSection = "// ---------------------------------------------------------------------------\n// Tiled implicit GEMM."

var directSource = sync.OnceValue(func() *hip.KernelSource {
	text, _, found := strings.Cut(kernelText(), tiledSection)
	if !found {
		panic("conv: kernels.cu has no tiled section marker")
	}
	return &hip.KernelSource{
		Name:    "miotool-conv-direct",
		Text:    text,
		Kernels: []string{NaiveKernel, DirectThinKernel},
		Twins:   map[string]hip.GoKernel{NaiveKernel: naiveTwin, DirectThinKernel: directThinTwin},
		// The whole file's PTX and cubins have these entry points too.
		PTX:    ptxFor(kernelText()),
		Cubins: kernelCubins(),
	}
})

// DirectSource is the part of Source that holds the direct kernels (naive
// and direct thin), for callers whose problems need no other: a runtime
// compiler builds it in a fraction of the time the tiled kernels' template
// instantiations take, which a fresh process pays before its first launch.
// Where there is no compiler it loads Source's precompiled PTX. It returns
// the same pointer on every call.
func DirectSource() *hip.KernelSource { return directSource() }

// Source is the one kernel source of this package with a Go twin for every
// entry point. It returns the same pointer on every call, so backends can
// cache the compiled module per source.
//
// The twins write y through the slice that hip.Memory.Float32s returns, so a
// Memory must hand out views of device memory, not copies. Arguments must be
// hip.DevPtr for x, w, y, int32 for the sizes and float32 for alpha, as the
// GPU backends take them; a twin refuses anything else with ErrInvalidValue, and passes on the
// Memory's error for an address outside any allocation.
func Source() *hip.KernelSource { return source() }

// RunTwins runs the Go twins of launches in order against mem, as the
// simulated device would; it is for tests and tools that hold a hip.Memory.
func RunTwins(mem hip.Memory, launches []Launch) error {
	src := Source()
	for _, l := range launches {
		twin, ok := src.Twins[l.Kernel]
		if !ok {
			return launchError("kernel %q is not in %s", l.Kernel, src.Name)
		}
		if err := twin(mem, l.Grid, l.Block, l.Args); err != nil {
			return err
		}
	}
	return nil
}

// launchError is a twin's refusal of a launch, with the code a GPU runtime
// gives a malformed launch.
func launchError(format string, a ...any) error {
	return &hip.Error{Op: "LaunchKernel", Code: hip.ErrInvalidValue, Detail: fmt.Sprintf(format, a...)}
}

// convArgs are the parameters every entry point takes, in kernel order.
type convArgs struct {
	x, w, y                                                             hip.DevPtr
	n, c, h, wd, k, r, s, ho, wo, padH, padW, strH, strW, dilH, dilW, g int
	alpha                                                               float32
}

// NumConvArgs is the parameter count of every entry point: x, w, y, the 16
// sizes and alpha.
const NumConvArgs = 20

func problemArgs(p Problem, b Buffers, alpha float32) []hip.KernelArg {
	return []hip.KernelArg{b.X, b.W, b.Y,
		int32(p.N), int32(p.C), int32(p.H), int32(p.W), int32(p.K), int32(p.R), int32(p.S),
		int32(p.OutH()), int32(p.OutW()), int32(p.PadH), int32(p.PadW),
		int32(p.StrideH), int32(p.StrideW), int32(p.DilH), int32(p.DilW), int32(p.Groups), alpha}
}

// parseConvArgs reads the kernel parameters the way the backends pass them:
// three DevPtrs, int32s, then the float32 alpha. It refuses shapes for which the GPU kernel's
// arithmetic would be undefined (non-positive sizes, groups that do not
// divide the channels, tensors past the int32 range).
func parseConvArgs(kernel string, args []hip.KernelArg) (convArgs, error) {
	var a convArgs
	if len(args) != NumConvArgs {
		return a, launchError("%s takes %d arguments, got %d", kernel, NumConvArgs, len(args))
	}
	ptrs := []*hip.DevPtr{&a.x, &a.w, &a.y}
	for i, dst := range ptrs {
		v, ok := args[i].(hip.DevPtr)
		if !ok {
			return a, launchError("%s argument %d must be a hip.DevPtr, got %T", kernel, i, args[i])
		}
		*dst = v
	}
	ints := []*int{&a.n, &a.c, &a.h, &a.wd, &a.k, &a.r, &a.s, &a.ho, &a.wo,
		&a.padH, &a.padW, &a.strH, &a.strW, &a.dilH, &a.dilW, &a.g}
	names := []string{"N", "C", "H", "W", "K", "R", "S", "Ho", "Wo",
		"pad_h", "pad_w", "stride_h", "stride_w", "dil_h", "dil_w", "G"}
	for i, dst := range ints {
		v, ok := args[3+i].(int32)
		if !ok {
			return a, launchError("%s argument %d (%s) must be an int32, got %T", kernel, 3+i, names[i], args[3+i])
		}
		lowest := int32(1)
		if names[i] == "pad_h" || names[i] == "pad_w" {
			lowest = 0
		}
		if v < lowest {
			return a, launchError("%s argument %s = %d must be >= %d", kernel, names[i], v, lowest)
		}
		*dst = int(v)
	}
	alpha, ok := args[NumConvArgs-1].(float32)
	if !ok {
		return a, launchError("%s argument %d (alpha) must be a float32, got %T", kernel, NumConvArgs-1, args[NumConvArgs-1])
	}
	a.alpha = alpha
	if a.c%a.g != 0 || a.k%a.g != 0 {
		return a, launchError("%s: G = %d must divide C = %d and K = %d", kernel, a.g, a.c, a.k)
	}
	for _, t := range []struct {
		name string
		dims []int
	}{{"x", []int{a.n, a.c, a.h, a.wd}}, {"w", []int{a.k, a.c / a.g, a.r, a.s}}, {"y", []int{a.n, a.k, a.ho, a.wo}}} {
		if n, ok := product(t.dims); !ok || n > maxElements {
			return a, launchError("%s: tensor %s has more than %d elements", kernel, t.name, maxElements)
		}
	}
	return a, nil
}

// tensors fetches x, w and y from device memory with the sizes the
// arguments imply.
func (a *convArgs) tensors(mem hip.Memory) (x, w, y []float32, err error) {
	if x, err = mem.Float32s(a.x, a.n*a.c*a.h*a.wd); err != nil {
		return nil, nil, nil, fmt.Errorf("input x: %w", err)
	}
	if w, err = mem.Float32s(a.w, a.k*(a.c/a.g)*a.r*a.s); err != nil {
		return nil, nil, nil, fmt.Errorf("weights w: %w", err)
	}
	if y, err = mem.Float32s(a.y, a.n*a.k*a.ho*a.wo); err != nil {
		return nil, nil, nil, fmt.Errorf("output y: %w", err)
	}
	return x, w, y, nil
}
