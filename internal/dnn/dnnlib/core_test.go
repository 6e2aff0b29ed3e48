package dnnlib_test

import (
	"fmt"
	"runtime"
	"strings"
	"testing"
	"unsafe"

	"miotool/internal/conv"
	"miotool/internal/dl"
	"miotool/internal/dnn/dnnlib"
	"miotool/internal/dnn/dnnlib/dnntest"
	"miotool/internal/hip"
)

func TestObjectsAreMadeOnceAndFreedOnce(t *testing.T) {
	core := openMock(t)
	h, err := core.Create("dnnCreate", mock.create)
	must(t, err)
	if h == 0 || len(stand.Lines("dnnCreate")) != 1 {
		t.Fatalf("handle %#x; log:\n%s", h, stand.Log())
	}
	must(t, core.Check("dnnSetStream", dl.Call(mock.setStream, h, 0x77)))
	if s, err := core.Stream("dnnGetStream", mock.getStream, h); err != nil || s != 0x77 {
		t.Fatalf("Stream() = %#x, %v", s, err)
	}

	obj := h
	must(t, core.Destroy("dnnDestroy", mock.destroy, &obj))
	if obj != 0 {
		t.Fatalf("Destroy left %#x", obj)
	}
	must(t, core.Destroy("dnnDestroy", mock.destroy, &obj))
	if n := len(stand.Lines("dnnDestroy")); n != 1 {
		t.Fatalf("dnnDestroy called %d times:\n%s", n, stand.Log())
	}
	// The handle is gone: the stand-in refuses it, and its stream with it.
	_, err = core.Stream("dnnGetStream", mock.getStream, h)
	wantStatus(t, err, statusBad, "the stream of a destroyed handle")
	wantStatus(t, core.Check("dnnSetStream", dl.Call(mock.setStream, h, 0x78)), statusBad, "a stream for a destroyed handle")
}

func TestFailuresCarryTheLibrarysText(t *testing.T) {
	core := openMock(t)
	stand.FailNext("dnnCreateTensor", int32(statusInjected))
	ptr, err := core.Create("dnnCreateTensor", mock.createTensor)
	e := wantStatus(t, err, statusInjected, "injected failure")
	if ptr != 0 || e.Error() != "dnnCreateTensor: TEST_INJECTED (7): the stand-in says 7" {
		t.Fatalf("ptr %#x, error %q", ptr, e.Error())
	}
	if lines := stand.Lines("dnnCreateTensor"); len(lines) != 1 || lines[0] != "dnnCreateTensor failed=7" {
		t.Fatalf("log %q", lines)
	}
	ptr, err = core.Create("dnnCreateTensor", mock.createTensor) // the injection fired once
	must(t, err)

	// A destroy that fails still forgets the object: it is the library's now.
	wrongKind := ptr
	e = wantStatus(t, core.Destroy("dnnDestroyConv", mock.destroyConv, &wrongKind), statusBad, "a tensor destroyed as a convolution")
	if wrongKind != 0 || e.Op != "dnnDestroyConv" {
		t.Fatalf("after a failed destroy: %#x, %+v", wrongKind, e)
	}
	must(t, core.Destroy("dnnDestroyTensor", mock.destroyTensor, &ptr))

	silent := dnnlib.NewCore[testStatus](mockName, core.Info(), nil)
	if e := wantStatus(t, silent.Check("dnnForward", 2), statusBad, "no explanation"); e.Message != "" {
		t.Fatalf("message %q without an explain function", e.Message)
	}
	must(t, silent.Check("dnnForward", 0))

	stand.ResetLog()
	if stand.Log() != "" {
		t.Fatalf("log after reset: %q", stand.Log())
	}
}

// tensor is a descriptor of the stand-in, as a binding wraps one.
type tensor struct {
	core *dnnlib.Core[testStatus]
	ptr  uintptr
}

func (d *tensor) Destroy() error {
	return d.core.Destroy("dnnDestroyTensor", mock.destroyTensor, &d.ptr)
}

func (d *tensor) set(n, c, h, w int) error {
	if err := dnnlib.Positive("dnnSetTensor", statusBad, "n c h w", n, c, h, w); err != nil {
		return err
	}
	return d.core.Check("dnnSetTensor", dl.Call(mock.setTensor, d.ptr, uintptr(n), uintptr(c), uintptr(h), uintptr(w)))
}

func newTensor(core *dnnlib.Core[testStatus], n, c, h, w int) (*tensor, error) {
	ptr, err := core.Create("dnnCreateTensor", mock.createTensor)
	if err != nil {
		return nil, err
	}
	d := &tensor{core: core, ptr: ptr}
	return dnnlib.Configured(d, d.set(n, c, h, w))
}

func TestConfiguredHandsOutOnlyReadyObjects(t *testing.T) {
	core := openMock(t)
	d, err := newTensor(core, 1, 2, 3, 4)
	must(t, err)
	dnntest.DestroyAtCleanup(t, d)
	if len(stand.Lines("dnnDestroyTensor")) != 0 {
		t.Fatal("a ready descriptor was destroyed")
	}

	stand.FailNext("dnnSetTensor", int32(statusInjected))
	bad, err := newTensor(core, 1, 2, 3, 4)
	wantStatus(t, err, statusInjected, "a descriptor the library would not set")
	if bad != nil || len(stand.Lines("dnnDestroyTensor")) != 1 {
		t.Fatalf("got %v; log:\n%s", bad, stand.Log())
	}
	_, err = newTensor(core, 1, 0, 3, 4)
	wantStatus(t, err, statusBad, "a size refused before the call")
	// Two sets reached the library: the first and the injected failure.
	if len(stand.Lines("dnnDestroyTensor")) != 2 || len(stand.Lines("dnnSetTensor")) != 2 || strings.Contains(stand.Log(), " c=0 ") {
		t.Fatalf("log:\n%s", stand.Log())
	}
}

