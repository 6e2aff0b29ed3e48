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
		Fusion:  stressFusion,
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
		Fusion:  stressFusion,
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

// The simulated run's iterations, fused.
//
// A thread's iterations are a chain on its stream: guard(next), then
// conv(cur -> next) of a side x side image into (side-1) x (side-1), the
// two buffers swapping roles each time. Run one launch at a time, every
// iteration streams both 16 MB buffers through the host's memory once, and
// that traffic, not the arithmetic, is most of a simulated run's CPU time
// (a machine with half the memory bandwidth takes about twice as long).
// stressFusion runs up to maxFusedIterations of them as a wavefront over
// output rows instead: step t computes row t of the first convolution, row
// t-1 of the second, and so on, so each row is read back from the cache
// moments after it was written. It computes every element with
// conv.Conv2x2Row, as the twins do, and leaves each guard's poison where
// the sequence of launches would, so memory ends bit for bit as running
// the launches one by one leaves it (the stress tests compare the two).
//
// Why the wavefront is safe in two buffers: row r of convolution j reads
// rows r and r+1 of its input, written by convolution j-1 one step before,
// and writes elements [r*(S-1), (r+1)*(S-1)) of the buffer convolution j-1
// reads, whose rows (of the wider side S+1) up to r+1 it has finished with;
// convolution j-2 writes that buffer only at rows past r+2. The outputs
// shrink by one each iteration, so every write lands behind every pending
// read.
var stressFusion = new(hip.Fusion)

func init() { stressFusion.Run = fuseIterations }

// maxFusedIterations bounds one wavefront: a few rows of each of its
// convolutions (8 KB each at 2048) stay in the cache.
const maxFusedIterations = 32

// fusedConv is one convolution of a chain, with the guard launched before
// it, if any.
type fusedConv struct {
	x, y, w hip.DevPtr
	side    int // the input's; the output is side-1 square
	alpha   float32
	guard   bool
	guardN  int     // elements the guard writes: the first min(4, block.X) of 0, n/2, n-1, n (the one after the output)
	poison  float32 // what the guard writes
}

// fuseIterations is stressFusion's Run: it takes the longest chain at the
// front of launches (at least two convolutions, at most
// maxFusedIterations) and runs it, or returns 0.
func fuseIterations(mem hip.Memory, launches []hip.FusedLaunch) int {
	chain, taken := parseChain(launches)
	if len(chain) < 2 {
		return 0
	}
	a, b, coefs, ok := chainMemory(mem, chain)
	if !ok {
		return 0
	}
	runWavefront(chain, [2][]float32{a, b}, coefs)
	return taken
}

// parseChain reads a chain of [guard] conv launches of the scenario's own
// sources, stopping at the first launch that does not continue it (a
// guard not followed by its convolution is left out), and returns it with
// the number of launches it spans.
func parseChain(launches []hip.FusedLaunch) ([]fusedConv, int) {
	var chain []fusedConv
	taken := 0
	for i := 0; i < len(launches) && len(chain) < maxFusedIterations; {
		var guard hip.FusedLaunch
		if l := launches[i]; l.Fusion == stressFusion && l.Kernel == GuardKernel {
			guard = l
			if i++; i == len(launches) {
				break
			}
		}
		c, ok := parseFusedConv(launches[i])
		if !ok || (guard.Kernel != "" && !c.takeGuard(guard)) {
			break
		}
		if len(chain) > 0 {
			prev := chain[len(chain)-1]
			if c.x != prev.y || c.y != prev.x || c.side != prev.side-1 {
				break
			}
		}
		chain = append(chain, c)
		i++
		taken = i
	}
	return chain, taken
}

// takeGuard records g as the guard launched before c, if it guards c's
// output as the scenario's guard does: y and n of c's output.
func (c *fusedConv) takeGuard(g hip.FusedLaunch) bool {
	y, n, value, err := fillArgs(GuardKernel, g.Block, g.Args)
	if err != nil || y != c.y || int(n) != (c.side-1)*(c.side-1) {
		return false
	}
	c.guard, c.guardN, c.poison = true, min(4, int(g.Block.X)), value
	return true
}

