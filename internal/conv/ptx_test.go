package conv

import (
	"testing"

	"miotool/internal/testutil"
)

// The committed PTX must come from the committed kernels.cu: regenerate it
// with scripts/gen-ptx.sh on a machine with NVRTC after changing the source.
func TestCommittedPTXMatchesTheSource(t *testing.T) {
	testutil.CommittedPTX(t, "kernels.cu", kernelText, kernelPTX, Source().Kernels, Source().PTX)
}

func TestStalePTXIsNotUsed(t *testing.T) {
	if ptxFor(kernelText+"// changed\n") != "" {
		t.Fatal("PTX generated from another source text was handed out")
	}
}
