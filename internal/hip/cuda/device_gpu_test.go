package cuda

import (
	"errors"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"miotool/internal/hip"
	"miotool/internal/hip/gpulib"
)

// The GPU tests run where libcuda.so.1 opens and device 0 exists; they
// skip elsewhere. One device is opened for all of them (a primary context
// costs a fraction of a second to create) and closed by TestMain.

var gpu struct {
	once sync.Once
	dev  *device
	err  error
}

func gpuDevice(t testing.TB) *device {
	t.Helper()
	gpu.once.Do(func() {
		d, err := Open(hip.OpenOptions{})
		if err != nil {
			gpu.err = err
			return
		}
		gpu.dev = d.(*device)
	})
	if gpu.err != nil {
		t.Skipf("no CUDA device: %v", gpu.err)
	}
	return gpu.dev
}

func closeGPU() {
	if gpu.dev != nil {
		gpu.dev.Close()
	}
}

func TestGPUPropsAndLibraries(t *testing.T) {
	d := gpuDevice(t)
	p := d.Props()
	t.Logf("device: %s; clock %d kHz, warp %d, memory %d bytes, driver %s", p, p.ClockKHz, p.WarpSize, p.TotalMemory, p.DriverVersion)
	if p.Backend != "cuda" || p.Name == "" || !regexp.MustCompile(`^sm_[0-9]{2,3}$`).MatchString(p.Arch) ||
		p.ComputeUnits <= 0 || p.WarpSize != 32 || p.TotalMemory == 0 || p.RuntimeVersion != "driver API" ||
		!regexp.MustCompile(`^[0-9]+\.[0-9]$`).MatchString(p.DriverVersion) {
		t.Fatalf("props %+v", p)
	}
	libs := d.Libraries()
	for _, l := range libs {
		t.Logf("library %s: loaded %q version %q tried %s", l.Name, l.Loaded, l.Version, gpulib.FormatAttempts(l.Tried))
	}
	if libs[0].Loaded == "" || libs[0].Version != p.DriverVersion {
		t.Fatalf("libcuda record %+v", libs[0])
	}
	if v, err := NVRTCVersion(); err != nil || v != libs[1].Version {
		t.Fatalf("NVRTCVersion = %q, %v; libnvrtc record %+v", v, err, libs[1])
	}
}

func TestGPUStreamsEvents(t *testing.T) {
	d := gpuDevice(t)
	spin := loadFunc(t, d, testSource(), "spin")
	s, s2 := newStream(t, d), newStream(t, d)
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
	waitClosed(t, done, "the host function behind StreamWaitEvent")
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

func TestGPUMemory(t *testing.T) { testMemory(t, gpuDevice(t)) }

func TestGPUVectorAdd(t *testing.T) {
	d := gpuDevice(t)
	hits, _ := gpulib.Programs.Stats()
	testVectorAdd(t, d, testSource(), 1<<20)
	testVectorAdd(t, d, testSource(), 1000)
	if h, _ := gpulib.Programs.Stats(); h <= hits {
		t.Fatal("the second ModuleLoad of one source did not hit the compile cache")
	}
	testModuleErrors(t, d)
}

func TestGPUPTXFallback(t *testing.T) {
	d := gpuDevice(t)
	ptx, err := CompilePTX(testSource(), d.Props().Arch)
	must(t, err)
	if !strings.Contains(ptx, ".entry vadd") || !strings.Contains(ptx, ".target") || strings.HasSuffix(ptx, "\x00") {
		t.Fatalf("PTX does not look right:\n%.400s", ptx)
	}
	noNVRTC := &nvrtcLib{err: errors.New("left out for the test")}
	d2, err := openDevice(hip.OpenOptions{}, d.drv, noNVRTC)
	must(t, err)
	defer d2.Close()
	testVectorAdd(t, d2, &hip.KernelSource{Name: "gpu-ptx", Text: testKernels, PTX: ptx}, 4096)
	_, err = d2.ModuleLoad(&hip.KernelSource{Name: "gpu-no-ptx", Text: testKernels})
	wantCode(t, err, hip.ErrNotSupported, "no NVRTC and no PTX")
}

// TestGPUContextOnFreshThreads detaches the context from the calling thread
// before each call, as on a thread that never called in.
func TestGPUContextOnFreshThreads(t *testing.T) {
	d := gpuDevice(t)
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			runtimeLock()
			defer runtimeUnlock()
			for range 20 {
				gpulib.Call(d.api.ctxSetCurrent, 0)
				p, err := d.Malloc(256)
				if err == nil {
					gpulib.Call(d.api.ctxSetCurrent, 0)
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

func TestGPUHostFunctions(t *testing.T) { testHostFuncOrder(t, gpuDevice(t)) }

func TestGPUCaptureReplay(t *testing.T) {
	d := gpuDevice(t)
	for _, mode := range hip.CaptureModes {
		t.Run(mode.String(), func(t *testing.T) { testCaptureReplay(t, d, mode) })
	}
}

func TestGPUThreadExchange(t *testing.T) { testThreadExchange(t, gpuDevice(t)) }

func TestGPUGlobalCaptureRefusal(t *testing.T) { testGlobalCaptureRefusal(t, gpuDevice(t)) }

func TestGPUTicketsClean(t *testing.T) {
	gpuDevice(t)
	if st := gpulib.HostFuncs.Stats(); st.Stale != 0 || st.Unknown != 0 || st.Panicked != 0 {
		t.Fatalf("trampoline saw stray tickets: %+v", st)
	}
}
