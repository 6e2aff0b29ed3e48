package report

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"
)

// stoppedRun is a run the suite's interruption stopped after d.
func stoppedRun(host string, it int, d time.Duration) SuiteRun {
	return SuiteRun{Host: host, Iteration: it, Order: it, Verdict: Interrupted, ExitCode: -1,
		Summary: "interrupted by SIGINT after " + durationText(d), Started: suiteStart.Add(time.Duration(it) * time.Second), Duration: d}
}

// nineChecks is pr12265 stopped by SIGINT: finished checks first, then the
// one that was running (when running is true), then those never started.
func nineChecks(finished int, running bool) *SuiteResult {
	s := NewSuiteResult("pr12265", suiteStart)
	s.Hosts = []string{"node1"}
	s.Interrupted = "interrupted by SIGINT"
	// One check after another, each starting where the last ended; the
	// suite took 11 ms more than its runs (starting them, the summary).
	at := suiteStart
	for i := range 9 {
		c := &SuiteCheck{Name: fmt.Sprintf("check-%d", i+1), Command: fmt.Sprintf("miotool capture --n=%d", i+1), Expect: Pass}
		switch {
		case i < finished:
			c.Runs = []SuiteRun{run("node1", 1, Pass, "passed", 400*time.Millisecond)}
		case i == finished && running:
			c.Runs = []SuiteRun{stoppedRun("node1", 1, 2030*time.Millisecond)}
		}
		for j := range c.Runs {
			c.Runs[j].Started = at
			at = at.Add(c.Runs[j].Duration)
		}
		s.Checks = append(s.Checks, c)
	}
	s.Duration = at.Sub(suiteStart) + 11*time.Millisecond
	return s
}

// A check the interruption stopped mid-run is interrupted, not skipped: an
// <error type="interrupted"> in JUnit, so CI reads the suite red; the
// summary says what finished, what was stopped and what never started.
func TestInterruptedCheckIsNotSkipped(t *testing.T) {
	for _, tc := range []struct {
		name                          string
		s                             *SuiteResult
		passed, errs, skipped         int
		summary                       string
		status                        string // of the check that was running
		interruptedTotal, notRunTotal int
	}{
		{"2 s in, the first check running", nineChecks(0, true), 0, 1, 8,
			"interrupted by SIGINT before the suite finished: 0 of 9 checks finished, 1 interrupted, 8 never started",
			"Interrupted (0 of 1 run finished): interrupted by SIGINT after 2.03s", 1, 8},
		{"5 s in, the fifth check running", nineChecks(4, true), 4, 1, 4,
			"interrupted by SIGINT before the suite finished: 4 of 9 checks finished (every one met its expectation), 1 interrupted, 4 never started",
			"Interrupted (0 of 1 run finished): interrupted by SIGINT after 2.03s", 1, 4},
		{"between two checks", nineChecks(4, false), 4, 1, 5,
			"interrupted by SIGINT before the suite finished: 4 of 9 checks finished (every one met its expectation), 0 interrupted, 5 never started",
			"", 0, 5},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := tc.s
			if got := s.Summary(); got != tc.summary {
				t.Errorf("summary\n got %q\nwant %q", got, tc.summary)
			}
			if s.Verdict() != Interrupted || s.ExitCode() != ExitInterrupted {
				t.Errorf("verdict %s exit %d", s.Verdict(), s.ExitCode())
			}
			if tot := s.Totals(); tot.Interrupted != tc.interruptedTotal || tot.NotRun != tc.notRunTotal || tot.Unmet != 0 {
				t.Errorf("totals %+v", tot)
			}
			var junit, text, md, js bytes.Buffer
			if err := WriteJUnit(&junit, s); err != nil {
				t.Fatal(err)
			}
			t.Run("jenkins schema", func(t *testing.T) { validateJUnit(t, junit.Bytes()) })
			c := readJUnitCounts(t, junit.Bytes())
			if c.Passed != tc.passed || c.Errors != tc.errs || c.Skipped != tc.skipped || c.Failures != 0 {
				t.Errorf("a CI counts passed %d errors %d skipped %d failures %d; want %d %d %d 0",
					c.Passed, c.Errors, c.Skipped, c.Failures, tc.passed, tc.errs, tc.skipped)
			}
			if c.Declared[2] != tc.errs || c.Declared[3] != tc.skipped {
				t.Errorf("declared errors %d, skipped %d: a CI would read the suite green", c.Declared[2], c.Declared[3])
			}
			if len(c.ErrorTypes) != 1 || c.ErrorTypes[0] != "interrupted" {
				t.Errorf("error types %q, want one \"interrupted\"", c.ErrorTypes)
			}
			// The times are the real ones: checks one after another take
			// their runs' time, and the suite what the user waited.
			if math.Abs(c.TopTime-s.Duration.Seconds()) > 0.0015 {
				t.Errorf("times: testsuite %.3f (the suite took %.3f), testcase sum %.3f", c.TopTime, s.Duration.Seconds(), c.CaseTime)
			}
			want := 0.4*float64(tc.passed) + map[bool]float64{true: 2.03}[tc.interruptedTotal > 0]
			if math.Abs(c.CaseTime-want) > 0.0015 {
				t.Errorf("case times sum to %.3f s, want %.3f", c.CaseTime, want)
			}
			for _, f := range []struct {
				buf *bytes.Buffer
				f   Format
			}{{&text, Text}, {&md, Markdown}, {&js, JSON}} {
				if err := RenderSuite(f.buf, f.f, s, Options{}); err != nil {
					t.Fatal(err)
				}
			}
			for name, out := range map[string]string{"text": text.String(), "Markdown": md.String()} {
				if !strings.Contains(out, tc.summary) || strings.Contains(out, "no check ran") {
					t.Errorf("%s does not say what finished:\n%s", name, out)
				}
				if tc.status != "" && !strings.Contains(out, tc.status) {
					t.Errorf("%s lacks the running check's status %q:\n%s", name, tc.status, out)
				}
				if !strings.Contains(out, "Not run (the suite was interrupted before it started)") {
					t.Errorf("%s does not say the last checks never started:\n%s", name, out)
				}
			}
			var doc struct {
				Totals struct {
					Interrupted int `json:"interrupted"`
					NotRun      int `json:"not_run"`
				} `json:"totals"`
				Checks []struct {
					Outcome string `json:"outcome"`
					Status  string `json:"status"`
					Runs    []struct {
						Verdict    string  `json:"verdict"`
						DurationMS float64 `json:"duration_ms"`
					} `json:"runs"`
				} `json:"checks"`
			}
			if err := json.Unmarshal(js.Bytes(), &doc); err != nil {
				t.Fatal(err)
			}
			if doc.Totals.Interrupted != tc.interruptedTotal || doc.Totals.NotRun != tc.notRunTotal {
				t.Errorf("JSON totals %+v", doc.Totals)
			}
			if tc.interruptedTotal > 0 {
				k := doc.Checks[tc.passed]
				if k.Outcome != "INTERRUPTED" || k.Status != tc.status || len(k.Runs) != 1 || k.Runs[0].Verdict != "INTERRUPTED" || k.Runs[0].DurationMS != 2030 {
					t.Errorf("JSON of the running check: %+v", k)
				}
			}
			back := roundTrip(t, s)
			if back.Summary() != s.Summary() || back.Totals() != s.Totals() {
				t.Errorf("read back: %q %+v", back.Summary(), back.Totals())
			}
		})
	}
}

