package report

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

// A Status count means what a PR checklist's does: the sub-tests of one
// run (26 tests of one binary, 24 combinations of a capture matrix);
// repetitions are counted apart, in runs.
func TestChecklistCountsSubTests(t *testing.T) {
	withCases := func(v Verdict, passed, total int) SuiteRun {
		r := run("node1", 1, v, "", time.Second)
		r.Cases = Cases{Passed: passed, Total: total}
		return r
	}
	repeat := func(r SuiteRun, n int) []SuiteRun {
		var out []SuiteRun
		for i := range n {
			r.Iteration, r.Order = i+1, i+1
			out = append(out, r)
		}
		return out
	}
	matrix := withCases(Pass, 24, 24)
	matrix.Status = "Fails with --reclaim=lazy (global), passes with --reclaim=worker"
	short := withCases(Pass, 23, 24)
	for _, tc := range []struct {
		name   string
		expect Verdict
		runs   []SuiteRun
		want   string
	}{
		{"one run", Pass, []SuiteRun{run("node1", 1, Pass, "", time.Second)}, "Passed"},
		{"one expected failure", Fail, []SuiteRun{run("node1", 1, Fail, "", time.Second)}, "Fails as expected"},
		{"26 sub-tests", Pass, []SuiteRun{withCases(Pass, 26, 26)}, "Passed (26/26)"},
		{"a matrix of 24", Pass, []SuiteRun{matrix}, "Fails with --reclaim=lazy (global), passes with --reclaim=worker (24/24)"},
		{"the matrix 20 times", Pass, repeat(matrix, 20), "Fails with --reclaim=lazy (global), passes with --reclaim=worker (24/24), 20/20 runs"},
		{"repeated without sub-tests", Pass, repeat(run("node1", 1, Pass, "", time.Second), 3), "Passed, 3/3 runs"},
		{"sub-tests that differ", Pass, []SuiteRun{withCases(Pass, 24, 24), {Iteration: 2, Verdict: Pass, Cases: Cases{Passed: 20, Total: 20}}}, "Passed (44/44 in all), 2/2 runs"},
		{"one run, unexpected", Pass, []SuiteRun{withCases(Fail, 23, 24)}, "Unexpected (expected PASS): FAIL (23/24)"},
		{"runs, unexpected", Pass, append(repeat(short, 1), repeat(matrix, 2)...), "Unexpected (expected PASS): FAIL 1, PASS 2 of 3 runs"},
	} {
		if tc.name == "runs, unexpected" {
			tc.runs[0].Verdict = Fail
		}
		c := &SuiteCheck{Name: "x", Command: "miotool x", Expect: tc.expect, Runs: tc.runs}
		if got := c.Status(); got != tc.want {
			t.Errorf("%s: status %q, want %q", tc.name, got, tc.want)
		}
	}
	// A single result's checklist row and its JSON carry the count too.
	r := New("capture", "miotool capture --mode=all", time.Time{})
	r.Status, r.Cases = "Fails with --reclaim=lazy (global), passes with --reclaim=worker", Cases{Passed: 24, Total: 24}
	if got := r.ChecklistRow()[3]; got != r.Status+" (24/24)" {
		t.Errorf("result row status %q", got)
	}
	var buf bytes.Buffer
	if err := WriteJSON(&buf, r); err != nil {
		t.Fatal(err)
	}
	back, err := ReadJSON(bytes.NewReader(buf.Bytes()))
	if err != nil || back.Cases != r.Cases || !strings.Contains(buf.String(), `"cases": {`) {
		t.Errorf("cases after JSON: %+v, %v\n%s", back.Cases, err, buf.String())
	}
	if s := SuiteFromResult(back); roundTrip(t, s).Checks[0].Runs[0].Cases != r.Cases {
		t.Errorf("a suite run lost its cases through JSON")
	}
}

// A Devices cell that every row repeats goes to the header once.
func TestSharedDevicesGoToTheHeader(t *testing.T) {
	md := markdownOf(t, sampleSuite())
	if !strings.Contains(md, "- **Devices:** NVIDIA H200 (sm_90)\n") || strings.Contains(md, "| Devices") ||
		!strings.Contains(md, "| Test ") || !strings.Contains(md, "| Status ") {
		t.Errorf("shared devices:\n%s", md)
	}
	if text := textOf(t, sampleSuite()); !strings.Contains(text, "  devices:  NVIDIA H200 (sm_90)\n") || strings.Contains(text, "Devices") {
		t.Errorf("shared devices, text:\n%s", text)
	}
	// Devices that differ stay in their column, and so do they where a
	// check that ran has none, or where one row is all there is.
	a, b := hostSuite("node1", h200, Pass), hostSuite("node2", mi300, Pass)
	m, err := MergeSuites([]*SuiteResult{a, b}, []string{"a.json", "b.json"})
	if err != nil {
		t.Fatal(err)
	}
	crashed := hostSuite("node1", h200, Pass)
	crashed.Checks = append(crashed.Checks, &SuiteCheck{Name: "crash", Command: "miotool crash", Expect: Pass,
		Runs: []SuiteRun{{Host: "node1", Iteration: 1, Order: 2, Verdict: Error}}})
	for _, s := range []*SuiteResult{m, crashed, hostSuite("node1", h200, Pass)} {
		if md := markdownOf(t, s); !strings.Contains(md, "| Devices") || strings.Contains(md, "**Devices:**") {
			t.Errorf("devices that differ:\n%s", md)
		}
	}
}
