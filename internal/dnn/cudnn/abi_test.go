package cudnn

import (
	"errors"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"unsafe"

	"miotool/internal/conv"
	"miotool/internal/dl"
	"miotool/internal/dnn/dnnlib/dnntest"
	"miotool/internal/hip"
)

// The Go mirror of cudnnConvolutionFwdAlgoPerf_t must have the C layout
// (48 bytes; memory at 16 after the float).
func TestPerfStructLayoutMatchesC(t *testing.T) {
	stand.Require(t)
	var c [7]int32
	dl.Call(mockCtl.perfLayout, uintptr(unsafe.Pointer(&c[0])))
	var p fwdAlgoPerf
	goLayout := [7]int32{int32(unsafe.Sizeof(p)), int32(unsafe.Offsetof(p.status)), int32(unsafe.Offsetof(p.time)),
		int32(unsafe.Offsetof(p.memory)), int32(unsafe.Offsetof(p.determinism)), int32(unsafe.Offsetof(p.mathType)),
		int32(unsafe.Offsetof(p.reserved))}
	if c != goLayout {
		t.Fatalf("C layout (size, status, time, memory, determinism, mathType, reserved) = %v, Go = %v", c, goLayout)
	}
	if c[0] != 48 || c[3] != 16 {
		t.Fatalf("size %d, memory at %d: want 48 and 16", c[0], c[3])
	}
}

func TestParseVersion(t *testing.T) {
	for _, tt := range []struct {
		in   int
		want string
	}{{91400, "9.14.0"}, {91900, "9.19.0"}, {90100, "9.1.0"}, {90602, "9.6.2"}, {8907, "8.9.7"}, {8100, "8.1.0"}} {
		if got := ParseVersion(tt.in).String(); got != tt.want {
			t.Errorf("ParseVersion(%d) = %s, want %s", tt.in, got, tt.want)
		}
	}
}

func TestStatusNames(t *testing.T) {
	for _, tt := range []struct {
		s    Status
		want string
	}{
		{0, "CUDNN_STATUS_SUCCESS"}, {2000, "CUDNN_STATUS_BAD_PARAM"}, {3013, "CUDNN_STATUS_NOT_SUPPORTED_CUDA_GRAPH_NATIVE_API"},
		{5003, "CUDNN_STATUS_EXECUTION_FAILED_CUDART"}, {2099, "CUDNN_STATUS_BAD_PARAM(2099)"}, {7, "CUDNN_STATUS(7)"},
	} {
		if got := tt.s.String(); got != tt.want {
			t.Errorf("Status(%d) = %s, want %s", int(tt.s), got, tt.want)
		}
	}
	if StatusOf(nil) != StatusSuccess || StatusOf(errors.New("x")) != StatusInternalError {
		t.Fatal("StatusOf of nil or a foreign error")
	}
	err := fmt.Errorf("wrapped: %w", &Error{Op: "cudnnCreate", Status: StatusNotInitialized, Message: "no context"})
	if StatusOf(err) != StatusNotInitialized || !strings.Contains(err.Error(), "cudnnCreate: CUDNN_STATUS_NOT_INITIALIZED (1001): no context") {
		t.Fatalf("%v", err)
	}
}

func TestOpenRecordsEveryPathAndRefusesOtherMajorVersions(t *testing.T) {
	stand.Require(t)
	dnntest.WantNotFound(t, LibraryName, Soname, func(spec dl.SearchSpec) error { _, err := Open(spec); return err })

	l, err := Open(stand.Spec(LibraryName))
	if err != nil {
		t.Fatal(err)
	}
	if l.Version().String() != "9.14.0" || l.Info().Version != "9.14.0" || l.Info().Loaded != stand.Path() || l.CudartVersion() != 12080 {
		t.Fatalf("version %s, info %+v, cudart %d", l.Version(), l.Info(), l.CudartVersion())
	}
	if !strings.Contains(l.String(), "libcudnn 9.14.0 ("+stand.Path()+")") {
		t.Fatalf("String() = %q", l.String())
	}
	var oe *OpenError

	dl.Call(mockCtl.setVersion, 8907)
	t.Cleanup(func() { dl.Call(mockCtl.setVersion, 91400) })
	_, err = Open(stand.Spec(LibraryName))
	if !errors.As(err, &oe) || !strings.Contains(err.Error(), "is cuDNN 8.9.7; miotool needs cuDNN 9") || oe.Library.Version != "8.9.7" {
		t.Fatalf("cuDNN 8: %v", err)
	}
}

