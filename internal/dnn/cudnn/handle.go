package cudnn

import (
	"fmt"
	"unsafe"

	"miotool/internal/dl"
	"miotool/internal/dnn/dnnlib"
	"miotool/internal/hip"
)

// Enumerations passed to cuDNN (cudnn_graph.h, cudnn_cnn.h).
const (
	dataFloat     = 0 // CUDNN_DATA_FLOAT
	formatNCHW    = 0 // CUDNN_TENSOR_NCHW
	deterministic = 1 // CUDNN_DETERMINISTIC, a perf result's determinism
)

// ConvMode is a cudnnConvolutionMode_t.
type ConvMode int32

// Convolution modes. Deep-learning frameworks mean cross-correlation (no
// filter flip) by "convolution"; so does miotool's CPU reference.
const (
	Convolution      ConvMode = 0
	CrossCorrelation ConvMode = 1
)

// MathType is a cudnnMathType_t.
type MathType int32

// Math types. For fp32 data, DefaultMath lets cuDNN use TF32 Tensor Cores
// on Ampere and newer GPUs (inputs rounded to a 10-bit mantissa); FMAMath
// keeps to fp32 FMA kernels, which is how frameworks turn TF32 off and what
// a comparison with an fp32 CPU reference needs.
const (
	DefaultMath              MathType = 0
	TensorOpMath             MathType = 1
	TensorOpMathAllowConvert MathType = 2
	FMAMath                  MathType = 3
)

func (m MathType) String() string {
	switch m {
	case DefaultMath:
		return "CUDNN_DEFAULT_MATH"
	case TensorOpMath:
		return "CUDNN_TENSOR_OP_MATH"
	case TensorOpMathAllowConvert:
		return "CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION"
	case FMAMath:
		return "CUDNN_FMA_MATH"
	}
	return fmt.Sprintf("CUDNN_MATH(%d)", int32(m))
}

// FwdAlgo is a cudnnConvolutionFwdAlgo_t.
type FwdAlgo int32

var fwdAlgoNames = []string{"IMPLICIT_GEMM", "IMPLICIT_PRECOMP_GEMM", "GEMM", "DIRECT", "FFT", "FFT_TILING", "WINOGRAD", "WINOGRAD_NONFUSED"}

// String is the algorithm's name without the CUDNN_CONVOLUTION_FWD_ALGO_
// prefix, e.g. IMPLICIT_PRECOMP_GEMM.
func (a FwdAlgo) String() string {
	if a >= 0 && int(a) < len(fwdAlgoNames) {
		return fwdAlgoNames[a]
	}
	return fmt.Sprintf("ALGO(%d)", int32(a))
}

// Handle is a cudnnHandle_t.
type Handle struct {
	lib *Library
	ptr uintptr
}

// NewHandle creates a handle on the device whose context is current on the
// calling OS thread (see Context).
func (l *Library) NewHandle() (*Handle, error) {
	ptr, err := l.core.Create("cudnnCreate", l.api.create)
	if err != nil {
		return nil, err
	}
	return &Handle{lib: l, ptr: ptr}, nil
}

// SetStream makes the handle's work go to s, a CUstream: the driver API's
// stream and the runtime API's cudaStream_t are the same object.
func (h *Handle) SetStream(s hip.Stream) error {
	return h.lib.core.Check("cudnnSetStream", dl.Call(h.lib.api.setStream, h.ptr, uintptr(s)))
}

// Stream is the stream the handle's work goes to.
func (h *Handle) Stream() (hip.Stream, error) {
	return h.lib.core.Stream("cudnnGetStream", h.lib.api.getStream, h.ptr)
}

// Destroy releases the handle; it must not be used afterwards.
func (h *Handle) Destroy() error {
	if h == nil || h.ptr == 0 {
		return nil
	}
	return h.lib.core.Destroy("cudnnDestroy", h.lib.api.destroy, &h.ptr)
}

// TensorDesc is a cudnnTensorDescriptor_t for a packed NCHW fp32 tensor.
type TensorDesc struct {
	lib  *Library
	ptr  uintptr
	dims [4]int
}

// NewTensorDesc creates a tensor descriptor and sets it to n x c x h x w.
func (l *Library) NewTensorDesc(n, c, h, w int) (*TensorDesc, error) {
	ptr, err := l.core.Create("cudnnCreateTensorDescriptor", l.api.createTensor)
	if err != nil {
		return nil, err
	}
	d := &TensorDesc{lib: l, ptr: ptr}
	return dnnlib.Configured(d, d.Set(n, c, h, w))
}

