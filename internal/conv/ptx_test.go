package conv

import (
	"strings"
	"testing"

	"miotool/internal/hip"
)

// The committed PTX must come from the committed kernels.cu: regenerate it
// with scripts/gen-ptx.sh on a machine with NVRTC after changing the source.
func TestCommittedPTXMatchesTheSource(t *testing.T) {
	first, body, _ := strings.Cut(kernelPTX, "\n")
	if hip.MatchingPTX("kernels.cu", kernelText, kernelPTX) == "" {
		t.Fatalf("internal/conv/kernels.ptx was not generated from this kernels.cu (sha256 %s); its header is %q: run scripts/gen-ptx.sh", hip.SourceSHA256(kernelText), first)
	}
	for _, k := range Source().Kernels {
		if !strings.Contains(body, ".entry "+k) {
			t.Errorf("kernels.ptx has no entry %s", k)
		}
	}
	if Source().PTX == "" {
		t.Error("the source does not carry its PTX")
	}
}

func TestStalePTXIsNotUsed(t *testing.T) {
	if ptxFor(kernelText+"// changed\n") != "" {
		t.Fatal("PTX generated from another source text was handed out")
	}
}
