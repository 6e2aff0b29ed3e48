package cuda

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/ebitengine/purego"

	"miotool/internal/hip"
	"miotool/internal/hip/gpulib"
)

// The mock tests run the whole backend against testdata/mockcuda.c and
// mocknvrtc.c, built here with gcc, so that binding, context handling,
// argument passing, host functions called from a foreign thread and the
// capture bookkeeping are exercised without a GPU. They skip without gcc.

var mocks struct {
	once       sync.Once
	dir        string
	cuda       string // path of the mock libcuda.so.1
	nvrtc      string // path of the mock libnvrtc.so.13
	err        error
	handle     uintptr
	clearCtx   uintptr
	setInit    uintptr
	setDevices uintptr
	retains    uintptr
	compiles   uintptr
}

func buildMocks(t testing.TB) {
	t.Helper()
	mocks.once.Do(func() {
		gcc, err := exec.LookPath("gcc")
		if err != nil {
			mocks.err = err
			return
		}
		if _, err := os.Stat("testdata/mockcuda.c"); err != nil {
			mocks.err = fmt.Errorf("run the tests from the package folder: %w", err)
			return
		}
		mocks.dir, mocks.err = os.MkdirTemp("", "miotool-mockcuda-")
		if mocks.err != nil {
			return
		}
		mocks.cuda = filepath.Join(mocks.dir, "driver", "libcuda.so.1")
		mocks.nvrtc = filepath.Join(mocks.dir, "nvrtc", "libnvrtc.so.13")
		for _, b := range []struct{ src, out string }{
			{"testdata/mockcuda.c", mocks.cuda}, {"testdata/mocknvrtc.c", mocks.nvrtc},
		} {
			if err := os.MkdirAll(filepath.Dir(b.out), 0o755); err != nil {
				mocks.err = err
				return
			}
			out, err := exec.Command(gcc, "-shared", "-fPIC", "-O1", "-o", b.out, b.src, "-lpthread").CombinedOutput()
			if err != nil {
				mocks.err = errors.New("building " + b.src + ": " + err.Error() + "\n" + string(out))
				return
			}
		}
		h, err := purego.Dlopen(mocks.cuda, gpulib.DlopenMode)
		if err != nil {
			mocks.err = err
			return
		}
		mocks.handle = h
		mocks.err = gpulib.Bind(gpulib.Lookup(h), "mock libcuda", []gpulib.Symbol{
			{Name: "mock_clear_current", Addr: &mocks.clearCtx},
			{Name: "mock_set_init_result", Addr: &mocks.setInit},
			{Name: "mock_set_device_count", Addr: &mocks.setDevices},
			{Name: "mock_retains", Addr: &mocks.retains},
		})
		if mocks.err != nil {
			return
		}
		hn, err := purego.Dlopen(mocks.nvrtc, gpulib.DlopenMode)
		if err != nil {
			mocks.err = err
			return
		}
		mocks.err = gpulib.Bind(gpulib.Lookup(hn), "mock libnvrtc", []gpulib.Symbol{{Name: "mock_nvrtc_compiles", Addr: &mocks.compiles}})
	})
	if mocks.cuda == "" && mocks.err != nil {
		t.Skipf("mock driver not built: %v", mocks.err)
	}
	if mocks.err != nil {
		t.Fatalf("mock driver: %v", mocks.err)
	}
}

func removeMocks() {
	if mocks.dir != "" {
		os.RemoveAll(mocks.dir)
	}
}

func mockDriverSpec() gpulib.SearchSpec {
	return gpulib.SearchSpec{Name: "libcuda", Sonames: []string{"libcuda.so.1"}, Dirs: []string{filepath.Dir(mocks.cuda)}, SkipLoaderPath: true}
}

func mockNVRTCSpec() gpulib.SearchSpec {
	return gpulib.SearchSpec{Name: "libnvrtc", Sonames: []string{"libnvrtc.so.13"}, Dirs: []string{filepath.Dir(mocks.nvrtc)}, SkipLoaderPath: true}
}

// openMock opens device 0 of the mock driver, with the mock NVRTC unless
// nv is given, and closes it when the test ends.
func openMock(t *testing.T, nv *nvrtcLib) *device {
	t.Helper()
	buildMocks(t)
	drv, err := loadDriver(mockDriverSpec())
	if err != nil {
		t.Fatalf("loading the mock driver: %v", err)
	}
	if nv == nil {
		nv = loadNVRTC(mockNVRTCSpec())
		if !nv.available() {
			t.Fatalf("mock NVRTC: %v", nv.err)
		}
	}
	d, err := openDevice(hip.OpenOptions{}, drv, nv)
	if err != nil {
		t.Fatalf("openDevice: %v", err)
	}
	t.Cleanup(func() { d.Close() })
	return d
}

