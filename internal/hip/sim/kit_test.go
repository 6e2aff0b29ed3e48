package sim_test

import (
	"testing"

	"miotool/internal/hip"
	"miotool/internal/hip/gpulib/gputest"
	"miotool/internal/hip/sim"
)

// The simulator runs the kit every backend runs, in both dialects: the
// scenarios hold it to what the GPU runtimes and their stand-ins do.
func TestKitScenarios(t *testing.T) {
	for _, dialect := range []hip.Dialect{hip.DialectCUDA, hip.DialectHIP} {
		t.Run(string(dialect), func(t *testing.T) {
			d := newDevice(t, dialect, 0)
			gputest.Run(t, gputest.Kit{
				Device: d,
				Source: func() *hip.KernelSource {
					return &hip.KernelSource{Name: "sim-test", Text: gputest.KernelText, Kernels: []string{"vadd", "inc"}, Twins: gputest.Twins()}
				},
				// The simulator ends a failed capture as CUDA and newer HIP do.
				AfterFailedCapture: func(t testing.TB, st hip.CaptureStatus) {
					if st != hip.CaptureStatusNone {
						t.Fatalf("stream status after the failed capture: %v, want none", st)
					}
				},
			})
		})
	}
}

func TestKitChecksOfEveryDevice(t *testing.T) {
	kit := func(d *sim.Device) gputest.Kit {
		return gputest.Kit{Device: d, Source: func() *hip.KernelSource {
			return &hip.KernelSource{Name: "sim-test", Text: gputest.KernelText, Kernels: []string{"vadd", "inc"}, Twins: gputest.Twins()}
		}}
	}
	t.Run("HostFuncLaunchFailureForgetsTicket", func(t *testing.T) {
		gputest.HostFuncLaunchFailureForgetsTicket(t, kit(newDevice(t, hip.DialectCUDA, 0)))
	})
	t.Run("AllocFreeOnFreshThreads", func(t *testing.T) {
		gputest.AllocFreeOnFreshThreads(t, newDevice(t, hip.DialectHIP, 0), 4, 20, func() {})
	})
	t.Run("CloseWaitsForWork", func(t *testing.T) {
		gputest.CloseWaitsForWork(t, newDevice(t, hip.DialectCUDA, 0), hip.ErrDeinitialized)
	})
}
