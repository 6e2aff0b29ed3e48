package amd

import (
	"regexp"
	"testing"

	"miotool/internal/hip/gpulib"
	"miotool/internal/hip/gpulib/gputest"
)

// The GPU tests run where libamdhip64 opens and device 0 exists; they skip
// elsewhere. One device serves them all; TestMain closes it.
var gpu = gputest.GPU[*device]{Vendor: "HIP", Open: Open}

func TestGPUPropsAndLibraries(t *testing.T) {
	d := gpu.Device(t)
	p := d.Props()
	t.Logf("device: %s; gcnArchName %s, clock %d kHz, warp %d, memory %d bytes, runtime %s, driver %s",
		p, d.gcnArch, p.ClockKHz, p.WarpSize, p.TotalMemory, p.RuntimeVersion, p.DriverVersion)
	if p.Backend != "hip" || p.Name == "" || !regexp.MustCompile(`^gfx[0-9][0-9a-z]+$`).MatchString(p.Arch) ||
		p.ComputeUnits <= 0 || (p.WarpSize != 64 && p.WarpSize != 32) || p.TotalMemory == 0 ||
		!regexp.MustCompile(`^[0-9]+\.[0-9]+\.[0-9]+$`).MatchString(p.RuntimeVersion) {
		t.Fatalf("props %+v", p)
	}
	libs := gputest.LogLibraries(t, d)
	if libs[0].Loaded == "" || libs[0].Version != p.RuntimeVersion {
		t.Fatalf("libamdhip64 record %+v", libs[0])
	}
	if v, err := HIPRTCVersion(); err != nil || v != libs[1].Version {
		t.Fatalf("HIPRTCVersion = %q, %v; libhiprtc record %+v", v, err, libs[1])
	}
}

// TestGPUScenarios runs the scenarios every backend shares.
func TestGPUScenarios(t *testing.T) { gputest.Run(t, kit(gpu.Device(t))) }

func TestGPUTicketsClean(t *testing.T) {
	gpu.Device(t)
	if st := gpulib.HostFuncs.Stats(); st.Stale != 0 || st.Unknown != 0 || st.Panicked != 0 {
		t.Fatalf("trampoline saw stray tickets: %+v", st)
	}
}
