package amd

import (
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"unsafe"

	"miotool/internal/dl"
	"miotool/internal/hip"
	"miotool/internal/hip/gpulib"
	"miotool/internal/hip/gpulib/gputest"
)

// The stand-in tests run the whole backend against testdata/mockhip.c and
// mockhiprtc.c, built here with gcc into <tmp>/lib as libamdhip64.so.7 and
// libhiprtc.so.7 (the layout of a ROCm install), so that binding, device
// selection, argument passing, host functions called from a foreign thread,
// the capture bookkeeping and the error mapping are exercised without a
// GPU. They skip without gcc.

var mockCtl struct {
	setDevices, setInit, requireDevice, resetThreadDevice, setDeviceCalls uintptr
	setLegacy, setArch, propsLayout, failNext, lastBeginMode              uintptr
	lastInstantiateFlags, eventsTID, hostCalls, lastLaunch, launchSize    uintptr
	compiles, lastOptions, setRuntimeVersion                              uintptr
}

var standIns = gputest.StandIns{Libs: []gputest.StandIn{
	{Source: "testdata/mockhip.c", Path: "lib/libamdhip64.so.7", Controls: []dl.Symbol{
		{Name: "mock_set_device_count", Addr: &mockCtl.setDevices},
		{Name: "mock_set_init_result", Addr: &mockCtl.setInit},
		{Name: "mock_set_runtime_version", Addr: &mockCtl.setRuntimeVersion},
		{Name: "mock_require_device", Addr: &mockCtl.requireDevice},
		{Name: "mock_reset_thread_device", Addr: &mockCtl.resetThreadDevice},
		{Name: "mock_set_device_calls", Addr: &mockCtl.setDeviceCalls},
		{Name: "mock_set_legacy_invalidated", Addr: &mockCtl.setLegacy},
		{Name: "mock_set_arch", Addr: &mockCtl.setArch},
		{Name: "mock_props_layout", Addr: &mockCtl.propsLayout},
		{Name: "mock_fail_next", Addr: &mockCtl.failNext},
		{Name: "mock_last_begin_mode", Addr: &mockCtl.lastBeginMode},
		{Name: "mock_last_instantiate_flags", Addr: &mockCtl.lastInstantiateFlags},
		{Name: "mock_events_tid", Addr: &mockCtl.eventsTID},
		{Name: "mock_host_calls", Addr: &mockCtl.hostCalls},
		{Name: "mock_last_launch", Addr: &mockCtl.lastLaunch},
		{Name: "mock_launch_record_size", Addr: &mockCtl.launchSize},
	}},
	{Source: "testdata/mockhiprtc.c", Path: "lib/libhiprtc.so.7", Controls: []dl.Symbol{
		{Name: "mock_hiprtc_compiles", Addr: &mockCtl.compiles},
		{Name: "mock_hiprtc_last_options", Addr: &mockCtl.lastOptions},
	}},
}}

func mockRuntimeSpec() dl.SearchSpec { return standIns.Spec(0, "libamdhip64") }
func mockHIPRTCSpec() dl.SearchSpec  { return standIns.Spec(1, "libhiprtc") }

// Controls of the stand-in.
func mockCall(fn uintptr, args ...uintptr) int { return int(dl.Call(fn, args...)) }

func failNext(cFunc string, code int) {
	name := dl.CString(cFunc)
	dl.Call(mockCtl.failNext, uintptr(unsafe.Pointer(&name[0])), uintptr(code))
}

// openMock opens a device of the stand-in runtime, with the stand-in hiprtc
// unless rtc is given, and closes it when the test ends.
func openMock(t testing.TB, ordinal int, rtc *hiprtcLib) *device {
	t.Helper()
	standIns.Require(t)
	rt, err := loadRuntime(mockRuntimeSpec())
	if err != nil {
		t.Fatalf("loading the stand-in runtime: %v", err)
	}
	if rtc == nil {
		rtc = loadHIPRTC(mockHIPRTCSpec())
		if !rtc.Available() {
			t.Fatalf("stand-in hiprtc: %v", rtc.Err)
		}
	}
	d, err := openDevice(hip.OpenOptions{Ordinal: ordinal}, rt, rtc)
	if err != nil {
		t.Fatalf("openDevice: %v", err)
	}
	t.Cleanup(func() { d.Close() })
	return d
}

