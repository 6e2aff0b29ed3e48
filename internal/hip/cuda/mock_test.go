package cuda

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"testing/fstest"

	"miotool/internal/dl"
	"miotool/internal/hip"
	"miotool/internal/hip/gpulib"
	"miotool/internal/hip/gpulib/gputest"
)

// The mock tests run the whole backend against testdata/mockcuda.c and
// mocknvrtc.c, built with gcc, so that binding, context handling, argument
// passing, host functions called from a foreign thread and the capture
// bookkeeping are exercised without a GPU. They skip without gcc.

var mockCtl struct {
	clearCtx, setInit, setDevices, retains, compiles uintptr
}

var standIns = gputest.StandIns{Libs: []gputest.StandIn{
	{Source: "testdata/mockcuda.c", Path: "driver/libcuda.so.1", Controls: []dl.Symbol{
		{Name: "mock_clear_current", Addr: &mockCtl.clearCtx},
		{Name: "mock_set_init_result", Addr: &mockCtl.setInit},
		{Name: "mock_set_device_count", Addr: &mockCtl.setDevices},
		{Name: "mock_retains", Addr: &mockCtl.retains},
	}},
	{Source: "testdata/mocknvrtc.c", Path: "nvrtc/libnvrtc.so.13", Controls: []dl.Symbol{
		{Name: "mock_nvrtc_compiles", Addr: &mockCtl.compiles},
	}},
}}

func mockDriverSpec() dl.SearchSpec { return standIns.Spec(0, "libcuda") }
func mockNVRTCSpec() dl.SearchSpec  { return standIns.Spec(1, "libnvrtc") }

// openMock opens device 0 of the mock driver, with the mock NVRTC unless
// nv is given, and closes it when the test ends.
func openMock(t testing.TB, nv *nvrtcLib) *device {
	t.Helper()
	standIns.Require(t)
	drv, err := loadDriver(mockDriverSpec())
	if err != nil {
		t.Fatalf("loading the mock driver: %v", err)
	}
	if nv == nil {
		nv = loadNVRTC(mockNVRTCSpec())
		if !nv.Available() {
			t.Fatalf("mock NVRTC: %v", nv.Err)
		}
	}
	d, err := openDevice(hip.OpenOptions{}, drv, nv)
	if err != nil {
		t.Fatalf("openDevice: %v", err)
	}
	t.Cleanup(func() { d.Close() })
	return d
}

func TestMockScenarios(t *testing.T) { gputest.Run(t, kit(openMock(t, nil))) }

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
	if len(libs) != 2 || libs[0].Name != "libcuda" || libs[0].Loaded != standIns.Path(0) || libs[0].Version != "12.8" {
		t.Fatalf("libcuda record %+v", libs)
	}
	if libs[1].Name != "libnvrtc" || libs[1].Loaded != standIns.Path(1) || libs[1].Version != "13.0" {
		t.Fatalf("libnvrtc record %+v", libs[1])
	}
}

func TestMockOpenFailures(t *testing.T) {
	standIns.Require(t)
	setInit := func(r int) { dl.Call(mockCtl.setInit, uintptr(r)) }
	setDevices := func(n int) { dl.Call(mockCtl.setDevices, uintptr(n)) }
	t.Cleanup(func() { setInit(0); setDevices(1) })

	setInit(34)
	_, err := loadDriver(mockDriverSpec())
	var ue *hip.UnavailableError
	if !errors.As(err, &ue) || !strings.Contains(ue.Reason, "CUDA_ERROR_STUB_LIBRARY") || !strings.Contains(ue.Reason, standIns.Path(0)) {
		t.Fatalf("cuInit failing with 34: %v", err)
	}
	setInit(0)

	drv, err := loadDriver(mockDriverSpec())
	must(t, err)
	nv := &nvrtcLib{Compiler: &gpulib.Compiler{Err: errors.New("not looked for")}}
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
	if len(ue.Libraries) != 2 || ue.Backend != "cuda" {
		t.Fatalf("the error should be the cuda backend's and carry both library records: %+v", ue)
	}

	// A library without the versioned symbols is refused by name.
	nvrtcPath := standIns.Path(1)
	_, err = loadDriver(dl.SearchSpec{Name: "libcuda", Sonames: []string{filepath.Base(nvrtcPath)}, Dirs: []string{filepath.Dir(nvrtcPath)}, SkipLoaderPath: true})
	if !errors.As(err, &ue) || !strings.Contains(ue.Reason, "has no symbol cuInit") || !strings.Contains(ue.Reason, "not NVIDIA's") {
		t.Fatalf("wrong library: %v", err)
	}
}