// A finding is a finding: a run that finished and missed its expectation
// makes the check FAIL even when a later run of it was stopped.
func TestInterruptedCheckKeepsItsFinishedFailures(t *testing.T) {
	c := &SuiteCheck{Name: "x", Command: "miotool x", Expect: Pass, Runs: []SuiteRun{
		run("node1", 1, Pass, "", time.Second), run("node1", 2, Fail, "901", time.Second), stoppedRun("node1", 3, time.Second)}}
	if c.Outcome() != Fail || c.Status() != "Failed (1/3 runs failed; 1/3 runs interrupted; expected PASS)" {
		t.Errorf("outcome %s status %q", c.Outcome(), c.Status())
	}
	c.Runs[1].Verdict = Pass
	if c.Outcome() != Interrupted || c.Status() != "Interrupted (2 of 3 runs finished): interrupted by SIGINT after 1.00s" || c.Met() {
		t.Errorf("outcome %s status %q met %v", c.Outcome(), c.Status(), c.Met())
	}
	s := NewSuiteResult("s", suiteStart)
	s.Checks = []*SuiteCheck{c}
	// A stopped run makes the suite interrupted even where the text of
	// why was lost.
	if s.Verdict() != Interrupted || len(s.unmetRuns()) != 0 {
		t.Errorf("verdict %s, unmet runs %d", s.Verdict(), len(s.unmetRuns()))
	}
}

// TestJUnitTimesAreWallTimes: checks that ran side by side (--jobs) keep
// their own times, and the suite says how long it took, not their sum; a
// merged result adds up its hosts' runs.
func TestJUnitTimesAreWallTimes(t *testing.T) {
	side := func(host string, start time.Time, n int) []*SuiteCheck {
		var cs []*SuiteCheck
		for i := range n {
			r := run(host, 1, Pass, "passed", time.Second)
			r.Started = start.Add(time.Duration(i) * 10 * time.Millisecond)
			cs = append(cs, &SuiteCheck{Name: fmt.Sprintf("check-%d", i+1), Command: "miotool capture", Expect: Pass, Runs: []SuiteRun{r}})
		}
		return cs
	}
	parallel := NewSuiteResult("pr12265", suiteStart)
	parallel.Hosts = []string{"node1"}
	parallel.Checks = side("node1", suiteStart, 3)
	parallel.Duration = 1050 * time.Millisecond

	merged := NewSuiteResult("pr12265", suiteStart)
	merged.Hosts = []string{"node1", "node2"}
	merged.MergedRuns = []SuiteRunRef{{RunID: "a"}, {RunID: "b"}}
	merged.Checks = side("node1", suiteStart, 3)
	for i, c := range side("node2", suiteStart.Add(time.Hour), 3) {
		merged.Checks[i].Runs = append(merged.Checks[i].Runs, c.Runs...)
	}
	merged.Duration = time.Hour + 1020*time.Millisecond // first start to last end, across hosts

	// Without the suite's own duration, the wall time of its runs.
	untimed := NewSuiteResult("pr12265", suiteStart)
	untimed.Checks = side("node1", suiteStart, 3)

	for _, tc := range []struct {
		name           string
		s              *SuiteResult
		top, caseTotal float64
	}{
		{"three checks side by side", parallel, 1.050, 3.0},
		{"three checks side by side, the suite's time unknown", untimed, 1.020, 3.0},
		{"merged from two hosts", merged, 2.040, 6.0},
	} {
		var junit bytes.Buffer
		if err := WriteJUnit(&junit, tc.s); err != nil {
			t.Fatal(err)
		}
		c := readJUnitCounts(t, junit.Bytes())
		if math.Abs(c.TopTime-tc.top) > 0.0015 || math.Abs(c.CaseTime-tc.caseTotal) > 0.0015 {
			t.Errorf("%s: testsuite %.3f, testcases %.3f; want %.3f, %.3f", tc.name, c.TopTime, c.CaseTime, tc.top, tc.caseTotal)
		}
	}
}
