package conv

import (
	"testing"

	"miotool/internal/hip"
	"miotool/internal/testutil"
)

// The committed PTX must come from the committed kernels.cu: regenerate it
// with scripts/gen-ptx.sh on a machine with NVRTC after changing the source.
func TestCommittedPTXMatchesTheSource(t *testing.T) {
	testutil.CommittedPTX(t, "kernels.cu", kernelText(), kernelPTX(), Source().Kernels, Source().PTX)
}

func TestStalePTXIsNotUsed(t *testing.T) {
	if ptxFor(kernelText()+"// changed\n") != "" {
		t.Fatal("PTX generated from another source text was handed out")
	}
}

// Every committed cubin must come from the committed kernels.cu: after
// changing the source, run scripts/gen-cubin.sh on a machine with nvcc (or
// delete the cubins); a stale one would not be used anyway.
func TestCommittedCubinsMatchTheSource(t *testing.T) {
	cubins, checks := hip.MatchingCubins(kernelFiles, "kernels.cu", kernelText())
	if len(checks) == 0 {
		t.Skip("no cubin is committed beside kernels.cu (scripts/gen-cubin.sh makes them)")
	}
	for _, c := range checks {
		if c.Problem != "" {
			t.Errorf("%s: %s", c.File, c.Problem)
		}
	}
	for _, src := range []*hip.KernelSource{Source(), DirectSource()} {
		if len(src.Cubins) != len(cubins) {
			t.Errorf("%s carries %d cubins, want the %d committed", src.Name, len(src.Cubins), len(cubins))
		}
	}
}
