package rules

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"miotool/internal/hip"
	"miotool/internal/report"
	"miotool/internal/rules"
)

// measured is a run of every cell that returned SUCCESS and ended the
// capture cleanly, as the fake device of the rules tests measures them.
func measured() *rules.Measurement {
	m := &rules.Measurement{Dialect: hip.DialectCUDA, Spin: time.Hour, Planned: len(rules.Matrix())}
	for _, k := range rules.Matrix() {
		m.Outcomes = append(m.Outcomes, rules.Outcome{Key: k, Returns: hip.Success, End: hip.Success, Spin: time.Hour, Attempts: 1})
	}
	return m
}

// fillFrom fills r with m as Run does: tallied against exp, then rendered.
func fillFrom(r *report.Result, m *rules.Measurement, exp *rules.Expectation, probeErr error, interrupted string, end time.Time) rules.Tally {
	tl := rules.Summarize(m, exp)
	fill(r, m, exp, tl, probeErr, interrupted, end)
	return tl
}

// cleanExpectation expects what measured() measures.
func cleanExpectation() *rules.Expectation {
	e := rules.FromMeasurement(measured(), "a clean fake run")
	e.Name = "fake.yaml"
	return e
}

func TestMismatchIsReportedNamingTheCell(t *testing.T) {
	m := measured()
	// A device where malloc from another, default-mode thread is refused.
	want := []string{"malloc/global/other/global", "malloc/thread-local/other/global", "malloc/relaxed/other/global"}
	for i, o := range m.Outcomes {
		if o.Key.Action == rules.Malloc && o.Key.Other && o.Key.Mode == hip.CaptureModeGlobal {
			m.Outcomes[i].Returns = hip.ErrStreamCaptureUnsupported
		}
	}
	start := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	r := report.New("rules", "miotool rules --expect fake.yaml", start)
	cmp := fillFrom(r, m, cleanExpectation(), nil, "", start.Add(time.Second))

	var got []string
	for _, x := range cmp.Differences {
		got = append(got, x.Key.String())
	}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("differing cells %v, want %v", got, want)
	}
	if r.Verdict != report.Fail || r.Verdict.ExitCode() != 1 {
		t.Errorf("verdict %s, want FAIL", r.Verdict)
	}
	n := len(rules.Matrix())
	if !strings.Contains(r.Summary, fmt.Sprintf("compared %d of %d with fake.yaml; 3 differ: malloc/global/other/global", n, n)) {
		t.Errorf("summary does not name the cells: %q", r.Summary)
	}
	if r.Cases != (report.Cases{Passed: n - 3, Total: n}) {
		t.Errorf("cases %+v, want %d of %d", r.Cases, n-3, n)
	}
	var text bytes.Buffer
	if err := report.WriteText(&text, r, report.Options{}); err != nil {
		t.Fatal(err)
	}
	for _, w := range append(want, "differs: expected SUCCESS (0) / SUCCESS (0)", "returned 900 STREAM_CAPTURE_UNSUPPORTED") {
		if !strings.Contains(text.String(), w) {
			t.Errorf("text output lacks %q", w)
		}
	}
	if n, _ := r.Counter("differences"); n != 3 {
		t.Errorf("differences counter = %d", n)
	}
	if n, _ := r.Counter("refused"); n != 3 {
		t.Errorf("refused counter = %d", n)
	}
	if got := r.Tables[0].Flagged(); got != 3 {
		t.Errorf("%d rows flagged, want 3", got)
	}
}

func TestMatchingRunPasses(t *testing.T) {
	r := report.New("rules", "miotool rules", time.Now())
	fillFrom(r, measured(), cleanExpectation(), nil, "", time.Now())
	n := len(rules.Matrix())
	if r.Verdict != report.Pass || r.Cases != (report.Cases{Passed: n, Total: n}) {
		t.Fatalf("verdict %s %+v: %s", r.Verdict, r.Cases, r.Summary)
	}
	if n, _ := r.Counter("compared"); n != int64(len(rules.Matrix())) {
		t.Errorf("compared %d cells", n)
	}
	if !strings.HasSuffix(r.Summary, "; all match") {
		t.Errorf("summary %q", r.Summary)
	}
}

