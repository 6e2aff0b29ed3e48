package cuda

import (
	"errors"
	"regexp"
	"strings"
	"testing"
	"time"

	"miotool/internal/dl"
	"miotool/internal/hip"
	"miotool/internal/hip/gpulib"
	"miotool/internal/hip/gpulib/gputest"
)

// The GPU tests run where libcuda.so.1 opens and device 0 exists; they
// skip elsewhere. One device serves them all; TestMain closes it.
var gpu = gputest.GPU[*device]{Vendor: "CUDA", Open: Open}

func TestGPUPropsAndLibraries(t *testing.T) {
	d := gpu.Device(t)
	p := d.Props()
	t.Logf("device: %s; clock %d kHz, warp %d, memory %d bytes, driver %s", p, p.ClockKHz, p.WarpSize, p.TotalMemory, p.DriverVersion)
	if p.Backend != "cuda" || p.Name == "" || !regexp.MustCompile(`^sm_[0-9]{2,3}$`).MatchString(p.Arch) ||
		p.ComputeUnits <= 0 || p.WarpSize != 32 || p.TotalMemory == 0 || p.RuntimeVersion != "driver API" ||
		!regexp.MustCompile(`^[0-9]+\.[0-9]$`).MatchString(p.DriverVersion) {
		t.Fatalf("props %+v", p)
	}
	libs := gputest.LogLibraries(t, d)
	if libs[0].Loaded == "" || libs[0].Version != p.DriverVersion {
		t.Fatalf("libcuda record %+v", libs[0])
	}
	if v, err := NVRTCVersion(); err != nil || v != libs[1].Version {
		t.Fatalf("NVRTCVersion = %q, %v; libnvrtc record %+v", v, err, libs[1])
	}
}

// TestGPUScenarios runs the scenarios every backend shares.
func TestGPUScenarios(t *testing.T) { gputest.Run(t, kit(gpu.Device(t))) }

func TestGPUStreamsEvents(t *testing.T) {
	d := gpu.Device(t)
	spin := gputest.LoadFunc(t, d, testSource(), "spin")
	s, s2 := gputest.NewStream(t, d), gputest.NewStream(t, d)
	start, err := d.EventCreate(hip.EventDefault)
	must(t, err)
	defer d.EventDestroy(start)
	stop, err := d.EventCreate(hip.EventBlockingSync)
	must(t, err)
	defer d.EventDestroy(stop)

	const spinFor = 200 * time.Millisecond
	must(t, d.EventRecord(start, s))
	must(t, d.LaunchKernel(spin, hip.D1(1), hip.D1(1), 0, s, uint64(spinFor.Nanoseconds())))
	must(t, d.EventRecord(stop, s))
	if err := d.StreamQuery(s); !hip.IsNotReady(err) {
		t.Fatalf("StreamQuery during a %v kernel: %v, want NOT_READY", spinFor, err)
	}
	if err := d.EventQuery(stop); !hip.IsNotReady(err) {
		t.Fatalf("EventQuery before the kernel ends: %v, want NOT_READY", err)
	}
	must(t, d.StreamWaitEvent(s2, stop))
	done := make(chan struct{})
	must(t, d.LaunchHostFunc(s2, func() { close(done) }))
	must(t, d.EventSynchronize(stop))
	gputest.WaitClosed(t, done, "the host function behind StreamWaitEvent")
	must(t, d.StreamQuery(s))
	must(t, d.EventQuery(stop))
	ms, err := d.EventElapsedTime(start, stop)
	must(t, err)
	t.Logf("elapsed %.3f ms for a %v spin", ms, spinFor)
	if ms < float32(spinFor.Milliseconds())*0.9 || ms > 10000 {
		t.Fatalf("elapsed %.3f ms for a %v spin", ms, spinFor)
	}
	must(t, d.StreamSynchronize(s2))
	must(t, d.DeviceSynchronize())
}

func TestGPUPTXFallback(t *testing.T) {
	d := gpu.Device(t)
	ptx, err := CompilePTX(testSource(), d.Props().Arch)
	must(t, err)
	if !strings.Contains(ptx, ".entry vadd") || !strings.Contains(ptx, ".target") || strings.HasSuffix(ptx, "\x00") {
		t.Fatalf("PTX does not look right:\n%.400s", ptx)
	}
	noNVRTC := &nvrtcLib{Compiler: &gpulib.Compiler{Err: errors.New("left out for the test")}}
	d2, err := openDevice(hip.OpenOptions{}, d.drv, noNVRTC)
	must(t, err)
	defer d2.Close()
	gputest.VectorAdd(t, d2, &hip.KernelSource{Name: "gpu-ptx", Text: testKernels, PTX: ptx}, 4096)
	_, err = d2.ModuleLoad(&hip.KernelSource{Name: "gpu-no-ptx", Text: testKernels})
	wantCode(t, err, hip.ErrNotSupported, "no NVRTC and no PTX")
}

// TestGPUContextOnFreshThreads detaches the context from the calling thread
// before each call, as on a thread that never called in.
func TestGPUContextOnFreshThreads(t *testing.T) {
	d := gpu.Device(t)
	gputest.AllocFreeOnFreshThreads(t, d, 8, 20, func() { dl.Call(d.drv.Funcs.Select, 0) })
}

func TestGPUTicketsClean(t *testing.T) {
	gpu.Device(t)
	if st := gpulib.HostFuncs.Stats(); st.Stale != 0 || st.Unknown != 0 || st.Panicked != 0 {
		t.Fatalf("trampoline saw stray tickets: %+v", st)
	}
}