func TestMockOpenPropsLibraries(t *testing.T) {
	d := openMock(t, 0, nil)
	p := d.Props()
	want := hip.Props{Backend: "hip", Name: "Mock AMD GPU 0", Arch: "gfx942", ComputeUnits: 304, WarpSize: 64,
		ClockKHz: 2100000, TotalMemory: 206158430208, RuntimeVersion: "7.1.51234", DriverVersion: "7.1.51234"}
	if p != want {
		t.Fatalf("props\n got %+v\nwant %+v", p, want)
	}
	if d.gcnArch != "gfx942:sramecc+:xnack-" {
		t.Fatalf("gcnArchName %q", d.gcnArch)
	}
	if d.Dialect() != hip.DialectHIP {
		t.Fatal("dialect")
	}
	libs := d.Libraries()
	if len(libs) != 2 || libs[0].Name != "libamdhip64" || libs[0].Loaded != standIns.Path(0) || libs[0].Version != "7.1.51234" {
		t.Fatalf("libamdhip64 record %+v", libs)
	}
	if libs[1].Name != "libhiprtc" || libs[1].Loaded != standIns.Path(1) || libs[1].Version != "7.1" {
		t.Fatalf("libhiprtc record %+v", libs[1])
	}
}

// TestMockPropsLayout checks the backend's gcnArchName offset against the C
// compiler's for the header's field list.
func TestMockPropsLayout(t *testing.T) {
	standIns.Require(t)
	var off, size uintptr
	dl.Call(mockCtl.propsLayout, uintptr(unsafe.Pointer(&off)), uintptr(unsafe.Pointer(&size)))
	if off != propsGCNArchNameOffset || size != propsStructSize || propsBufferSize < size {
		t.Fatalf("C says gcnArchName at %d of %d bytes; the backend reads %d of %d (buffer %d)",
			off, size, propsGCNArchNameOffset, propsStructSize, propsBufferSize)
	}
}

func TestMockArchitecture(t *testing.T) {
	standIns.Require(t)
	setArch := func(name string, shift int) {
		c := dl.CString(name)
		dl.Call(mockCtl.setArch, uintptr(unsafe.Pointer(&c[0])), uintptr(shift))
	}
	t.Cleanup(func() { setArch("gfx942:sramecc+:xnack-", 0) })
	tests := []struct {
		name      string
		gcn       string
		shift     int    // where a changed layout puts the name
		failProps int    // hipGetDevicePropertiesR0600 fails with this
		wantArch  string // "" when unknown
		wantWhy   string
	}{
		{"plain", "gfx90a", 0, 0, "gfx90a", ""},
		{"features", "gfx1100:xnack-", 0, 0, "gfx1100", ""},
		{"moved field", "gfx950:sramecc+:xnack-", -600, 0, "gfx950", ""},
		{"not an arch", "sm_90", 0, 0, "", "no gcnArchName"},
		{"call fails", "gfx942", 0, 1, "", "hipGetDeviceProperties: hipErrorInvalidValue (1)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			setArch(tt.gcn, tt.shift)
			if tt.failProps != 0 {
				failNext("hipGetDevicePropertiesR0600", tt.failProps)
			}
			d := openMock(t, 0, nil)
			if got := d.Props().Arch; got != tt.wantArch {
				t.Fatalf("Arch %q, want %q", got, tt.wantArch)
			}
			if tt.wantArch != "" {
				return
			}
			_, err := d.ModuleLoad(testSource())
			wantCode(t, err, hip.ErrNotSupported, "ModuleLoad on a device of unknown architecture")
			if !strings.Contains(err.Error(), "architecture is unknown") || !strings.Contains(err.Error(), tt.wantWhy) {
				t.Fatalf("message %q lacks %q", err, tt.wantWhy)
			}
		})
	}
}

