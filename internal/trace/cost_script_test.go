package trace

import (
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestTheCostScriptJudgesOnlyWhatItsIntervalShows holds
// scripts/paired-overhead.py, which writes the observer's cost into the
// GPU results, to its rule: "met" only when the ratio's whole 95% interval
// is within the target, "NOT MET" only when it is all above, and a noisy
// run whose median alone would pass says it did not decide.
func TestTheCostScriptJudgesOnlyWhatItsIntervalShows(t *testing.T) {
	python, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("no python3 on this machine")
	}
	script, err := filepath.Abs("../../scripts/paired-overhead.py")
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name         string
		ratio, noise float64
		pairs        int
		want         string
	}{
		{"well within", 1.01, 0.01, 40, "(target ≤ 1.05: met)"},
		{"well above", 1.20, 0.01, 40, "(target ≤ 1.05: NOT MET)"},
		// The median ratio is near 1.02, but runs vary by 10%: a dozen
		// pairs cannot tell it from 1.05.
		{"noisy", 1.02, 0.10, 12, "(target ≤ 1.05: not decided by 12 pairs)"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(7, 11))
			var b strings.Builder
			for range c.pairs {
				plain := 1.0 * (1 + c.noise*rng.NormFloat64())
				traced := c.ratio * (1 + c.noise*rng.NormFloat64())
				fmt.Fprintf(&b, "plain %.4f 0 800.0\ntraced %.4f 4 801.0\n", plain, traced)
			}
			times := filepath.Join(t.TempDir(), "times")
			if err := os.WriteFile(times, []byte(b.String()), 0o644); err != nil {
				t.Fatal(err)
			}
			out, err := exec.Command(python, script, times, "1.05").CombinedOutput()
			if err != nil {
				t.Fatalf("%s: %v\n%s", script, err, out)
			}
			lines := strings.Split(strings.TrimSpace(string(out)), "\n")
			summary := lines[len(lines)-1]
			if !strings.Contains(summary, c.want) {
				t.Errorf("summary %q, want it to say %q", summary, c.want)
			}
			// 801 ms against 800: a cost per launch of 0.1%, told apart
			// from the whole commands' ratio.
			if want := "the pairs' own loop ratio 1.001, 95% interval 1.001-1.001"; !strings.Contains(summary, want) {
				t.Errorf("summary %q, want it to say %q", summary, want)
			}
			if got := strings.Count(string(out), "\n| "); got != c.pairs+1 {
				t.Errorf("%d table rows, want a header and %d pairs:\n%s", got, c.pairs, out)
			}
		})
	}
}
