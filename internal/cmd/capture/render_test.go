package capture

import (
	"strings"
	"testing"
	"time"

	"miotool/internal/cmd/matrix"
	"miotool/internal/hip"
	"miotool/internal/report"
	"miotool/internal/scenario"
	capturescen "miotool/internal/scenario/capture"
	"miotool/internal/streams"
)

// An interrupted run of cases is INTERRUPTED whatever its finished runs
// showed: the counts add up to the runs planned, the run the signal
// stopped neither agrees nor disagrees (no flag, no end code, no wrong
// output), and the summary says what the finished runs showed so far.
func TestFillCasesInterrupted(t *testing.T) {
	ran := func(p streams.Policy, measured scenario.Outcome) capturescen.Case {
		return capturescen.Case{Mode: hip.CaptureModeGlobal, Policy: p, Variant: scenario.SameThread,
			Expected: capturescen.Expected(p, hip.CaptureModeGlobal, scenario.SameThread), Measured: measured, EndCapture: hip.Success, OutputOK: true}
	}
	stoppedRun := ran(streams.Worker, scenario.Interrupted)
	stoppedRun.OutputOK = false
	for _, tt := range []struct {
		name    string
		cases   []capturescen.Case
		planned int
		summary string
		row     string // the measured cell of the only row
	}{
		{"as expected so far", []capturescen.Case{ran(streams.Worker, scenario.Pass), ran(streams.Worker, scenario.Pass), stoppedRun}, 1000,
			"interrupted by SIGINT: 2 of 1000 runs finished, 1 stopped while it ran, 997 not started; so far every finished run as expected", "PASS 2/3, INTERRUPTED 1/3"},
		{"a finished run disagrees", []capturescen.Case{ran(streams.Worker, scenario.Fail), stoppedRun}, 10,
			"interrupted by SIGINT: 1 of 10 runs finished, 1 stopped while it ran, 8 not started; so far differs from the expectation: worker/global/same-thread measured FAIL, expected PASS", "FAIL 1/2, INTERRUPTED 1/2"},
		{"stopped in the first run", []capturescen.Case{stoppedRun}, 5,
			"interrupted by SIGINT: 0 of 5 runs finished, 1 stopped while it ran, 4 not started", "INTERRUPTED"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := report.New("capture", "miotool capture", time.Unix(0, 0))
			fillCases(r, tt.cases, hip.DialectCUDA, &matrix.Interruption{Reason: "interrupted by SIGINT", Planned: tt.planned}, time.Unix(1, 0))
			if r.Verdict != report.Interrupted || r.Summary != tt.summary || !strings.HasPrefix(r.ChecklistStatus(), "Interrupted (") {
				t.Errorf("verdict %s status %q summary %q; want INTERRUPTED with %q", r.Verdict, r.ChecklistStatus(), r.Summary, tt.summary)
			}
			row := r.Tables[0].Rows[0]
			if row.Cells[4] != tt.row || strings.Contains(row.Cells[6], "WRONG") {
				t.Errorf("row %q, want measured %q and no wrong output", row.Cells, tt.row)
			}
			if tt.name == "as expected so far" && row.Flag != "" {
				t.Errorf("an interrupted run flagged the row: %q", row.Flag)
			}
			runs, _ := r.Counter("runs")
			stopped, _ := r.Counter("interrupted")
			notRun, _ := r.Counter("not run")
			if int(runs+stopped+notRun) != tt.planned {
				t.Errorf("runs %d + interrupted %d + not run %d != %d planned", runs, stopped, notRun, tt.planned)
			}
		})
	}
}

// A matrix's result counts its combinations, as a test binary counts its
// sub-tests: those that behaved as expected, of those that ran, whatever
// the verdict; a single combination counts nothing.
func TestMatrixCountsItsCombinations(t *testing.T) {
	run := func(p streams.Policy, m hip.CaptureMode, measured scenario.Outcome) capturescen.Case {
		return capturescen.Case{Mode: m, Policy: p, Variant: scenario.SameThread,
			Expected: capturescen.Expected(p, m, scenario.SameThread), Measured: measured, EndCapture: hip.Success, OutputOK: true}
	}
	for _, tt := range []struct {
		name    string
		cases   []capturescen.Case
		verdict report.Verdict
		want    report.Cases
	}{
		{"every combination as expected", []capturescen.Case{
			run(streams.Worker, hip.CaptureModeGlobal, scenario.Pass), run(streams.Worker, hip.CaptureModeRelaxed, scenario.Pass),
			run(streams.Lazy, hip.CaptureModeRelaxed, scenario.Pass)}, report.Pass, report.Cases{Passed: 3, Total: 3}},
		{"one combination differs", []capturescen.Case{
			run(streams.Worker, hip.CaptureModeGlobal, scenario.Fail), run(streams.Worker, hip.CaptureModeRelaxed, scenario.Pass)},
			report.Fail, report.Cases{Passed: 1, Total: 2}},
		{"one combination", []capturescen.Case{run(streams.Worker, hip.CaptureModeGlobal, scenario.Pass)}, report.Pass, report.Cases{}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := report.New("capture", "miotool capture", time.Unix(0, 0))
			fillCases(r, tt.cases, hip.DialectCUDA, nil, time.Unix(1, 0))
			if r.Verdict != tt.verdict || r.Cases != tt.want {
				t.Errorf("verdict %s, cases %+v; want %s and %+v (%s)", r.Verdict, r.Cases, tt.verdict, tt.want, r.Summary)
			}
		})
	}
}
