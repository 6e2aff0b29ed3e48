package miopen

import (
	"fmt"
	"unsafe"

	"miotool/internal/dl"
	"miotool/internal/dnn/dnnlib"
	"miotool/internal/hip"
)

// Enumerations passed to MIOpen (miopen.h).
const (
	dataFloat = 1 // miopenFloat
	// convCrossCorrelation is miopenConvolution: MIOpen's "convolution"
	// does not flip the filter, like miotool's CPU reference.
	convCrossCorrelation = 0
)

// Algo is a miopenConvFwdAlgorithm_t (also miopenConvAlgorithm_t: the
// numbers agree).
type Algo int32

// Forward algorithms.
const (
	AlgoGEMM         Algo = 0
	AlgoDirect       Algo = 1
	AlgoFFT          Algo = 2
	AlgoWinograd     Algo = 3
	AlgoImplicitGEMM Algo = 5
)

// String is MIOpen's name, e.g. miopenConvolutionFwdAlgoDirect.
func (a Algo) String() string {
	switch a {
	case AlgoGEMM:
		return "miopenConvolutionFwdAlgoGEMM"
	case AlgoDirect:
		return "miopenConvolutionFwdAlgoDirect"
	case AlgoFFT:
		return "miopenConvolutionFwdAlgoFFT"
	case AlgoWinograd:
		return "miopenConvolutionFwdAlgoWinograd"
	case AlgoImplicitGEMM:
		return "miopenConvolutionFwdAlgoImplicitGEMM"
	}
	return fmt.Sprintf("miopenConvolutionFwdAlgo(%d)", int32(a))
}

// Handle is a miopenHandle_t.
type Handle struct {
	lib *Library
	ptr uintptr
}

// NewHandle creates a handle whose work goes to s, a hipStream_t, on the
// device selected on the calling OS thread (miopenCreateWithStream).
func (l *Library) NewHandle(s hip.Stream) (*Handle, error) {
	h := &Handle{lib: l}
	if err := l.core.Check("miopenCreateWithStream", dl.Call(l.api.createWithStream, uintptr(unsafe.Pointer(&h.ptr)), uintptr(s))); err != nil {
		return nil, err
	}
	return h, nil
}

// SetStream moves the handle's work to s.
func (h *Handle) SetStream(s hip.Stream) error {
	return h.lib.core.Check("miopenSetStream", dl.Call(h.lib.api.setStream, h.ptr, uintptr(s)))
}

// Stream is the stream the handle's work goes to.
func (h *Handle) Stream() (hip.Stream, error) {
	return h.lib.core.Stream("miopenGetStream", h.lib.api.getStream, h.ptr)
}

// Destroy releases the handle; it must not be used afterwards.
func (h *Handle) Destroy() error {
	if h == nil || h.ptr == 0 {
		return nil
	}
	return h.lib.core.Destroy("miopenDestroy", h.lib.api.destroy, &h.ptr)
}

// TensorDesc is a miopenTensorDescriptor_t for a packed NCHW fp32 tensor.
// MIOpen describes filters with tensor descriptors too (k x c x r x s).
type TensorDesc struct {
	lib  *Library
	ptr  uintptr
	dims [4]int
}

// NewTensorDesc creates a descriptor set to n x c x h x w.
func (l *Library) NewTensorDesc(n, c, h, w int) (*TensorDesc, error) {
	ptr, err := l.core.Create("miopenCreateTensorDescriptor", l.api.createTensor)
	if err != nil {
		return nil, err
	}
	d := &TensorDesc{lib: l, ptr: ptr}
	return dnnlib.Configured(d, d.Set(n, c, h, w))
}

// Set reshapes the descriptor (miopenSet4dTensorDescriptor: data type
// first, then n, c, h, w).
func (d *TensorDesc) Set(n, c, h, w int) error {
	const op = "miopenSet4dTensorDescriptor"
	if err := dnnlib.Positive(op, StatusBadParm, "n c h w", n, c, h, w); err != nil {
		return err
	}
	if err := d.lib.core.Check(op, dl.Call(d.lib.api.set4dTensor, d.ptr, dataFloat,
		uintptr(n), uintptr(c), uintptr(h), uintptr(w))); err != nil {
		return err
	}
	d.dims = [4]int{n, c, h, w}
	return nil
}

