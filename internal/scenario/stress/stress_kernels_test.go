package stress

import (
	"testing"

	"miotool/internal/conv"
	"miotool/internal/hip"
	"miotool/internal/testutil"
)

// The committed PTX must come from the committed stress_kernels.cu:
// regenerate it with scripts/gen-ptx.sh on a machine with NVRTC after
// changing the source.
func TestCommittedStressPTXMatchesTheSource(t *testing.T) {
	testutil.CommittedPTX(t, "stress_kernels.cu", stressKernelText, stressKernelPTX, Source().Kernels, Source().PTX)
}

// Every committed cubin must come from the committed stress_kernels.cu:
// after changing the source, run scripts/gen-cubin.sh on a machine with
// nvcc (or delete the cubins); a stale one would not be used anyway.
func TestCommittedStressCubinsMatchTheSource(t *testing.T) {
	cubins, checks := hip.MatchingCubins(stressKernelFiles, "stress_kernels.cu", stressKernelText)
	if len(checks) == 0 {
		t.Skip("no cubin is committed beside stress_kernels.cu (scripts/gen-cubin.sh makes them)")
	}
	for _, c := range checks {
		if c.Problem != "" {
			t.Errorf("%s: %s", c.File, c.Problem)
		}
	}
	if len(Source().Cubins) != len(cubins) {
		t.Errorf("%s carries %d cubins, want the %d committed", Source().Name, len(Source().Cubins), len(cubins))
	}
	// The convolutions the scenario launches carry conv's own.
	if got, want := len(stressConvSource().Cubins), len(conv.DirectSource().Cubins); got != want {
		t.Errorf("the stress conv source carries %d cubins, conv's direct source %d", got, want)
	}
}