// parseFusedConv reads one convolution launch that a chain can hold: the
// fast shape on a single plane (N = K = C = 1), launched so that it
// computes every output element, as the scenario's own naive or direct
// thin kernel.
func parseFusedConv(l hip.FusedLaunch) (fusedConv, bool) {
	if l.Fusion != stressFusion || (l.Kernel != conv.NaiveKernel && l.Kernel != conv.DirectThinKernel) {
		return fusedConv{}, false
	}
	a, ok := parseConvShape(l.Args)
	if !ok || !a.fast2x2() || a.n != 1 || a.k != 1 || a.c != 1 {
		return fusedConv{}, false
	}
	switch l.Kernel {
	case conv.NaiveKernel:
		ok = coversNaive(a, l.Grid, l.Block)
	default:
		n := l.Block.Count()
		ok = n > 0 && n <= stressBlock && uint64(l.Grid.X)*uint64(l.Block.X) >= uint64(a.wo) &&
			int(l.Grid.Y) >= a.ho && l.Grid.Z >= 1
	}
	if !ok {
		return fusedConv{}, false
	}
	return fusedConv{x: l.Args[0].(hip.DevPtr), w: l.Args[1].(hip.DevPtr), y: l.Args[2].(hip.DevPtr),
		side: a.h, alpha: l.Args[conv.NumConvArgs-1].(float32)}, true
}

// chainMemory fetches the chain's two buffers, each as long as its longest
// use, and every convolution's weights. ok is false when any is out of
// bounds (the launches one by one then report it) or when the buffers
// overlap each other or a convolution's weights.
func chainMemory(mem hip.Memory, chain []fusedConv) (a, b []float32, coefs [][5]float32, ok bool) {
	var need [2]int
	for j, c := range chain {
		out := (c.side - 1) * (c.side - 1)
		if c.guard {
			out++
		}
		need[j%2] = max(need[j%2], c.side*c.side)
		need[(j+1)%2] = max(need[(j+1)%2], out)
	}
	base := [2]hip.DevPtr{chain[0].x, chain[0].y}
	end := [2]hip.DevPtr{base[0] + hip.DevPtr(4*need[0]), base[1] + hip.DevPtr(4*need[1])}
	overlaps := func(p, q hip.DevPtr, i int) bool { return p < end[i] && base[i] < q }
	if overlaps(base[1], end[1], 0) {
		return nil, nil, nil, false
	}
	var err error
	if a, err = mem.Float32s(base[0], need[0]); err != nil {
		return nil, nil, nil, false
	}
	if b, err = mem.Float32s(base[1], need[1]); err != nil {
		return nil, nil, nil, false
	}
	for _, c := range chain {
		if overlaps(c.w, c.w+16, 0) || overlaps(c.w, c.w+16, 1) {
			return nil, nil, nil, false
		}
		w, err := mem.Float32s(c.w, 4)
		if err != nil {
			return nil, nil, nil, false
		}
		coefs = append(coefs, [5]float32{w[0], w[1], w[2], w[3], c.alpha})
	}
	return a, b, coefs, true
}

// runWavefront runs the chain over bufs (the first convolution reads
// bufs[0]). Every convolution finishes at the same step, as each has one
// row fewer than the one before and starts a step later.
func runWavefront(chain []fusedConv, bufs [2][]float32, coefs [][5]float32) {
	s0 := chain[0].side
	for t := 0; t <= s0-2; t++ {
		for j := 0; j < len(chain) && j <= t; j++ {
			r, s := t-j, s0-j
			in, out := bufs[j%2], bufs[(j+1)%2]
			wo := s - 1
			conv.Conv2x2Row(in[r*s:][:s], in[(r+1)*s:][:s], out[r*wo:][:wo], &coefs[j])
		}
	}
	// A guard's elements inside its convolution's output need no write:
	// the convolution covers every element and overwrites them before any
	// launch reads them. The element after the output it must write, now:
	// the convolution before the guard has read it, and no later launch of
	// the chain reads or writes it.
	for j, c := range chain {
		if c.guard && c.guardN == 4 {
			n := (c.side - 1) * (c.side - 1)
			bufs[(j+1)%2][n] = c.poison
		}
	}
}
