package amd

import (
	"regexp"
	"sync"
	"testing"

	"miotool/internal/hip"
	"miotool/internal/hip/gpulib"
)

// The GPU tests run where libamdhip64 opens and device 0 exists; they skip
// elsewhere. One device is opened for all of them and closed by TestMain.

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
		t.Skipf("no HIP device: %v", gpu.err)
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
	t.Logf("device: %s; gcnArchName %s, clock %d kHz, warp %d, memory %d bytes, runtime %s, driver %s",
		p, d.gcnArch, p.ClockKHz, p.WarpSize, p.TotalMemory, p.RuntimeVersion, p.DriverVersion)
	if p.Backend != "hip" || p.Name == "" || !regexp.MustCompile(`^gfx[0-9][0-9a-z]+$`).MatchString(p.Arch) ||
		p.ComputeUnits <= 0 || (p.WarpSize != 64 && p.WarpSize != 32) || p.TotalMemory == 0 ||
		!regexp.MustCompile(`^[0-9]+\.[0-9]+\.[0-9]+$`).MatchString(p.RuntimeVersion) {
		t.Fatalf("props %+v", p)
	}
	libs := d.Libraries()
	for _, l := range libs {
		t.Logf("library %s: loaded %q version %q tried %s", l.Name, l.Loaded, l.Version, gpulib.FormatAttempts(l.Tried))
	}
	if libs[0].Loaded == "" || libs[0].Version != p.RuntimeVersion {
		t.Fatalf("libamdhip64 record %+v", libs[0])
	}
	if v, err := HIPRTCVersion(); err != nil || v != libs[1].Version {
		t.Fatalf("HIPRTCVersion = %q, %v; libhiprtc record %+v", v, err, libs[1])
	}
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

func TestGPUHostFunctions(t *testing.T) { testHostFuncOrder(t, gpuDevice(t)) }

func TestGPUCaptureReplay(t *testing.T) {
	d := gpuDevice(t)
	for _, mode := range hip.CaptureModes {
		t.Run(mode.String(), func(t *testing.T) { testCaptureReplay(t, d, mode) })
	}
}

func TestGPUThreadExchange(t *testing.T) { testThreadExchange(t, gpuDevice(t)) }

func TestGPUGlobalCaptureRefusal(t *testing.T) {
	st := testGlobalCaptureRefusal(t, gpuDevice(t))
	t.Logf("a stream after a failed capture reads %v", st)
}

func TestGPUTicketsClean(t *testing.T) {
	gpuDevice(t)
	if st := gpulib.HostFuncs.Stats(); st.Stale != 0 || st.Unknown != 0 || st.Panicked != 0 {
		t.Fatalf("trampoline saw stray tickets: %+v", st)
	}
}
