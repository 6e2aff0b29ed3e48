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
	matrix.Detail = "Fails with --reclaim=lazy (global), passes with --reclaim=worker"
	short := withCases(Pass, 23, 24)
	for _, tc := range []struct {
		name   string
		expect Verdict
		runs   []SuiteRun
		want   string
	}{
		{"one run", Pass, []SuiteRun{run("node1", 1, Pass, "", time.Second)}, "Passed (1/1 run)"},
		{"one expected failure", Fail, []SuiteRun{run("node1", 1, Fail, "", time.Second)}, "Fails as expected (1/1 run failed)"},
		{"26 sub-tests", Pass, []SuiteRun{withCases(Pass, 26, 26)}, "Passed (26/26)"},
		{"a matrix of 24", Pass, []SuiteRun{matrix}, "Passed (24/24): Fails with --reclaim=lazy (global), passes with --reclaim=worker"},
		{"the matrix 20 times", Pass, repeat(matrix, 20), "Passed (24/24; 20/20 runs): Fails with --reclaim=lazy (global), passes with --reclaim=worker"},
		{"repeated without sub-tests", Pass, repeat(run("node1", 1, Pass, "", time.Second), 3), "Passed (3/3 runs)"},
		{"sub-tests that differ", Pass, []SuiteRun{withCases(Pass, 24, 24), {Iteration: 2, Verdict: Pass, Cases: Cases{Passed: 20, Total: 20}}}, "Passed (44/44 in all; 2/2 runs)"},
		{"one run, unexpected", Pass, []SuiteRun{withCases(Fail, 23, 24)}, "Failed (1/24 failed; expected PASS)"},
		{"runs, unexpected", Pass, append(repeat(short, 1), repeat(matrix, 2)...), "Failed (1/3 runs failed; expected PASS)"},
		// A met FAIL expectation counts what failed: never "(0/20)",
		// which reads as "none failed".
		{"an expected failure of 20 sub-tests", Fail, []SuiteRun{withCases(Fail, 0, 20)}, "Fails as expected (20/20 failed)"},
		{"an expected failure, 20 times", Fail, repeat(run("node1", 1, Fail, "", time.Second), 20), "Fails as expected (20/20 runs failed)"},
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
	r.Detail, r.Cases = "Fails with --reclaim=lazy (global), passes with --reclaim=worker", Cases{Passed: 24, Total: 24}
	if got := r.ChecklistRow()[3]; got != "Passed (24/24): "+r.Detail {
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

// Every row names its devices, even where every check ran on one and the
// same device: a row pasted alone into a pull request still says where it
// ran. The header names the devices too.
func TestEveryRowNamesItsDevices(t *testing.T) {
	md := markdownOf(t, sampleSuite())
	if !strings.Contains(md, "- **Devices:** NVIDIA H200 (sm_90)\n") || !strings.Contains(md, "| Devices") {
		t.Errorf("one device:\n%s", md)
	}
	for _, line := range strings.Split(md, "\n") {
		if strings.HasPrefix(line, "| capture-") && !strings.Contains(line, "| NVIDIA H200 (sm_90) |") {
			t.Errorf("a row without its device: %s", line)
		}
	}
	if text := textOf(t, sampleSuite()); !strings.Contains(text, "  devices:  NVIDIA H200 (sm_90)\n") || !strings.Contains(text, "Devices") {
		t.Errorf("one device, text:\n%s", text)
	}
	// A merged row lists each host's device.
	a, b := hostSuite("node1", h200, Pass), hostSuite("node2", mi300, Pass)
	m, err := MergeSuites([]*SuiteResult{a, b}, []string{"a.json", "b.json"})
	if err != nil {
		t.Fatal(err)
	}
	if md := markdownOf(t, m); !strings.Contains(md, "| NVIDIA H200 (sm_90), AMD Instinct MI300X (gfx942) |") {
		t.Errorf("devices that differ:\n%s", md)
	}
}