// Dims are the n, c, h, w the descriptor was last set to.
func (d *TensorDesc) Dims() [4]int { return d.dims }

// Elements is n*c*h*w.
func (d *TensorDesc) Elements() int { return d.dims[0] * d.dims[1] * d.dims[2] * d.dims[3] }

// Destroy releases the descriptor.
func (d *TensorDesc) Destroy() error {
	if d == nil || d.ptr == 0 {
		return nil
	}
	return d.lib.core.Destroy("miopenDestroyTensorDescriptor", d.lib.api.destroyTensor, &d.ptr)
}

// Conv2d is a 2-D convolution's geometry.
type Conv2d = dnnlib.Conv2d

// ConvDesc is a miopenConvolutionDescriptor_t in miopenConvolution mode.
type ConvDesc struct {
	lib *Library
	ptr uintptr
}

// NewConvDesc creates a 2-D convolution descriptor.
func (l *Library) NewConvDesc(g Conv2d) (*ConvDesc, error) {
	const op = "miopenInitConvolutionDescriptor"
	if err := dnnlib.CheckConv2d(op, StatusBadParm, g); err != nil {
		return nil, err
	}
	ptr, err := l.core.Create("miopenCreateConvolutionDescriptor", l.api.createConv)
	if err != nil {
		return nil, err
	}
	d := &ConvDesc{lib: l, ptr: ptr}
	return dnnlib.Configured(d, l.core.Check(op, dl.Call(l.api.initConv, d.ptr, convCrossCorrelation, uintptr(g.PadH), uintptr(g.PadW),
		uintptr(g.StrideH), uintptr(g.StrideW), uintptr(g.DilH), uintptr(g.DilW))))
}

// OutputDims is what MIOpen computes as the output shape of conv over x
// with filter w.
func (d *ConvDesc) OutputDims(x, w *TensorDesc) ([4]int, error) {
	return d.lib.core.OutputDims("miopenGetConvolutionForwardOutputDim", d.lib.api.outputDims, d.ptr, x.ptr, w.ptr)
}

// Destroy releases the descriptor.
func (d *ConvDesc) Destroy() error {
	if d == nil || d.ptr == 0 {
		return nil
	}
	return d.lib.core.Destroy("miopenDestroyConvolutionDescriptor", d.lib.api.destroyConv, &d.ptr)
}

// Problem names the descriptors of one forward convolution.
type Problem struct {
	X, W, Y *TensorDesc
	Conv    *ConvDesc
}

func (p Problem) check(op string) error {
	if p.X == nil || p.W == nil || p.Y == nil || p.Conv == nil {
		return badArg(op, "a descriptor is missing (x %v, w %v, y %v, conv %v)", p.X != nil, p.W != nil, p.Y != nil, p.Conv != nil)
	}
	return nil
}

// Buffers are the device memory of one forward convolution.
type Buffers struct {
	X, W, Y        hip.DevPtr
	Workspace      hip.DevPtr // may be zero when WorkspaceBytes is
	WorkspaceBytes uint64
}

func (b Buffers) check(op string) error {
	if b.X == 0 || b.W == 0 || b.Y == 0 {
		return badArg(op, "a data pointer is zero (x %#x, w %#x, y %#x)", uint64(b.X), uint64(b.W), uint64(b.Y))
	}
	return nil
}

// ForwardWorkspace is the largest workspace any forward solver needs for
// p (miopenConvolutionForwardGetWorkSpaceSize; note its w-before-x order).
func (h *Handle) ForwardWorkspace(p Problem) (uint64, error) {
	const op = "miopenConvolutionForwardGetWorkSpaceSize"
	if err := p.check(op); err != nil {
		return 0, err
	}
	var size uint64
	err := h.lib.core.Check(op, dl.Call(h.lib.api.fwdWorkspace, h.ptr, p.W.ptr, p.X.ptr, p.Conv.ptr, p.Y.ptr, uintptr(unsafe.Pointer(&size))))
	return size, err
}