func TestMockOpenPropsLibraries(t *testing.T) {
	d := openMock(t, nil)
	p := d.Props()
	want := hip.Props{Backend: "cuda", Name: "Mock GPU", Arch: "sm_90", ComputeUnits: 132, WarpSize: 32,
		ClockKHz: 1980000, TotalMemory: 150000000000, RuntimeVersion: "driver API", DriverVersion: "12.8"}
	if p != want {
		t.Fatalf("props\n got %+v\nwant %+v", p, want)
	}
	if d.Dialect() != hip.DialectCUDA {
		t.Fatal("dialect")
	}
	libs := d.Libraries()
	if len(libs) != 2 || libs[0].Name != "libcuda" || libs[0].Loaded != mocks.cuda || libs[0].Version != "12.8" {
		t.Fatalf("libcuda record %+v", libs)
	}
	if libs[1].Name != "libnvrtc" || libs[1].Loaded != mocks.nvrtc || libs[1].Version != "13.0" {
		t.Fatalf("libnvrtc record %+v", libs[1])
	}
}

func TestMockOpenFailures(t *testing.T) {
	buildMocks(t)
	setInit := func(r int) { gpulib.Call(mocks.setInit, uintptr(r)) }
	setDevices := func(n int) { gpulib.Call(mocks.setDevices, uintptr(n)) }
	t.Cleanup(func() { setInit(0); setDevices(1) })

	setInit(34)
	_, err := loadDriver(mockDriverSpec())
	var ue *hip.UnavailableError
	if !errors.As(err, &ue) || !strings.Contains(ue.Reason, "CUDA_ERROR_STUB_LIBRARY") || !strings.Contains(ue.Reason, mocks.cuda) {
		t.Fatalf("cuInit failing with 34: %v", err)
	}
	setInit(0)

	drv, err := loadDriver(mockDriverSpec())
	must(t, err)
	nv := &nvrtcLib{err: errors.New("not looked for")}
	setDevices(0)
	if _, err := openDevice(hip.OpenOptions{}, drv, nv); !errors.As(err, &ue) || !strings.Contains(ue.Reason, "no CUDA device") {
		t.Fatalf("no device: %v", err)
	}
	setDevices(2)
	if _, err := openDevice(hip.OpenOptions{Ordinal: 2}, drv, nv); !errors.As(err, &ue) || !strings.Contains(ue.Reason, "ordinal 2") {
		t.Fatalf("ordinal out of range: %v", err)
	}
	if _, err := openDevice(hip.OpenOptions{Ordinal: -1}, drv, nv); !errors.As(err, &ue) {
		t.Fatalf("negative ordinal: %v", err)
	}
	if len(ue.Libraries) != 2 {
		t.Fatalf("the error should carry both library records: %+v", ue.Libraries)
	}

	// A library without the versioned symbols is refused by name.
	_, err = loadDriver(gpulib.SearchSpec{Name: "libcuda", Sonames: []string{filepath.Base(mocks.nvrtc)}, Dirs: []string{filepath.Dir(mocks.nvrtc)}, SkipLoaderPath: true})
	if !errors.As(err, &ue) || !strings.Contains(ue.Reason, "has no symbol cuInit") {
		t.Fatalf("wrong library: %v", err)
	}
}

func TestMockCloseReleasesContext(t *testing.T) {
	buildMocks(t)
	retains := func() int { return int(gpulib.Call(mocks.retains)) }
	before := retains()
	d := openMock(t, nil)
	if retains() != before+1 {
		t.Fatalf("retains %d, want %d", retains(), before+1)
	}
	must(t, d.Close())
	must(t, d.Close())
	if retains() != before {
		t.Fatalf("retains after Close %d, want %d", retains(), before)
	}
	_, err := d.Malloc(16)
	wantCode(t, err, hip.ErrInvalidContext, "Malloc after Close")
	_, err = d.ThreadExchangeCaptureMode(hip.CaptureModeRelaxed)
	wantCode(t, err, hip.ErrInvalidContext, "ThreadExchangeCaptureMode after Close")
}