// flipped is w with every filter turned by 180 degrees, so that
// cross-correlation with it is convolution with w.
func flipped(p conv.Problem, w []float32) []float32 {
	out := make([]float32, len(w))
	rs := p.R * p.S
	for i := range w {
		base, j := i/rs*rs, i%rs
		r, s := j/p.S, j%p.S
		out[base+(p.R-1-r)*p.S+(p.S-1-s)] = w[i]
	}
	return out
}

// TestHostConvolutionFollowsTheDescriptors checks the shared header's
// output shape, convolution (both filter orientations, alpha and beta),
// scaling and compute switch against miotool's CPU reference.
func TestHostConvolutionFollowsTheDescriptors(t *testing.T) {
	core := openMock(t)
	p := dnntest.Problem
	h, err := core.Create("dnnCreate", mock.create)
	must(t, err)
	defer core.Destroy("dnnDestroy", mock.destroy, &h)
	must(t, core.Check("dnnSetStream", dl.Call(mock.setStream, h, 0x42)))
	x, err := newTensor(core, p.N, p.C, p.H, p.W)
	must(t, err)
	w, err := newTensor(core, p.K, p.C, p.R, p.S)
	must(t, err)
	y, err := newTensor(core, p.N, p.K, p.OutH(), p.OutW())
	must(t, err)
	dnntest.DestroyAtCleanup(t, x, w, y)

	xs, ws := conv.RandomTensor(p.InputElements(), 31), conv.RandomTensor(p.WeightElements(), 32)
	ys := make([]float32, p.OutputElements())
	for _, tt := range []struct {
		mode uintptr
		ref  []float32
	}{
		{0, conv.Reference(p, xs, ws)},
		{1, conv.Reference(p, xs, flipped(p, ws))},
	} {
		cv, err := core.Create("dnnCreateConv", mock.createConv)
		must(t, err)
		g := dnntest.Geometry(p)
		must(t, core.Check("dnnSetConv", dl.Call(mock.setConv, cv, tt.mode, uintptr(g.PadH), uintptr(g.PadW),
			uintptr(g.StrideH), uintptr(g.StrideW), uintptr(g.DilH), uintptr(g.DilW))))
		dims, err := core.OutputDims("dnnOutputDim", mock.outputDim, cv, x.ptr, w.ptr)
		if err != nil || dims != [4]int{p.N, p.K, p.OutH(), p.OutW()} {
			t.Fatalf("OutputDims = %v, %v", dims, err)
		}
		forward := func(alpha, beta float32) {
			t.Helper()
			must(t, core.Check("dnnForward", dl.Call(mock.forward, h, cv, x.ptr, uintptr(dnntest.DevPtr(xs)), w.ptr, uintptr(dnntest.DevPtr(ws)),
				y.ptr, uintptr(dnntest.DevPtr(ys)), uintptr(unsafe.Pointer(&alpha)), uintptr(unsafe.Pointer(&beta)))))
		}
		forward(1, 0)
		dnntest.WantScaled(t, ys, tt.ref, 1, fmt.Sprintf("mode %d", tt.mode))
		forward(2, 1) // 2*ref + ref
		must(t, core.ScaleTensor("dnnScale", mock.scale, h, y.ptr, dnntest.DevPtr(ys), 0.5))
		dnntest.WantScaled(t, ys, tt.ref, 1.5, fmt.Sprintf("mode %d with alpha and beta, then scaled", tt.mode))

		stand.SetCompute(false)
		forward(1, 0)
		must(t, core.ScaleTensor("dnnScale", mock.scale, h, y.ptr, dnntest.DevPtr(ys), 0))
		stand.SetCompute(true)
		dnntest.WantScaled(t, ys, tt.ref, 1.5, fmt.Sprintf("mode %d with computing off", tt.mode))
		must(t, core.Destroy("dnnDestroyConv", mock.destroyConv, &cv))
	}
	if lines := stand.Lines("dnnScale"); len(lines) != 4 || !strings.Contains(lines[0], "alpha=0.5") ||
		!strings.Contains(lines[0], fmt.Sprintf("y=%#x", y.ptr)) {
		t.Fatalf("scale calls: %q", lines)
	}
	if lines := stand.Lines("dnnForward"); len(lines) != 6 || !strings.HasSuffix(lines[0], "stream=0x42") {
		t.Fatalf("forward calls: %q", lines)
	}
	runtime.KeepAlive(xs)
	runtime.KeepAlive(ws)
	runtime.KeepAlive(ys)
}

// WantStatus hands back the library error it found; DevPtr is the
// buffer's address.
func TestTestHelpersReportWhatTheyAreGiven(t *testing.T) {
	err := fmt.Errorf("x: %w", &dnnlib.Error[testStatus]{Op: "dnnScale", Status: statusBad, Message: "m"})
	if e := wantStatus(t, err, statusBad, "wrapped"); e.Op != "dnnScale" || e.Message != "m" {
		t.Fatalf("%+v", e)
	}
	v := []float32{1, 2}
	if got := dnntest.DevPtr(v); got != hip.DevPtr(uintptr(unsafe.Pointer(&v[0]))) {
		t.Fatalf("DevPtr = %#x", uint64(got))
	}
}
