package repro

import (
	"strings"
	"testing"

	"miotool/internal/hip"
)

// The committed PTX must come from the committed stress_kernels.cu:
// regenerate it with scripts/gen-ptx.sh on a machine with NVRTC after
// changing the source.
func TestCommittedStressPTXMatchesTheSource(t *testing.T) {
	first, body, _ := strings.Cut(stressKernelPTX, "\n")
	if hip.MatchingPTX("stress_kernels.cu", stressKernelText, stressKernelPTX) == "" {
		t.Fatalf("internal/repro/stress_kernels.ptx was not generated from this stress_kernels.cu (sha256 %s); its header is %q: run scripts/gen-ptx.sh", hip.SourceSHA256(stressKernelText), first)
	}
	for _, k := range StressSource().Kernels {
		if !strings.Contains(body, ".entry "+k) {
			t.Errorf("stress_kernels.ptx has no entry %s", k)
		}
	}
	if StressSource().PTX == "" {
		t.Error("the stress source does not carry its PTX")
	}
}