// TestMockClose checks that Close waits for pending work, refuses later
// calls as a released context would, and releases the primary context once.
func TestMockClose(t *testing.T) {
	standIns.Require(t)
	retains := func() int { return int(dl.Call(mockCtl.retains)) }
	before := retains()
	d := openMock(t, nil)
	if retains() != before+1 {
		t.Fatalf("retains %d, want %d", retains(), before+1)
	}
	gputest.CloseWaitsForWork(t, d, hip.ErrInvalidContext)
	if retains() != before {
		t.Fatalf("retains after Close %d, want %d", retains(), before)
	}
}

// TestMockContextOnEveryThread clears the calling thread's context before
// each call; the mock refuses context-bound calls without one (201).
func TestMockContextOnEveryThread(t *testing.T) {
	d := openMock(t, nil)
	gputest.AllocFreeOnFreshThreads(t, d, 8, 50, func() { dl.Call(mockCtl.clearCtx) })
}

var kernelRuns atomic.Int32

func TestMockKernels(t *testing.T) {
	d := openMock(t, nil)
	compiles := func() int { return int(dl.Call(mockCtl.compiles)) }
	src := testSource()
	// A cache key of its own, apart from the GPU tests' and from earlier
	// runs of this test (-count).
	src.Name = "mock-vadd"
	src.Text += fmt.Sprintf("\n// mock run %d\n", kernelRuns.Add(1))
	before := compiles()
	gputest.VectorAdd(t, d, src, 1000)
	if compiles() != before+1 {
		t.Fatalf("NVRTC compiled %d times, want 1", compiles()-before)
	}
	gputest.VectorAdd(t, d, src, 10)
	if compiles() != before+1 {
		t.Fatal("a second ModuleLoad of the same source compiled again")
	}
	code, _, err := gpulib.Programs.Get(d.nv.CodeKey("sm_90", "cubin", src.Text, compileOptions("sm_90")), nil)
	if err != nil || !strings.HasPrefix(string(code), "MOCKCUBIN sm_90") {
		t.Fatalf("cached code %q, %v (want CUBIN built for the device's own arch)", code, err)
	}
}

