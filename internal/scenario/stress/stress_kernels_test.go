package stress

import (
	"testing"

	"miotool/internal/testutil"
)

// The committed PTX must come from the committed stress_kernels.cu:
// regenerate it with scripts/gen-ptx.sh on a machine with NVRTC after
// changing the source.
func TestCommittedStressPTXMatchesTheSource(t *testing.T) {
	testutil.CommittedPTX(t, "stress_kernels.cu", stressKernelText, stressKernelPTX, Source().Kernels, Source().PTX)
}
