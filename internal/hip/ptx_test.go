package hip

import "testing"

func TestMatchingPTX(t *testing.T) {
	const text = "extern \"C\" __global__ void k() {}\n"
	good := PTXHeader("k.cu", SourceSHA256(text), "13.0", "compute_75") + "\n.version 9.0\n"
	for _, tt := range []struct {
		name, file, text, ptx string
		want                  bool
	}{
		{"matches", "k.cu", text, good, true},
		{"source changed", "k.cu", text + "// edit\n", good, false},
		{"other file", "other.cu", text, good, false},
		{"placeholder", "k.cu", text, "// miotool: k.cu not generated yet\n", false},
		{"empty", "k.cu", text, "", false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := MatchingPTX(tt.file, tt.text, tt.ptx); (got != "") != tt.want || (tt.want && got != tt.ptx) {
				t.Fatalf("MatchingPTX = %q, want match %v", got, tt.want)
			}
		})
	}
}