func TestMockPTXFallback(t *testing.T) {
	missing := loadNVRTC(dl.SearchSpec{Name: "libnvrtc", Sonames: []string{"libnvrtc.so.13"}, Dirs: []string{t.TempDir()}, SkipLoaderPath: true})
	if missing.Available() {
		t.Fatal("NVRTC found in an empty folder")
	}
	d := openMock(t, missing)
	if libs := d.Libraries(); libs[1].Loaded != "" || len(libs[1].Tried) != 1 {
		t.Fatalf("libnvrtc record %+v", libs[1])
	}
	src := &hip.KernelSource{Name: "mock-ptx", Text: testKernels, PTX: "//MOCKPTX compute_52\n.entry vadd\n"}
	gputest.VectorAdd(t, d, src, 100)

	_, err := d.ModuleLoad(&hip.KernelSource{Name: "no-ptx", Text: testKernels})
	wantCode(t, err, hip.ErrNotSupported, "no NVRTC and no PTX")
	for _, want := range []string{`"no-ptx"`, "NVRTC is unavailable", "libnvrtc.so.13", "no precompiled PTX"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
	_, err = d.ModuleLoad(&hip.KernelSource{Name: "empty"})
	wantCode(t, err, hip.ErrInvalidValue, "empty source")
	if !strings.Contains(err.Error(), `"empty" has neither text nor PTX`) {
		t.Fatalf("message %q", err)
	}
}

func TestMockHostFuncLaunchFailureForgetsTicket(t *testing.T) {
	gputest.HostFuncLaunchFailureForgetsTicket(t, kit(openMock(t, nil)))
}

// TestMockEndCaptureFromAnotherThread: CUDA answers 908 and tears the
// capture down, so the host function it recorded loses its ticket.
func TestMockEndCaptureFromAnotherThread(t *testing.T) {
	if st := gputest.EndCaptureFromAnotherThread(t, kit(openMock(t, nil))); st != hip.CaptureStatusNone {
		t.Fatalf("stream status after a wrong-thread EndCapture %v, want none", st)
	}
}

var cubinRuns atomic.Int32

// A source's precompiled cubin for the device's exact architecture is
// loaded as it is, without NVRTC; a cubin for another architecture, one
// the driver refuses, or any with MIOTOOL_CUBIN=off leaves the source to
// NVRTC. (Each case's text is new, so NVRTC's process-wide cache cannot
// hide a compile.)
func TestMockCubins(t *testing.T) {
	compiles := func() int { return int(dl.Call(mockCtl.compiles)) }
	// The mock driver reads an image up to its NUL, and finds kernels by
	// name in it.
	cubin := []byte("MOCKCUBIN precompiled vadd inc\x00")
	for _, tt := range []struct {
		name     string
		cubins   map[string][]byte
		off      bool
		compiled int
	}{
		{"for the device's architecture", map[string][]byte{"sm_90": cubin}, false, 0},
		{"for another architecture only", map[string][]byte{"sm_80": cubin}, false, 1},
		{"refused by the driver", map[string][]byte{"sm_90": []byte("not an image\x00")}, false, 1},
		{"switched off", map[string][]byte{"sm_90": cubin}, true, 1},
		{"none", nil, false, 1},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if tt.off {
				t.Setenv(EnvCubin, "off")
			}
			d := openMock(t, nil)
			src := testSource()
			src.Name = "mock-cubin"
			src.Text += fmt.Sprintf("\n// cubin run %d\n", cubinRuns.Add(1))
			src.Cubins = tt.cubins
			before := compiles()
			gputest.VectorAdd(t, d, src, 100)
			if got := compiles() - before; got != tt.compiled {
				t.Fatalf("NVRTC compiled %d times, want %d", got, tt.compiled)
			}
		})
	}
}

// A cubin whose sidecar records another source text is never handed to the
// backend: with no NVRTC the source's PTX is loaded instead. Had the stale
// cubin been loaded, its missing kernel would fail the launch.
func TestMockStaleCubinLoadsThePTX(t *testing.T) {
	const text = testKernels
	stale := []byte("MOCKCUBIN stale, without the kernels\x00")
	side := hip.CubinSidecarHeader + "\narch: sm_90\nsource: k.cu sha256 " + hip.SourceSHA256(text+"// an older edit\n") +
		"\nptx: k.ptx absent\ncubin: k.sm_90.cubin sha256 " + fmt.Sprintf("%x", sha256.Sum256(stale)) + "\n"
	files := fstest.MapFS{"k.sm_90.cubin": {Data: stale}, "k.sm_90.cubin.txt": {Data: []byte(side)}}
	cubins, checks := hip.MatchingCubins(files, "k.cu", text)
	if len(cubins) != 0 || len(checks) != 1 || !strings.Contains(checks[0].Problem, "records source") {
		t.Fatalf("a stale cubin was taken: cubins %d, checks %+v", len(cubins), checks)
	}
	missing := loadNVRTC(dl.SearchSpec{Name: "libnvrtc", Sonames: []string{"libnvrtc.so.13"}, Dirs: []string{t.TempDir()}, SkipLoaderPath: true})
	d := openMock(t, missing)
	src := &hip.KernelSource{Name: "mock-stale-cubin", Text: text, PTX: "//MOCKPTX compute_52\n.entry vadd\n", Cubins: cubins}
	gputest.VectorAdd(t, d, src, 100)
}