func TestMockOpenFailures(t *testing.T) {
	standIns.Require(t)
	setInit := func(r int) { mockCall(mockCtl.setInit, uintptr(r)) }
	setDevices := func(n int) { mockCall(mockCtl.setDevices, uintptr(n)) }
	t.Cleanup(func() { setInit(0); setDevices(1) })
	var ue *hip.UnavailableError

	setInit(100)
	_, err := loadRuntime(mockRuntimeSpec())
	if !errors.As(err, &ue) || !strings.Contains(ue.Reason, "hipInit: hipErrorNoDevice (100)") || !strings.Contains(ue.Reason, standIns.Path(0)) {
		t.Fatalf("hipInit failing with 100: %v", err)
	}
	setInit(0)

	rt, err := loadRuntime(mockRuntimeSpec())
	must(t, err)
	rtc := loadHIPRTC(dl.SearchSpec{Name: "libhiprtc", Sonames: []string{"libhiprtc.so.7"}, Dirs: []string{t.TempDir()}, SkipLoaderPath: true})
	for _, tt := range []struct {
		name    string
		devices int
		ordinal int
		setFail string
		want    string
	}{
		{"no device", 0, 0, "", "hipGetDeviceCount: hipErrorNoDevice (100)"},
		{"ordinal too large", 2, 2, "", "device ordinal 2 is out of range: 2 HIP device(s) present"},
		{"negative ordinal", 2, -1, "", "device ordinal -1 is out of range"},
		{"set device fails", 1, 0, "hipSetDevice", "hipSetDevice: hipErrorInvalidDevice (101)"},
	} {
		setDevices(tt.devices)
		if tt.setFail != "" {
			failNext(tt.setFail, 101)
		}
		_, err := openDevice(hip.OpenOptions{Ordinal: tt.ordinal}, rt, rtc)
		if !errors.As(err, &ue) || ue.Backend != "hip" || !strings.Contains(ue.Reason, tt.want) {
			t.Errorf("%s: %v, want a reason containing %q", tt.name, err, tt.want)
			continue
		}
		if len(ue.Libraries) != 2 || ue.Libraries[0].Loaded != standIns.Path(0) || ue.Libraries[1].Name != "libhiprtc" {
			t.Errorf("%s: the error should carry both library records: %+v", tt.name, ue.Libraries)
		}
	}
	setDevices(1)

	// A library without HIP's symbols is refused by the first one missing.
	_, err = loadRuntime(dl.SearchSpec{Name: "libamdhip64", Sonames: []string{filepath.Base(standIns.Path(1))}, Dirs: []string{filepath.Dir(standIns.Path(1))}, SkipLoaderPath: true})
	if !errors.As(err, &ue) || !strings.Contains(ue.Reason, "has no symbol hipInit") || !strings.Contains(ue.Reason, "older than 6.0") {
		t.Fatalf("wrong library: %v", err)
	}
}

// TestMockSearchThroughROCmPath finds both libraries the way Open does,
// through $ROCM_PATH/lib after the loader's own search.
func TestMockSearchThroughROCmPath(t *testing.T) {
	standIns.Require(t)
	t.Setenv(EnvROCmPath, standIns.Dir())
	rt, err := loadRuntime(runtimeSearch())
	if err != nil {
		t.Fatalf("loading through %s: %v", EnvROCmPath, err)
	}
	var tried []string
	for _, a := range rt.Lib.Tried {
		tried = append(tried, a.Path)
	}
	want := []string{"libamdhip64.so.7", "libamdhip64.so.6", standIns.Path(0)}
	if len(tried) != 3 || tried[0] != want[0] || tried[1] != want[1] || tried[2] != want[2] || rt.Lib.Loaded != standIns.Path(0) {
		t.Fatalf("attempts %q (loaded %q), want %q", tried, rt.Lib.Loaded, want)
	}
	if rt.Lib.Tried[0].Err == "" || rt.Lib.Tried[2].Err != "" {
		t.Fatalf("attempt records %+v", rt.Lib.Tried)
	}
	rtc := loadHIPRTC(hiprtcSearch(rt.Lib.Loaded))
	if !rtc.Available() || rtc.Lib.Loaded != standIns.Path(1) || rtc.Version != "7.1" {
		t.Fatalf("hiprtc beside the runtime: %+v %v", rtc.Lib, rtc.Err)
	}
	if last := rtc.Lib.Tried[len(rtc.Lib.Tried)-1]; last.Path != standIns.Path(1) || len(rtc.Lib.Tried) != 3 {
		t.Fatalf("hiprtc attempts %+v", rtc.Lib.Tried)
	}
}