// Set reshapes the descriptor to n x c x h x w (packed NCHW, fp32).
func (d *TensorDesc) Set(n, c, h, w int) error {
	const op = "cudnnSetTensor4dDescriptor"
	if err := dnnlib.Positive(op, StatusBadParam, "n c h w", n, c, h, w); err != nil {
		return err
	}
	if err := d.lib.core.Check(op, dl.Call(d.lib.api.setTensor4d, d.ptr, formatNCHW, dataFloat,
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
	return d.lib.core.Destroy("cudnnDestroyTensorDescriptor", d.lib.api.destroyTensor, &d.ptr)
}

// FilterDesc is a cudnnFilterDescriptor_t for a k x c x r x s fp32 filter.
type FilterDesc struct {
	lib *Library
	ptr uintptr
}

// NewFilterDesc creates a filter descriptor set to k x c x r x s (NCHW).
func (l *Library) NewFilterDesc(k, c, r, s int) (*FilterDesc, error) {
	ptr, err := l.core.Create("cudnnCreateFilterDescriptor", l.api.createFilter)
	if err != nil {
		return nil, err
	}
	d := &FilterDesc{lib: l, ptr: ptr}
	return dnnlib.Configured(d, d.Set(k, c, r, s))
}

// Set reshapes the filter. Note cuDNN's argument order: data type, then
// format (the tensor call has format first).
func (d *FilterDesc) Set(k, c, r, s int) error {
	const op = "cudnnSetFilter4dDescriptor"
	if err := dnnlib.Positive(op, StatusBadParam, "k c r s", k, c, r, s); err != nil {
		return err
	}
	return d.lib.core.Check(op, dl.Call(d.lib.api.setFilter4d, d.ptr, dataFloat, formatNCHW,
		uintptr(k), uintptr(c), uintptr(r), uintptr(s)))
}

// Destroy releases the descriptor.
func (d *FilterDesc) Destroy() error {
	if d == nil || d.ptr == 0 {
		return nil
	}
	return d.lib.core.Destroy("cudnnDestroyFilterDescriptor", d.lib.api.destroyFilter, &d.ptr)
}

// Conv2d is a 2-D convolution's geometry.
type Conv2d = dnnlib.Conv2d

// ConvDesc is a cudnnConvolutionDescriptor_t with fp32 compute.
type ConvDesc struct {
	lib *Library
	ptr uintptr
}

// NewConvDesc creates a 2-D convolution descriptor with fp32 compute in
// the given mode and math type.
func (l *Library) NewConvDesc(g Conv2d, mode ConvMode, math MathType) (*ConvDesc, error) {
	const op = "cudnnSetConvolution2dDescriptor"
	if err := dnnlib.CheckConv2d(op, StatusBadParam, g); err != nil {
		return nil, err
	}
	ptr, err := l.core.Create("cudnnCreateConvolutionDescriptor", l.api.createConv)
	if err != nil {
		return nil, err
	}
	d := &ConvDesc{lib: l, ptr: ptr}
	err = l.core.Check(op, dl.Call(l.api.setConv2d, d.ptr, uintptr(g.PadH), uintptr(g.PadW),
		uintptr(g.StrideH), uintptr(g.StrideW), uintptr(g.DilH), uintptr(g.DilW), uintptr(mode), dataFloat))
	if err == nil {
		err = d.SetMathType(math)
	}
	return dnnlib.Configured(d, err)
}

// SetMathType sets which kernels the convolution may use.
func (d *ConvDesc) SetMathType(m MathType) error {
	return d.lib.core.Check("cudnnSetConvolutionMathType", dl.Call(d.lib.api.setConvMathType, d.ptr, uintptr(m)))
}

// OutputDims is what cuDNN computes as the output shape of conv over x
// with filter w.
func (d *ConvDesc) OutputDims(x *TensorDesc, w *FilterDesc) ([4]int, error) {
	return d.lib.core.OutputDims("cudnnGetConvolution2dForwardOutputDim", d.lib.api.getOutputDim, d.ptr, x.ptr, w.ptr)
}

// Destroy releases the descriptor.
func (d *ConvDesc) Destroy() error {
	if d == nil || d.ptr == 0 {
		return nil
	}
	return d.lib.core.Destroy("cudnnDestroyConvolutionDescriptor", d.lib.api.destroyConv, &d.ptr)
}

// fwdAlgoPerf mirrors cudnnConvolutionFwdAlgoPerf_t of cuDNN 9
// (cudnn_cnn.h): algo, status, time (float, ms), then memory (size_t) at
// offset 16 after 4 bytes of padding, determinism, mathType and
// reserved[3]; 48 bytes with the tail padding. The stand-in library's
// offsetof values are checked against this in the tests.
type fwdAlgoPerf struct {
	algo        int32
	status      int32
	time        float32
	memory      uint64
	determinism int32
	mathType    int32
	reserved    [3]int32
}

// AlgoPerf is one entry of find's or the heuristic's ranking.
type AlgoPerf struct {
	Algo   FwdAlgo
	Status Status // success, or why the algorithm cannot run this problem
	// TimeMs is the measured time for find; the heuristic reports -1.
	TimeMs        float32
	Memory        uint64 // workspace bytes
	Deterministic bool
	MathType      MathType
}

// maxAlgos is how many results find may return: the library's own count,
// or CUDNN_CONVOLUTION_FWD_ALGO_COUNT (8) when it will not say.
func (h *Handle) maxAlgos() int {
	var n int32
	if dl.Call(h.lib.api.getFwdMaxCount, h.ptr, uintptr(unsafe.Pointer(&n))) != 0 || n <= 0 || n > 64 {
		return len(fwdAlgoNames)
	}
	return int(n)
}

// FindForward times every forward algorithm on the handle's stream
// (cudnnFindConvolutionForwardAlgorithm, which allocates its own buffers)
// and returns them fastest first, failed ones after.
func (h *Handle) FindForward(x *TensorDesc, w *FilterDesc, conv *ConvDesc, y *TensorDesc) ([]AlgoPerf, error) {
	return h.rank("cudnnFindConvolutionForwardAlgorithm", h.lib.api.findFwd, x, w, conv, y)
}

// HeuristicForward ranks the forward algorithms without running them
// (cudnnGetConvolutionForwardAlgorithm_v7), as frameworks do when not
// benchmarking.
func (h *Handle) HeuristicForward(x *TensorDesc, w *FilterDesc, conv *ConvDesc, y *TensorDesc) ([]AlgoPerf, error) {
	return h.rank("cudnnGetConvolutionForwardAlgorithm_v7", h.lib.api.getFwdV7, x, w, conv, y)
}

func (h *Handle) rank(op string, fn uintptr, x *TensorDesc, w *FilterDesc, conv *ConvDesc, y *TensorDesc) ([]AlgoPerf, error) {
	want := h.maxAlgos()
	raw := make([]fwdAlgoPerf, want)
	var got int32
	st := dl.Call(fn, h.ptr, x.ptr, w.ptr, conv.ptr, y.ptr, uintptr(want),
		uintptr(unsafe.Pointer(&got)), uintptr(unsafe.Pointer(&raw[0])))
	if err := h.lib.core.Check(op, st); err != nil {
		return nil, err
	}
	if got < 0 || int(got) > want {
		return nil, &Error{Op: op, Status: StatusInternalError,
			Message: fmt.Sprintf("returned %d results for %d slots", got, want)}
	}
	out := make([]AlgoPerf, got)
	for i, r := range raw[:got] {
		out[i] = AlgoPerf{Algo: FwdAlgo(r.algo), Status: Status(r.status), TimeMs: r.time, Memory: r.memory,
			Deterministic: r.determinism == deterministic, MathType: MathType(r.mathType)}
	}
	return out, nil
}

// ForwardWorkspace is the workspace algo needs for this problem, in bytes.
func (h *Handle) ForwardWorkspace(x *TensorDesc, w *FilterDesc, conv *ConvDesc, y *TensorDesc, algo FwdAlgo) (uint64, error) {
	var size uint64
	err := h.lib.core.Check("cudnnGetConvolutionForwardWorkspaceSize", dl.Call(h.lib.api.getFwdWorkspace,
		h.ptr, x.ptr, w.ptr, conv.ptr, y.ptr, uintptr(algo), uintptr(unsafe.Pointer(&size))))
	return size, err
}

// ForwardArgs are cudnnConvolutionForward's operands: y = Alpha*conv(x, w)
// + Beta*y.
type ForwardArgs struct {
	X     *TensorDesc
	XData hip.DevPtr
	W     *FilterDesc
	WData hip.DevPtr
	Conv  *ConvDesc
	Algo  FwdAlgo
	// Workspace may be zero when WorkspaceBytes is.
	Workspace      hip.DevPtr
	WorkspaceBytes uint64
	Y              *TensorDesc
	YData          hip.DevPtr
	Alpha, Beta    float32
}

// Forward enqueues the convolution on the handle's stream.
func (h *Handle) Forward(a ForwardArgs) error {
	const op = "cudnnConvolutionForward"
	if a.X == nil || a.W == nil || a.Conv == nil || a.Y == nil {
		return badArg(op, "a descriptor is missing (x %v, w %v, conv %v, y %v)", a.X != nil, a.W != nil, a.Conv != nil, a.Y != nil)
	}
	if a.XData == 0 || a.WData == 0 || a.YData == 0 {
		return badArg(op, "a data pointer is zero (x %#x, w %#x, y %#x)", uint64(a.XData), uint64(a.WData), uint64(a.YData))
	}
	alpha, beta := a.Alpha, a.Beta
	st := dl.Call(h.lib.api.convForward, h.ptr,
		uintptr(unsafe.Pointer(&alpha)), a.X.ptr, uintptr(a.XData), a.W.ptr, uintptr(a.WData),
		a.Conv.ptr, uintptr(a.Algo), uintptr(a.Workspace), uintptr(a.WorkspaceBytes),
		uintptr(unsafe.Pointer(&beta)), a.Y.ptr, uintptr(a.YData))
	return h.lib.core.Check(op, st)
}

// ScaleTensor enqueues y *= alpha.
func (h *Handle) ScaleTensor(y *TensorDesc, data hip.DevPtr, alpha float32) error {
	const op = "cudnnScaleTensor"
	if y == nil || data == 0 {
		return badArg(op, "the tensor or its data pointer is missing")
	}
	return h.lib.core.ScaleTensor(op, h.lib.api.scaleTensor, h.ptr, y.ptr, data, alpha)
}