// convAlgoPerf mirrors miopenConvAlgoPerf_t on x86-64: a 4-byte algorithm
// union, float time (ms), size_t memory; 16 bytes.
type convAlgoPerf struct {
	algo   int32
	time   float32
	memory uint64
}

// AlgoPerf is one entry of find's ranking.
type AlgoPerf struct {
	Algo   Algo
	TimeMs float32
	Memory uint64 // workspace bytes
}

// maxFindResults is how many results find may write; MIOpen has five
// forward algorithms and returns at most one entry per algorithm.
const maxFindResults = 8

// FindForward benchmarks the forward solvers on the handle's stream
// (miopenFindConvolutionForwardAlgorithm, Find 1.0) with the caller's
// buffers, which it writes, and returns the algorithms fastest first.
// Exhaustive asks MIOpen to tune as well.
func (h *Handle) FindForward(p Problem, b Buffers, exhaustive bool) ([]AlgoPerf, error) {
	const op = "miopenFindConvolutionForwardAlgorithm"
	if err := p.check(op); err != nil {
		return nil, err
	}
	if err := b.check(op); err != nil {
		return nil, err
	}
	raw := make([]convAlgoPerf, maxFindResults)
	var got int32
	ex := uintptr(0)
	if exhaustive {
		ex = 1
	}
	st := dl.Call(h.lib.api.findFwd, h.ptr, p.X.ptr, uintptr(b.X), p.W.ptr, uintptr(b.W), p.Conv.ptr, p.Y.ptr, uintptr(b.Y),
		maxFindResults, uintptr(unsafe.Pointer(&got)), uintptr(unsafe.Pointer(&raw[0])),
		uintptr(b.Workspace), uintptr(b.WorkspaceBytes), ex)
	if err := h.lib.core.Check(op, st); err != nil {
		return nil, err
	}
	if got < 0 || got > maxFindResults {
		return nil, &Error{Op: op, Status: StatusInternalError, Message: fmt.Sprintf("returned %d results for %d slots", got, maxFindResults)}
	}
	out := make([]AlgoPerf, got)
	for i, r := range raw[:got] {
		out[i] = AlgoPerf{Algo: Algo(r.algo), TimeMs: r.time, Memory: r.memory}
	}
	return out, nil
}

// Forward enqueues y = alpha*conv(x, w) + beta*y with algo on the handle's
// stream (miopenConvolutionForward).
func (h *Handle) Forward(p Problem, b Buffers, algo Algo, alpha, beta float32) error {
	const op = "miopenConvolutionForward"
	if err := p.check(op); err != nil {
		return err
	}
	if err := b.check(op); err != nil {
		return err
	}
	return h.lib.core.Check(op, dl.Call(h.lib.api.convFwd, h.ptr, uintptr(unsafe.Pointer(&alpha)),
		p.X.ptr, uintptr(b.X), p.W.ptr, uintptr(b.W), p.Conv.ptr, uintptr(algo),
		uintptr(unsafe.Pointer(&beta)), p.Y.ptr, uintptr(b.Y), uintptr(b.Workspace), uintptr(b.WorkspaceBytes)))
}

// convSolution mirrors miopenConvSolution_t on x86-64: float time, size_t
// workspace_size at 8, uint64_t solution_id at 16, the algorithm enum at
// 24; 32 bytes.
type convSolution struct {
	time      float32
	workspace uint64
	id        uint64
	algorithm int32
}

// Solution is one immediate-mode solution.
type Solution struct {
	// TimeMs is the find-db time, or MIOpen's synthetic ranking time when
	// the answer came from its heuristic fallback.
	TimeMs    float32
	Workspace uint64
	ID        uint64 // the solver's numeric id
	Algo      Algo
}