// A file that covers some of the cells passes for those only, and says so
// in the status; a run with nothing compared is a SKIP, not a PASS.
func TestPartialAndNoComparison(t *testing.T) {
	partial := cleanExpectation()
	for k := range partial.Cells {
		if k.Action != rules.Malloc {
			delete(partial.Cells, k)
		}
	}
	none := cleanExpectation()
	none.Cells = map[rules.CellKey]rules.Expected{}
	n := len(rules.Matrix())
	for _, tt := range []struct {
		name    string
		exp     *rules.Expectation
		verdict report.Verdict
		status  string
		summary string
	}{
		{"partial", partial, report.Pass, fmt.Sprintf("Passed (18/18 cells compared): %d of %d cells measured have no expectation", n-18, n),
			fmt.Sprintf("all 18 match; the other %d have no expectation there", n-18)},
		{"file covers none", none, report.Skip,
			fmt.Sprintf("Skipped (1/1 run skipped): %d cells measured, compared none: fake.yaml has no expectation for any of them", n),
			"fake.yaml has no expectation for any of them"},
		{"no file", nil, report.Skip, fmt.Sprintf("Skipped (1/1 run skipped): %d cells measured, compared none: no expectations given (--expect)", n),
			"no expectations given (--expect)"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := report.New("rules", "miotool rules", time.Now())
			fillFrom(r, measured(), tt.exp, nil, "", time.Now())
			if r.Verdict != tt.verdict || r.ChecklistStatus() != tt.status || !strings.Contains(r.Summary, tt.summary) {
				t.Errorf("%s / %q / %q; want %s / %q / containing %q", r.Verdict, r.ChecklistStatus(), r.Summary, tt.verdict, tt.status, tt.summary)
			}
		})
	}
}

func TestSetupFailureIsAnError(t *testing.T) {
	m := measured()
	m.Outcomes = m.Outcomes[:2]
	for i := range m.Outcomes {
		m.Outcomes[i].SetupErr = errors.New("creating stream B: out of memory")
	}
	r := report.New("rules", "miotool rules", time.Now())
	fillFrom(r, m, nil, nil, "", time.Now())
	if r.Verdict != report.Error || r.Verdict.ExitCode() != 3 {
		t.Errorf("verdict %s, want ERROR", r.Verdict)
	}
	if !strings.Contains(r.Summary, "set-up failed in 2") {
		t.Errorf("summary %q", r.Summary)
	}
}

func TestLateCellIsAnError(t *testing.T) {
	m := measured()
	m.Outcomes = m.Outcomes[:2]
	m.Outcomes[0].Late, m.Outcomes[0].Attempts, m.Outcomes[0].Spin = true, 3, 4*time.Nanosecond
	r := report.New("rules", "miotool rules", time.Now())
	fillFrom(r, m, nil, nil, "", time.Now())
	if r.Verdict != report.Error || !strings.Contains(r.Summary, "could not be timed") {
		t.Errorf("verdict %s: %s", r.Verdict, r.Summary)
	}
	if n, _ := r.Counter("retried"); n != 1 {
		t.Errorf("retried counter = %d", n)
	}
}

// An interrupted probe says how far it got and what it compared so far.
func TestInterruptedRunSaysHowFarItGot(t *testing.T) {
	m := measured()
	m.Outcomes = m.Outcomes[:10]
	r := report.New("rules", "miotool rules", time.Now())
	fillFrom(r, m, cleanExpectation(), errors.New("context canceled"), "interrupted by SIGINT", time.Now())
	n := len(rules.Matrix())
	if r.Verdict != report.Interrupted ||
		r.ChecklistStatus() != fmt.Sprintf("Interrupted (10 of %d cells finished): interrupted by SIGINT; so far compared 10 with fake.yaml, all match", n) ||
		r.Summary != fmt.Sprintf("interrupted by SIGINT: 10 of %d cells finished, %d not started; so far compared 10 with fake.yaml, all match", n, n-10) {
		t.Errorf("%s / %q / %q", r.Verdict, r.ChecklistStatus(), r.Summary)
	}
}

// The legend names everything a label of the table uses.
func TestLegendNamesEveryLabelsOperand(t *testing.T) {
	for _, name := range []string{"A:", "B:", "evA:", "evB:", "p:", "h:", "m:", "mod:", "legacy:", "A blocking", "x{}:"} {
		if !strings.Contains(legend, name) {
			t.Errorf("the legend lacks %q", name)
		}
	}
}
