package report

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

// A check whose command pins a dialect or a backend compares what ran
// there: a --dialect cuda check merged from a HIP host, or a --backend
// cuda check from a simulator, is flagged with what ran where, an ERROR
// (the comparison was not made), never counted as met, in every output.
func TestRunsOnAnotherTargetAreFlagged(t *testing.T) {
	const rulesCmd = "miotool rules --dialect cuda --expect configs/rules/h200-cuda.yaml"
	check := func(host, backend string, dev Device) *SuiteResult {
		s := NewSuiteResult("pr12265", suiteStart)
		s.Hosts = []string{host}
		r := run(host, 1, Pass, "243 cells as expected", time.Second)
		r.Backend, r.Device = backend, dev
		s.Checks = []*SuiteCheck{{Name: "rules-vs-h200", Command: rulesCmd, Expect: Pass, Runs: []SuiteRun{r}}}
		return s
	}
	simCUDA := Device{Name: "miotool simulated device (cuda rules)", Arch: "sim"}
	simHIP := Device{Name: "miotool simulated device (hip rules)", Arch: "sim"}
	for _, tc := range []struct {
		name    string
		inputs  []*SuiteResult
		outcome Verdict
		status  string
	}{
		{"the H200 and the CUDA simulator", []*SuiteResult{check("node1", "cuda", h200), check("node2", "sim", simCUDA)}, Pass,
			"Passed (2/2 runs)"},
		{"a HIP host merged in", []*SuiteResult{check("node1", "cuda", h200), check("node2", "hip", mi300)}, Error,
			"Error (1/2 runs not compared on node2; expected PASS): run 1 ran in the hip dialect (hip, AMD Instinct MI300X (gfx942), on node2); " +
				"the check asks for --dialect cuda: not compared"},
		{"the simulator in the HIP dialect", []*SuiteResult{check("node1", "cuda", h200), check("node2", "sim", simHIP)}, Error,
			"Error (1/2 runs not compared on node2; expected PASS): run 1 ran in the hip dialect (sim, miotool simulated device (hip rules) (sim), on node2); " +
				"the check asks for --dialect cuda: not compared"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, err := MergeSuites(tc.inputs, []string{"a.json", "b.json"})
			if err != nil {
				t.Fatal(err)
			}
			c := m.Checks[0]
			if c.Outcome() != tc.outcome || m.StatusOf(c) != tc.status {
				t.Errorf("outcome %s status %q\nwant %s %q", c.Outcome(), m.StatusOf(c), tc.outcome, tc.status)
			}
			if tc.outcome == Pass {
				return
			}
			if m.Verdict() == Pass || c.Met() {
				t.Errorf("verdict %s, met %v: a comparison not made passed", m.Verdict(), c.Met())
			}
			var js, junit bytes.Buffer
			if err := WriteSuiteJSON(&js, m); err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(js.String(), `"mismatch": "run 1 ran in the hip dialect`) || !strings.Contains(js.String(), `"met": false`) {
				t.Errorf("JSON does not flag the run:\n%s", js.String())
			}
			if err := WriteJUnit(&junit, m); err != nil {
				t.Fatal(err)
			}
			if ci := readJUnitCounts(t, junit.Bytes()); ci.Errors != 1 || ci.Passed != 0 {
				t.Errorf("JUnit counts %+v", ci)
			}
		})
	}
	// A pinned backend is compared as a dialect is.
	s := check("node1", "sim", simCUDA)
	s.Checks[0].Command = "miotool capture --backend=cuda --mode=global"
	if got := s.StatusOf(s.Checks[0]); !strings.Contains(got, "ran on backend sim") || !strings.HasPrefix(got, "Error (") {
		t.Errorf("a --backend cuda check run on the simulator: %q", got)
	}
	// A run that says nothing of where it ran, and a check that pins
	// nothing, compare nothing and are not flagged.
	s = check("node1", "", Device{})
	if got := s.StatusOf(s.Checks[0]); got != "Passed (1/1 run)" {
		t.Errorf("a run without a backend: %q", got)
	}
	s = check("node1", "hip", mi300)
	s.Checks[0].Command = "miotool capture --mode=global -- --dialect cuda"
	if got := s.StatusOf(s.Checks[0]); got != "Passed (1/1 run)" {
		t.Errorf("--dialect after --: %q", got)
	}
}