// TestMockDeviceOnEveryThread opens device 1 of two; the stand-in refuses
// device-bound calls from a thread whose current device is another (101),
// and the test moves each thread back to device 0 before every call.
func TestMockDeviceOnEveryThread(t *testing.T) {
	standIns.Require(t)
	mockCall(mockCtl.setDevices, 2)
	t.Cleanup(func() { mockCall(mockCtl.requireDevice, ^uintptr(0)); mockCall(mockCtl.setDevices, 1) })
	d := openMock(t, 1, nil)
	if d.Props().Name != "Mock AMD GPU 1" || d.Props().Ordinal != 1 {
		t.Fatalf("props of device 1: %+v", d.Props())
	}
	mockCall(mockCtl.requireDevice, 1)

	// The stand-in's check bites: a raw call from device 0 is refused.
	gputest.OnLockedThread(t, func() {
		var p uintptr
		mockCall(mockCtl.resetThreadDevice)
		if st := dl.Call(d.rt.Funcs.Malloc, uintptr(unsafe.Pointer(&p)), 64); st != 101 {
			t.Errorf("a raw hipMalloc on device 0 returned %d, want 101", st)
		}
	})

	calls := mockCall(mockCtl.setDeviceCalls)
	const workers, iters = 8, 50
	gputest.AllocFreeOnFreshThreads(t, d, workers, iters, func() { mockCall(mockCtl.resetThreadDevice) })
	if got := mockCall(mockCtl.setDeviceCalls) - calls; got != 2*workers*iters {
		t.Fatalf("hipSetDevice ran %d times for %d calls", got, 2*workers*iters)
	}
}

func TestMockScenarios(t *testing.T) { gputest.Run(t, kit(openMock(t, 0, nil))) }

var kernelRuns atomic.Int32

func TestMockKernels(t *testing.T) {
	d := openMock(t, 0, nil)
	compiles := func() int { return mockCall(mockCtl.compiles) }
	src := testSource()
	// A cache key of its own, apart from the GPU tests' and from earlier
	// runs of this test (-count).
	src.Name = "mock-vadd"
	src.Text += fmt.Sprintf("\n// stand-in run %d\n", kernelRuns.Add(1))
	before := compiles()
	gputest.VectorAdd(t, d, src, 1000)
	if compiles() != before+1 {
		t.Fatalf("hiprtc compiled %d times, want 1", compiles()-before)
	}
	if opts := dl.GoString(dl.CallPtr(mockCtl.lastOptions)); opts != "--offload-arch=gfx942 -O3" {
		t.Fatalf("hiprtc options %q", opts)
	}
	gputest.VectorAdd(t, d, src, 10)
	if compiles() != before+1 {
		t.Fatal("a second ModuleLoad of the same source compiled again")
	}
	key := d.rtc.CodeKey("gfx942", "code", src.Text, compileOptions("gfx942"))
	code, _, err := gpulib.Programs.Get(key, nil)
	if err != nil || !strings.HasPrefix(string(code), "MOCKCO gfx942\n") || !strings.Contains(key.Compiler, standIns.Path(1)) {
		t.Fatalf("cached code %q, %v under key %+v (want a code object built for the base arch)", code, err, key)
	}

	_, err = d.ModuleLoad(&hip.KernelSource{Name: "ice", Text: "// mock: internal error\n"})
	wantCode(t, err, hip.ErrNotSupported, "a compiler that fails on its own")
	if !strings.Contains(err.Error(), "HIPRTC_ERROR_INTERNAL_ERROR") || !strings.Contains(err.Error(), `"ice"`) {
		t.Fatalf("message %q", err)
	}
}