// TestMockContextOnEveryThread clears the calling thread's context before
// each call; the mock refuses context-bound calls without one (201).
func TestMockContextOnEveryThread(t *testing.T) {
	d := openMock(t, nil)
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			runtimeLock()
			defer runtimeUnlock()
			for range 50 {
				gpulib.Call(mocks.clearCtx)
				p, err := d.Malloc(64)
				if err == nil {
					gpulib.Call(mocks.clearCtx)
					err = d.Free(p)
				}
				if err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

func TestMockMemory(t *testing.T) {
	d := openMock(t, nil)
	testMemory(t, d)
}

func TestMockKernels(t *testing.T) {
	d := openMock(t, nil)
	compiles := func() int { return int(gpulib.Call(mocks.compiles)) }
	src := testSource()
	src.Name = "mock-vadd" // its own cache key, apart from the GPU tests
	src.Text += "\n// mock\n"
	before := compiles()
	testVectorAdd(t, d, src, 1000)
	if compiles() != before+1 {
		t.Fatalf("NVRTC compiled %d times, want 1", compiles()-before)
	}
	testVectorAdd(t, d, src, 10)
	if compiles() != before+1 {
		t.Fatal("a second ModuleLoad of the same source compiled again")
	}
	code, _, err := gpulib.Programs.Get(d.nv.codeKey(src.Text, "sm_90", "cubin"), nil)
	if err != nil || !strings.HasPrefix(string(code), "MOCKCUBIN sm_90") {
		t.Fatalf("cached code %q, %v (want CUBIN built for the device's own arch)", code, err)
	}
	testModuleErrors(t, d)
}

func TestMockLaunchKernelRejectsArgs(t *testing.T) {
	d := openMock(t, nil)
	m, err := d.ModuleLoad(testSource())
	must(t, err)
	f, err := d.ModuleGetFunction(m, "inc")
	must(t, err)
	err = d.LaunchKernel(f, hip.D1(1), hip.D1(1), 0, 0, hip.DevPtr(0), 3)
	wantCode(t, err, hip.ErrInvalidValue, "int argument")
	if !strings.Contains(err.Error(), "kernel argument 1 has type int") || !strings.HasPrefix(err.Error(), "cuLaunchKernel") {
		t.Fatalf("message %q", err)
	}
}

func TestMockPTXFallback(t *testing.T) {
	missing := loadNVRTC(gpulib.SearchSpec{Name: "libnvrtc", Sonames: []string{"libnvrtc.so.13"}, Dirs: []string{t.TempDir()}, SkipLoaderPath: true})
	if missing.available() {
		t.Fatal("NVRTC found in an empty folder")
	}
	d := openMock(t, missing)
	if libs := d.Libraries(); libs[1].Loaded != "" || len(libs[1].Tried) != 1 {
		t.Fatalf("libnvrtc record %+v", libs[1])
	}
	src := &hip.KernelSource{Name: "mock-ptx", Text: testKernels, PTX: "//MOCKPTX compute_52\n.entry vadd\n"}
	testVectorAdd(t, d, src, 100)

	_, err := d.ModuleLoad(&hip.KernelSource{Name: "no-ptx", Text: testKernels})
	wantCode(t, err, hip.ErrNotSupported, "no NVRTC and no PTX")
	for _, want := range []string{`"no-ptx"`, "NVRTC is unavailable", "libnvrtc.so.13", "no precompiled PTX"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
	_, err = d.ModuleLoad(&hip.KernelSource{Name: "empty"})
	wantCode(t, err, hip.ErrInvalidValue, "empty source")
}

func TestMockHostFunctions(t *testing.T) {
	d := openMock(t, nil)
	testHostFuncOrder(t, d)
}

func TestMockCaptureReplay(t *testing.T) {
	d := openMock(t, nil)
	for _, mode := range hip.CaptureModes {
		t.Run(mode.String(), func(t *testing.T) { testCaptureReplay(t, d, mode) })
	}
}

func TestMockGlobalCaptureRefusal(t *testing.T) {
	d := openMock(t, nil)
	testGlobalCaptureRefusal(t, d)
}

func TestMockThreadExchange(t *testing.T) {
	d := openMock(t, nil)
	testThreadExchange(t, d)
}

// TestMockHostFuncLaunchFailureForgetsTicket launches on an invalidated
// capture: the launch fails and its ticket must not stay behind.
func TestMockHostFuncLaunchFailureForgetsTicket(t *testing.T) {
	d := openMock(t, nil)
	runtimeLock()
	defer runtimeUnlock()
	s, err := d.StreamCreate(hip.StreamNonBlocking)
	must(t, err)
	defer d.StreamDestroy(s)
	live := gpulib.HostFuncs.Stats().Live
	must(t, d.StreamBeginCapture(s, hip.CaptureModeGlobal))
	wantCode(t, d.StreamQuery(s), hip.ErrStreamCaptureUnsupported, "query of the capturing stream")
	var ran atomic.Bool
	wantCode(t, d.LaunchHostFunc(s, func() { ran.Store(true) }), hip.ErrStreamCaptureInvalidated, "host function on an invalidated capture")
	g, err := d.StreamEndCapture(s)
	wantCode(t, err, hip.ErrStreamCaptureInvalidated, "end of an invalidated capture")
	if g != 0 || d.captures.Tracked() != 0 || gpulib.HostFuncs.Stats().Live != live || ran.Load() {
		t.Fatalf("graph %#x tracked %d live %d ran %v", g, d.captures.Tracked(), gpulib.HostFuncs.Stats().Live, ran.Load())
	}
	if !slices.Contains([]hip.CaptureStatus{hip.CaptureStatusNone}, mustStatus(t, d, s)) {
		t.Fatal("stream still capturing after EndCapture")
	}
}

func mustStatus(t *testing.T, d hip.Device, s hip.Stream) hip.CaptureStatus {
	t.Helper()
	st, err := d.StreamIsCapturing(s)
	must(t, err)
	return st
}