func TestContextRetainsSelectsAndReleases(t *testing.T) {
	stand.Require(t)
	before := dl.Call(mockCtl.ctxRetains)
	ctx, err := OpenContext(stand.Path(), 1)
	if err != nil {
		t.Fatal(err)
	}
	if got := dl.Call(mockCtl.ctxRetains); got != before+1 {
		t.Fatalf("retains %d -> %d, want one more", before, got)
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	dl.Call(mockCtl.ctxSetCurrent, 0)
	must(t, ctx.MakeCurrent())
	if cur := dl.CallPtr(mockCtl.currentCtx); cur != 0xC0000+101 {
		t.Fatalf("current context %#x, want device 1's (0xc0065)", cur)
	}
	must(t, ctx.Close())
	must(t, ctx.Close())
	if got := dl.Call(mockCtl.ctxRetains); got != before {
		t.Fatalf("retains after Close %d, want %d", got, before)
	}
	if err := ctx.MakeCurrent(); err == nil {
		t.Fatal("a released context was made current")
	}

	_, err = OpenContext(stand.Path(), 2)
	if hip.CodeOf(err) != hip.ErrInvalidDevice || !strings.Contains(err.Error(), "cuDeviceGet: CUDA_ERROR_INVALID_DEVICE (101)") {
		t.Fatalf("ordinal 2 of 2 devices: %v", err)
	}
	if _, err := OpenContext(stand.Path(), -1); err == nil {
		t.Fatal("a negative ordinal was accepted")
	}
	if _, err := OpenContext(t.TempDir()+"/libcuda.so.1", 0); err == nil || !strings.Contains(err.Error(), "opening the CUDA driver") {
		t.Fatalf("missing driver: %v", err)
	}
}

func TestDriverPathComesFromTheDevice(t *testing.T) {
	dnntest.WantLoadedPath(t, DriverPath, "libcuda", DriverSoname)
}

// cudnnCreate needs a current context; the failure carries cuDNN's
// last-error text.
func TestHandleNeedsACurrentContext(t *testing.T) {
	l := openStandIn(t)
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	dl.Call(mockCtl.ctxSetCurrent, 0)
	_, err := l.NewHandle()
	e := wantStatus(t, err, StatusNotInitialized, "cudnnCreate without a context")
	if e.Op != "cudnnCreate" || !strings.Contains(e.Message, "no CUDA context is current") {
		t.Fatalf("error %+v", e)
	}
}

type descs struct {
	x, y *TensorDesc
	w    *FilterDesc
	conv *ConvDesc
}

func newDescs(t *testing.T, l *Library, p conv.Problem, math MathType) descs {
	t.Helper()
	var d descs
	var err error
	if d.x, err = l.NewTensorDesc(p.N, p.C, p.H, p.W); err != nil {
		t.Fatal(err)
	}
	if d.w, err = l.NewFilterDesc(p.K, p.C, p.R, p.S); err != nil {
		t.Fatal(err)
	}
	if d.conv, err = l.NewConvDesc(dnntest.Geometry(p), CrossCorrelation, math); err != nil {
		t.Fatal(err)
	}
	if d.y, err = l.NewTensorDesc(p.N, p.K, p.OutH(), p.OutW()); err != nil {
		t.Fatal(err)
	}
	dnntest.DestroyAtCleanup(t, d.x, d.w, d.conv, d.y)
	return d
}

func TestDescriptorsPassTheirArgumentsInCuDNNsOrder(t *testing.T) {
	l := openStandIn(t)
	lockContext(t)
	d := newDescs(t, l, problem, FMAMath)
	stand.WantLogged(t, []string{
		fmt.Sprintf("cudnnSetTensor4dDescriptor desc=%#x format=0 dtype=0 n=2 c=3 h=9 w=7", d.x.ptr),
		fmt.Sprintf("cudnnSetFilter4dDescriptor desc=%#x dtype=0 format=0 k=4 c=3 h=3 w=2", d.w.ptr),
		fmt.Sprintf("cudnnSetConvolution2dDescriptor desc=%#x pad=1x0 stride=2x1 dilation=1x2 mode=1 compute=0", d.conv.ptr),
		fmt.Sprintf("cudnnSetConvolutionMathType desc=%#x math=3", d.conv.ptr),
	}...)
	dims, err := d.conv.OutputDims(d.x, d.w)
	if err != nil || dims != [4]int{2, 4, problem.OutH(), problem.OutW()} {
		t.Fatalf("OutputDims = %v, %v; want [2 4 %d %d]", dims, err, problem.OutH(), problem.OutW())
	}
	if d.y.Dims() != [4]int{2, 4, 5, 5} || d.y.Elements() != 200 {
		t.Fatalf("y dims %v", d.y.Dims())
	}
}

func TestBadSizesAreRefusedBeforeTheLibrary(t *testing.T) {
	l := openStandIn(t)
	for _, tt := range []struct {
		name string
		call func() error
		want string
	}{
		{"tensor", func() error { _, err := l.NewTensorDesc(1, 0, 4, 4); return err }, "c=0: want a positive size"},
		{"filter", func() error { _, err := l.NewFilterDesc(1, 1, -2, 2); return err }, "r=-2: want a positive size"},
		{"padding", func() error {
			_, err := l.NewConvDesc(Conv2d{PadH: -1, StrideH: 1, StrideW: 1, DilH: 1, DilW: 1}, CrossCorrelation, FMAMath)
			return err
		}, "padding -1x0 is negative"},
		{"stride", func() error {
			_, err := l.NewConvDesc(Conv2d{StrideH: 1, DilH: 1, DilW: 1}, CrossCorrelation, FMAMath)
			return err
		}, "stride_w=0"},
		{"huge", func() error { _, err := l.NewTensorDesc(1, 1, 1<<31, 1); return err }, "larger than a C int"},
	} {
		err := tt.call()
		e := wantStatus(t, err, StatusBadParam, tt.name)
		if !strings.Contains(e.Message, tt.want) {
			t.Errorf("%s: %v, want %q", tt.name, err, tt.want)
		}
	}
	if got := stand.Lines("cudnnSetTensor4dDescriptor"); len(got) != 0 {
		t.Fatalf("a refused size reached the library: %q", got)
	}
}

func TestFindAndHeuristicDecodeThePerfStructs(t *testing.T) {
	l := openStandIn(t)
	lockContext(t)
	h, err := l.NewHandle()
	must(t, err)
	defer h.Destroy()
	must(t, h.SetStream(0x5150))
	d := newDescs(t, l, problem, FMAMath)

	found, err := h.FindForward(d.x, d.w, d.conv, d.y)
	must(t, err)
	want := []AlgoPerf{
		{Algo: 1, Status: StatusSuccess, TimeMs: 0.25, Memory: 4096, Deterministic: true, MathType: FMAMath},
		{Algo: 0, Status: StatusSuccess, TimeMs: 0.5, Memory: 0, Deterministic: false, MathType: FMAMath},
		{Algo: 6, Status: StatusNotSupported, TimeMs: -1, Memory: 0, Deterministic: true, MathType: DefaultMath},
	}
	if fmt.Sprint(found) != fmt.Sprint(want) {
		t.Fatalf("find = %+v\nwant   %+v", found, want)
	}
	if found[0].Algo.String() != "IMPLICIT_PRECOMP_GEMM" || found[2].Algo.String() != "WINOGRAD" || FwdAlgo(9).String() != "ALGO(9)" {
		t.Fatalf("algorithm names %s %s", found[0].Algo, found[2].Algo)
	}
	if lines := stand.Lines("cudnnFindConvolutionForwardAlgorithm"); len(lines) != 1 ||
		!strings.Contains(lines[0], "requested=8") || !strings.Contains(lines[0], "stream=0x5150") ||
		!strings.Contains(lines[0], fmt.Sprintf("x=%#x w=%#x conv=%#x y=%#x", d.x.ptr, d.w.ptr, d.conv.ptr, d.y.ptr)) {
		t.Fatalf("find call: %q", lines)
	}

	heur, err := h.HeuristicForward(d.x, d.w, d.conv, d.y)
	must(t, err)
	if len(heur) != 2 || heur[0].Algo != 0 || heur[1].Algo != 1 || heur[0].TimeMs != -1 || heur[1].Memory != 4096 {
		t.Fatalf("heuristic = %+v", heur)
	}
	ws, err := h.ForwardWorkspace(d.x, d.w, d.conv, d.y, 1)
	if err != nil || ws != 4096 {
		t.Fatalf("workspace %d, %v", ws, err)
	}
	s, err := h.Stream()
	if err != nil || s != 0x5150 {
		t.Fatalf("Stream() = %#x, %v", s, err)
	}
}

func TestForwardAndScaleMatchTheCPUReference(t *testing.T) {
	l := openStandIn(t)
	lockContext(t)
	h, err := l.NewHandle()
	must(t, err)
	defer h.Destroy()
	must(t, h.SetStream(0x77))
	d := newDescs(t, l, problem, FMAMath)

	x := conv.RandomTensor(problem.InputElements(), 11)
	w := conv.RandomTensor(problem.WeightElements(), 12)
	y := make([]float32, problem.OutputElements())
	ws := make([]float32, 1024) // 4096 bytes, what algorithm 1 needs
	ref := conv.Reference(problem, x, w)
	args := ForwardArgs{X: d.x, XData: devPtr(x), W: d.w, WData: devPtr(w), Conv: d.conv, Algo: 1,
		Workspace: devPtr(ws), WorkspaceBytes: 4096, Y: d.y, YData: devPtr(y), Alpha: 1}
	must(t, h.Forward(args))
	if chk := conv.Check(problem, y, ref); !chk.OK {
		t.Fatalf("y = conv(x, w): %s", chk)
	}
	line := stand.Lines("cudnnConvolutionForward")[0]
	for _, part := range []string{"alpha=1 ", "algo=1 ", "ws_size=4096 ", "beta=0 ", "stream=0x77",
		fmt.Sprintf("xdata=%#x", uintptr(args.XData)), fmt.Sprintf("ydata=%#x", uintptr(args.YData))} {
		if !strings.Contains(line, part) {
			t.Errorf("forward call lacks %q: %s", part, line)
		}
	}

	// y = 2*conv + 1*y = 3*ref, then a quarter of it.
	args.Alpha, args.Beta = 2, 1
	must(t, h.Forward(args))
	must(t, h.ScaleTensor(d.y, devPtr(y), 0.25))
	dnntest.WantScaled(t, y, ref, 0.75, "forward with alpha and beta, then scale")
	if line := stand.Lines("cudnnScaleTensor")[0]; !strings.Contains(line, "alpha=0.25") || !strings.Contains(line, fmt.Sprintf("y=%#x", d.y.ptr)) {
		t.Fatalf("scale call: %s", line)
	}
	runtime.KeepAlive(x)
	runtime.KeepAlive(w)
	runtime.KeepAlive(ws)
}

func TestFailuresBecomeErrorsWithCuDNNsText(t *testing.T) {
	l := openStandIn(t)
	lockContext(t)
	h, err := l.NewHandle()
	must(t, err)
	defer h.Destroy()
	d := newDescs(t, l, problem, FMAMath)
	x := make([]float32, problem.InputElements())
	w := make([]float32, problem.WeightElements())
	y := make([]float32, problem.OutputElements())
	args := ForwardArgs{X: d.x, XData: devPtr(x), W: d.w, WData: devPtr(w), Conv: d.conv, Algo: 1, Y: d.y, YData: devPtr(y), Alpha: 1}

	e := wantStatus(t, h.Forward(args), StatusBadParam, "forward without the workspace algorithm 1 needs")
	if !strings.Contains(e.Error(), "cudnnConvolutionForward: CUDNN_STATUS_BAD_PARAM (2000): stand-in: algo 1 needs 4096 workspace bytes, got 0") {
		t.Fatalf("message %q", e.Error())
	}

	failNext("cudnnConvolutionForward", StatusNotSupported)
	args.Algo = 0
	wantStatus(t, h.Forward(args), StatusNotSupported, "injected failure")
	must(t, h.Forward(args)) // the injection fired once

	failNext("cudnnFindConvolutionForwardAlgorithm", StatusExecutionFailedCudart)
	_, err = h.FindForward(d.x, d.w, d.conv, d.y)
	wantStatus(t, err, StatusExecutionFailedCudart, "find")

	wrongY, err := l.NewTensorDesc(2, 4, 5, 6)
	must(t, err)
	defer wrongY.Destroy()
	_, err = h.HeuristicForward(d.x, d.w, d.conv, wrongY)
	if e := wantStatus(t, err, StatusBadParam, "heuristic with a wrong y"); !strings.Contains(e.Message, "want 2x4x5x5") {
		t.Fatalf("%v", e)
	}

	args.XData = 0
	wantStatus(t, h.Forward(args), StatusBadParam, "zero x")
	args.XData, args.Conv = devPtr(x), nil
	wantStatus(t, h.Forward(args), StatusBadParam, "missing descriptor")
	wantStatus(t, h.ScaleTensor(d.y, 0, 2), StatusBadParam, "scale without data")
	runtime.KeepAlive(x)
	runtime.KeepAlive(w)
	runtime.KeepAlive(y)
}

// Destroying twice, or a nil object, is harmless.
func TestDestroyIsIdempotent(t *testing.T) {
	l := openStandIn(t)
	lockContext(t)
	h, err := l.NewHandle()
	must(t, err)
	x, err := l.NewTensorDesc(1, 1, 2, 2)
	must(t, err)
	dnntest.DestroyTwice(t, h, x, (*ConvDesc)(nil), (*FilterDesc)(nil), (*TensorDesc)(nil), (*Handle)(nil))
	if n := len(stand.Lines("cudnnDestroyTensorDescriptor")); n != 1 {
		t.Fatalf("cudnnDestroyTensorDescriptor called %d times", n)
	}
	if n := len(stand.Lines("cudnnDestroy")); n != 1 {
		t.Fatalf("cudnnDestroy called %d times", n)
	}
}

// Two threads, each with its own handle and context binding, run forward
// at the same time.
func TestHandlesOnTwoThreads(t *testing.T) {
	l := openStandIn(t)
	ctx, err := OpenContext(stand.Path(), 0)
	must(t, err)
	defer ctx.Close()
	p := conv.Problem{N: 1, C: 2, H: 12, W: 12, K: 3, R: 3, S: 3, StrideH: 1, StrideW: 1, DilH: 1, DilW: 1, Groups: 1}
	x := conv.RandomTensor(p.InputElements(), 5)
	w := conv.RandomTensor(p.WeightElements(), 6)
	ref := conv.Reference(p, x, w)
	errs := make(chan error, 2)
	for range 2 {
		go func() {
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			errs <- func() error {
				if err := ctx.MakeCurrent(); err != nil {
					return err
				}
				h, err := l.NewHandle()
				if err != nil {
					return err
				}
				defer h.Destroy()
				xd, _ := l.NewTensorDesc(1, 2, 12, 12)
				wd, _ := l.NewFilterDesc(3, 2, 3, 3)
				cd, _ := l.NewConvDesc(Conv2d{StrideH: 1, StrideW: 1, DilH: 1, DilW: 1}, CrossCorrelation, FMAMath)
				yd, _ := l.NewTensorDesc(1, 3, 10, 10)
				defer func() { xd.Destroy(); wd.Destroy(); cd.Destroy(); yd.Destroy() }()
				y := make([]float32, p.OutputElements())
				for range 20 {
					if err := h.Forward(ForwardArgs{X: xd, XData: devPtr(x), W: wd, WData: devPtr(w), Conv: cd, Y: yd, YData: devPtr(y), Alpha: 1}); err != nil {
						return err
					}
				}
				if chk := conv.Check(p, y, ref); !chk.OK {
					return errors.New(chk.String())
				}
				return nil
			}()
		}()
	}
	for range 2 {
		must(t, <-errs)
	}
}