// launchRecord mirrors the stand-in's struct launch_record.
type launchRecord struct {
	Grid, Block [3]uint32
	Shared      uint32
	Kernel      int32
	Stream      uint64
	NArgs, _    int32
	Args        [8]uint64
}

// TestMockLaunchArguments checks what hipModuleLaunchKernel receives: the
// shape, shared memory and stream, and each argument read at its own size.
func TestMockLaunchArguments(t *testing.T) {
	d := openMock(t, 0, nil)
	if size := dl.CallPtr(mockCtl.launchSize); size != unsafe.Sizeof(launchRecord{}) {
		t.Fatalf("launch record is %d bytes in C, %d in Go", size, unsafe.Sizeof(launchRecord{}))
	}
	f := gputest.LoadFunc(t, d, testSource(), "probe")
	s := gputest.NewStream(t, d)
	ptr := hip.DevPtr(0x7f00deadbe00)
	grid, block := hip.Dim3{X: 3, Y: 2, Z: 5}, hip.Dim3{X: 64, Y: 4, Z: 1}
	must(t, d.LaunchKernel(f, grid, block, 1024, s, ptr, int32(-5), uint32(0xdeadbeef), int64(-1<<40), uint64(1<<63), float32(1.5), float64(-2.25)))
	var rec launchRecord
	dl.Call(mockCtl.lastLaunch, uintptr(unsafe.Pointer(&rec)))
	want := launchRecord{
		Grid: [3]uint32{3, 2, 5}, Block: [3]uint32{64, 4, 1}, Shared: 1024, Kernel: 3, Stream: uint64(s), NArgs: 7,
		Args: [8]uint64{uint64(ptr), 0xfffffffb, 0xdeadbeef, uint64(0xffffff0000000000), 1 << 63,
			uint64(math.Float32bits(1.5)), math.Float64bits(-2.25)},
	}
	if rec != want {
		t.Fatalf("launch\n got %+v\nwant %+v", rec, want)
	}
}