// Solutions asks immediate mode for up to max solutions for p, best first
// (miopenConvolutionForwardGetSolutionCount, then ...GetSolution). With
// no find-db record MIOpen answers from its heuristic fallback (TunaNet or
// WTI).
func (h *Handle) Solutions(p Problem, max int) ([]Solution, error) {
	const op = "miopenConvolutionForwardGetSolution"
	if err := p.check(op); err != nil {
		return nil, err
	}
	if max < 1 {
		return nil, badArg(op, "max=%d: want at least one solution", max)
	}
	var count uint64
	if err := h.lib.core.Check("miopenConvolutionForwardGetSolutionCount", dl.Call(h.lib.api.solutionCount,
		h.ptr, p.W.ptr, p.X.ptr, p.Conv.ptr, p.Y.ptr, uintptr(unsafe.Pointer(&count)))); err != nil {
		return nil, err
	}
	n := min(int(min(count, 1<<16)), max)
	if n == 0 {
		return nil, nil
	}
	raw := make([]convSolution, n)
	var got uint64
	if err := h.lib.core.Check(op, dl.Call(h.lib.api.getSolution, h.ptr, p.W.ptr, p.X.ptr, p.Conv.ptr, p.Y.ptr,
		uintptr(n), uintptr(unsafe.Pointer(&got)), uintptr(unsafe.Pointer(&raw[0])))); err != nil {
		return nil, err
	}
	if got > uint64(n) {
		return nil, &Error{Op: op, Status: StatusInternalError, Message: fmt.Sprintf("returned %d solutions for %d slots", got, n)}
	}
	out := make([]Solution, got)
	for i, r := range raw[:got] {
		out[i] = Solution{TimeMs: r.time, Workspace: r.workspace, ID: r.id, Algo: Algo(r.algorithm)}
	}
	return out, nil
}

// SolutionWorkspace is the workspace solution id needs for p.
func (h *Handle) SolutionWorkspace(p Problem, id uint64) (uint64, error) {
	const op = "miopenConvolutionForwardGetSolutionWorkspaceSize"
	if err := p.check(op); err != nil {
		return 0, err
	}
	var size uint64
	err := h.lib.core.Check(op, dl.Call(h.lib.api.solutionWorkspace, h.ptr, p.W.ptr, p.X.ptr, p.Conv.ptr, p.Y.ptr,
		uintptr(id), uintptr(unsafe.Pointer(&size))))
	return size, err
}

// CompileSolution builds solution id's kernels ahead of the first forward.
func (h *Handle) CompileSolution(p Problem, id uint64) error {
	const op = "miopenConvolutionForwardCompileSolution"
	if err := p.check(op); err != nil {
		return err
	}
	return h.lib.core.Check(op, dl.Call(h.lib.api.compileSolution, h.ptr, p.W.ptr, p.X.ptr, p.Conv.ptr, p.Y.ptr, uintptr(id)))
}

// ForwardImmediate enqueues y = conv(x, w) with solution id on the
// handle's stream (miopenConvolutionForwardImmediate: w before x).
func (h *Handle) ForwardImmediate(p Problem, b Buffers, id uint64) error {
	const op = "miopenConvolutionForwardImmediate"
	if err := p.check(op); err != nil {
		return err
	}
	if err := b.check(op); err != nil {
		return err
	}
	return h.lib.core.Check(op, dl.Call(h.lib.api.fwdImmediate, h.ptr, p.W.ptr, uintptr(b.W), p.X.ptr, uintptr(b.X),
		p.Conv.ptr, p.Y.ptr, uintptr(b.Y), uintptr(b.Workspace), uintptr(b.WorkspaceBytes), uintptr(id)))
}

// ScaleTensor enqueues y *= alpha.
func (h *Handle) ScaleTensor(y *TensorDesc, data hip.DevPtr, alpha float32) error {
	const op = "miopenScaleTensor"
	if y == nil || data == 0 {
		return badArg(op, "the tensor or its data pointer is missing")
	}
	return h.lib.core.ScaleTensor(op, h.lib.api.scaleTensor, h.ptr, y.ptr, data, alpha)
}