func TestMockNoHIPRTC(t *testing.T) {
	missing := loadHIPRTC(dl.SearchSpec{Name: "libhiprtc", Sonames: []string{"libhiprtc.so.7"}, Dirs: []string{t.TempDir()}, SkipLoaderPath: true})
	if missing.Available() {
		t.Fatal("hiprtc found in an empty folder")
	}
	d := openMock(t, 0, missing)
	if libs := d.Libraries(); libs[1].Loaded != "" || len(libs[1].Tried) != 1 {
		t.Fatalf("libhiprtc record %+v", libs[1])
	}
	_, err := d.ModuleLoad(testSource())
	wantCode(t, err, hip.ErrNotSupported, "no hiprtc")
	for _, want := range []string{`"hip-test"`, "hiprtc is unavailable", "libhiprtc.so.7"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
	gputest.Memory(t, kit(d)) // the rest of the device works without a compiler
}

// TestMockHostFunctions checks order and that every host function ran on
// the stand-in's own events thread, which the Go runtime did not create.
func TestMockHostFunctions(t *testing.T) {
	d := openMock(t, 0, nil)
	calls := mockCall(mockCtl.hostCalls)
	tids := gputest.HostFuncOrder(t, kit(d))
	events := mockCall(mockCtl.eventsTID)
	if events == 0 || events == syscall.Gettid() {
		t.Fatalf("events thread %d (test thread %d)", events, syscall.Gettid())
	}
	for i, tid := range tids {
		if tid != events {
			t.Fatalf("host function %d ran on thread %d, not the events thread %d", i, tid, events)
		}
	}
	if got := mockCall(mockCtl.hostCalls) - calls; got != len(tids)+1 {
		t.Fatalf("the stand-in ran %d host functions, want %d", got, len(tids)+1)
	}
}

func TestMockCaptureReplay(t *testing.T) {
	d := openMock(t, 0, nil)
	for _, mode := range hip.CaptureModes {
		t.Run(mode.String(), func(t *testing.T) {
			gputest.CaptureReplay(t, kit(d), mode)
			if got := mockCall(mockCtl.lastBeginMode); got != int(mode) {
				t.Fatalf("hipStreamBeginCapture received mode %d, want %d", got, int(mode))
			}
			if flags := dl.CallPtr(mockCtl.lastInstantiateFlags); flags != 0 {
				t.Fatalf("hipGraphInstantiateWithFlags received flags %#x", flags)
			}
		})
	}
	// A refused mode never reaches the runtime.
	s := gputest.NewStream(t, d)
	before := mockCall(mockCtl.lastBeginMode)
	wantCode(t, d.StreamBeginCapture(s, 3), hip.ErrInvalidValue, "mode 3")
	if mockCall(mockCtl.lastBeginMode) != before {
		t.Fatal("a refused mode reached hipStreamBeginCapture")
	}
}

// TestMockGlobalCaptureRefusal runs the refusal cells against both HIP
// behaviours after a failed capture: the stream back to none (ROCm with
// PR 6509) and left invalidated (before it).
func TestMockGlobalCaptureRefusal(t *testing.T) {
	d := openMock(t, 0, nil)
	for _, tt := range []struct {
		legacy uintptr
		want   hip.CaptureStatus
	}{{0, hip.CaptureStatusNone}, {1, hip.CaptureStatusInvalidated}} {
		t.Run(fmt.Sprintf("legacy=%d", tt.legacy), func(t *testing.T) {
			mockCall(mockCtl.setLegacy, tt.legacy)
			t.Cleanup(func() { mockCall(mockCtl.setLegacy, 0) })
			if got := gputest.GlobalCaptureRefusal(t, kit(d)); got != tt.want {
				t.Fatalf("stream state after the failed capture %v, want %v", got, tt.want)
			}
		})
	}
}

func TestMockHostFuncLaunchFailureForgetsTicket(t *testing.T) {
	gputest.HostFuncLaunchFailureForgetsTicket(t, kit(openMock(t, 0, nil)))
}

// TestMockEndCaptureFromAnotherThread: HIP answers 908 and leaves the
// capture active for its own thread, so the host function recorded so far
// must keep its ticket and fire on replay.
func TestMockEndCaptureFromAnotherThread(t *testing.T) {
	if st := gputest.EndCaptureFromAnotherThread(t, kit(openMock(t, 0, nil))); st != hip.CaptureStatusActive {
		t.Fatalf("stream status after a wrong-thread EndCapture %v, want active", st)
	}
}

// TestMockErrorCodes makes chosen calls return chosen codes and checks how
// each is named: by the code table, by hipGetErrorName for codes the table
// lacks, and by the number alone when neither knows it.
func TestMockErrorCodes(t *testing.T) {
	d := openMock(t, 0, nil)
	s := gputest.NewStream(t, d)
	e, err := d.EventCreate(hip.EventDefault)
	must(t, err)
	t.Cleanup(func() { d.EventDestroy(e) })
	p := gputest.Alloc(t, d, 64)
	buf := make([]byte, 16)
	tests := []struct {
		cFunc string
		code  int
		call  func() error
		want  hip.Code
		text  string
	}{
		{"hipStreamQuery", 900, func() error { return d.StreamQuery(s) }, hip.ErrStreamCaptureUnsupported, "hipStreamQuery: hipErrorStreamCaptureUnsupported (900)"},
		{"hipStreamEndCapture", 901, func() error { _, err := d.StreamEndCapture(s); return err }, hip.ErrStreamCaptureInvalidated, "hipStreamEndCapture: hipErrorStreamCaptureInvalidated (901)"},
		{"hipStreamSynchronize", 906, func() error { return d.StreamSynchronize(s) }, hip.ErrStreamCaptureImplicit, "hipStreamSynchronize: hipErrorStreamCaptureImplicit (906)"},
		{"hipEventQuery", 907, func() error { return d.EventQuery(e) }, hip.ErrCapturedEvent, "hipEventQuery: hipErrorCapturedEvent (907)"},
		{"hipStreamEndCapture", 908, func() error { _, err := d.StreamEndCapture(s); return err }, hip.ErrStreamCaptureWrongThread, "hipStreamEndCapture: hipErrorStreamCaptureWrongThread (908)"},
		{"hipEventQuery", 600, func() error { return d.EventQuery(e) }, hip.ErrNotReady, "hipEventQuery: hipErrorNotReady (600)"},
		{"hipMalloc", 2, func() error { _, err := d.Malloc(8); return err }, hip.ErrOutOfMemory, "hipMalloc: hipErrorOutOfMemory (2)"},
		{"hipStreamCreateWithFlags", 1, func() error { _, err := d.StreamCreate(0); return err }, hip.ErrInvalidValue, "hipStreamCreateWithFlags: hipErrorInvalidValue (1)"},
		{"hipEventCreateWithFlags", 1, func() error { _, err := d.EventCreate(0); return err }, hip.ErrInvalidValue, "hipEventCreateWithFlags: hipErrorInvalidValue (1)"},
		{"hipGraphInstantiateWithFlags", 1, func() error { _, err := d.GraphInstantiate(1); return err }, hip.ErrInvalidValue, "hipGraphInstantiateWithFlags: hipErrorInvalidValue (1)"},
		{"hipMemcpyDtoH", 700, func() error { return d.MemcpyDtoH(buf, p) }, hip.ErrIllegalAddress, "hipMemcpyDtoH: hipErrorIllegalAddress (700)"},
		{"hipMemset", 906, func() error { return d.Memset(p, 0, 8) }, hip.ErrStreamCaptureImplicit, "hipMemset: hipErrorStreamCaptureImplicit (906)"},
		{"hipThreadExchangeStreamCaptureMode", 1, func() error { _, err := d.ThreadExchangeCaptureMode(0); return err }, hip.ErrInvalidValue, "hipThreadExchangeStreamCaptureMode: hipErrorInvalidValue (1)"},
		{"hipDeviceSynchronize", 1052, d.DeviceSynchronize, hip.Code(1052), "hipDeviceSynchronize: hipError(1052) (1052): hipErrorRuntimeMemory"},
		{"hipFree", 4242, func() error { return d.Free(0) }, hip.Code(4242), "hipFree: hipError(4242) (4242)"},
		{"hipSetDevice", 101, func() error { return d.StreamQuery(s) }, hip.ErrInvalidDevice, "hipStreamQuery: hipErrorInvalidDevice (101)"},
	}
	for _, tt := range tests {
		failNext(tt.cFunc, tt.code)
		err := tt.call()
		if hip.CodeOf(err) != tt.want || err.Error() != tt.text {
			t.Errorf("%s returning %d: got %q (code %d), want %q", tt.cFunc, tt.code, err, hip.CodeOf(err), tt.text)
		}
		var he *hip.Error
		if !errors.As(err, &he) || he.Dialect != hip.DialectHIP {
			t.Errorf("%s: not a HIP-dialect *hip.Error: %#v", tt.cFunc, err)
		}
	}
	if !hip.IsNotReady(d.rt.Status.Err("EventQuery", 600)) {
		t.Fatal("600 is not recognised as not-ready")
	}
}

// TestMockCloseWaitsForWork closes the device while a host function runs
// on the stand-in's events thread: Close returns only after it has, and
// every later call is refused as on a torn-down runtime.
func TestMockCloseWaitsForWork(t *testing.T) {
	gputest.CloseWaitsForWork(t, openMock(t, 0, nil), hip.ErrDeinitialized)
}
