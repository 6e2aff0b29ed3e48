package report

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// A run that skipped where the check expected PASS or FAIL (no device or
// library to test on) tested nothing: the check is SKIP, not an unmet
// expectation, and a suite in which nothing tested is SKIP, exit 4 -- in
// the headline, the table, the JSON and the JUnit file alike.
func TestRunsThatSkippedAreNotFailures(t *testing.T) {
	const reason = "backend cuda unavailable: libcuda.so.1 not found"
	skipRun := func(it int) SuiteRun { return run("node1", it, Skip, reason, 10*time.Millisecond) }
	check := func(name string, expect Verdict, runs ...SuiteRun) *SuiteCheck {
		return &SuiteCheck{Name: name, Command: "miotool capture --backend cuda", Expect: expect, Runs: runs}
	}
	suite := func(checks ...*SuiteCheck) *SuiteResult {
		s := NewSuiteResult("sk", suiteStart)
		s.Hosts = []string{"node1"}
		s.Checks = checks
		return s
	}
	for _, tc := range []struct {
		name     string
		s        *SuiteResult
		verdict  Verdict
		summary  string
		statuses []string
		junit    [4]int // passed, failures, errors, skipped as a CI counts them
	}{
		{
			name:     "every run skipped",
			s:        suite(check("a", Pass, skipRun(1)), check("b", Fail, skipRun(1))),
			verdict:  Skip,
			summary:  "no check was tested: 2 skipped (what they need is not there)",
			statuses: []string{"Skipped (1/1 run skipped; expected PASS): backend cuda unavailable: libcuda.so.1 not found", "Skipped (1/1 run skipped; expected FAIL): backend cuda unavailable: libcuda.so.1 not found"},
			junit:    [4]int{0, 0, 0, 2},
		},
		{
			name:     "one skipped beside a pass",
			s:        suite(check("a", Pass, run("node1", 1, Pass, "passed", time.Second)), check("b", Fail, skipRun(1))),
			verdict:  Pass,
			summary:  "every check that was tested met its expectation (1 check); 1 skipped (what it needs is not there)",
			statuses: []string{"Passed (1/1 run)", "Skipped (1/1 run skipped; expected FAIL): backend cuda unavailable: libcuda.so.1 not found"},
			junit:    [4]int{1, 0, 0, 1},
		},
		{
			name:     "one skipped beside a failure",
			s:        suite(check("a", Pass, run("node1", 1, Fail, "901", time.Second)), check("b", Pass, skipRun(1))),
			verdict:  Fail,
			summary:  "1 of 1 check did not meet the expectation; 1 skipped (what it needs is not there)",
			statuses: []string{"Failed (1/1 run failed; expected PASS)", "Skipped (1/1 run skipped; expected PASS): backend cuda unavailable: libcuda.so.1 not found"},
			junit:    [4]int{0, 1, 0, 1},
		},
		{
			name:     "some runs of a check skipped",
			s:        suite(check("a", Pass, run("node1", 1, Pass, "passed", time.Second), skipRun(2), skipRun(3))),
			verdict:  Skip,
			summary:  "no check was tested: 1 skipped (what it needs is not there)",
			statuses: []string{"Skipped (2/3 runs skipped; expected PASS): backend cuda unavailable: libcuda.so.1 not found"},
			junit:    [4]int{0, 0, 0, 1},
		},
		{
			name:     "a skip that was expected",
			s:        suite(check("a", Skip, skipRun(1))),
			verdict:  Pass,
			summary:  "every check met its expectation (1 check)",
			statuses: []string{"Skipped as expected (1/1 run skipped)"},
			junit:    [4]int{1, 0, 0, 0},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := tc.s
			if s.Verdict() != tc.verdict || s.ExitCode() != tc.verdict.ExitCode() || s.Summary() != tc.summary {
				t.Errorf("verdict %s exit %d summary %q; want %s, %d, %q", s.Verdict(), s.ExitCode(), s.Summary(), tc.verdict, tc.verdict.ExitCode(), tc.summary)
			}
			for i, c := range s.Checks {
				if c.Status() != tc.statuses[i] {
					t.Errorf("%s: status %q, want %q", c.Name, c.Status(), tc.statuses[i])
				}
			}
			var text, md, js, xml bytes.Buffer
			if err := WriteSuiteText(&text, s, Options{}); err != nil {
				t.Fatal(err)
			}
			if err := WriteSuiteMarkdown(&md, s); err != nil {
				t.Fatal(err)
			}
			if err := WriteSuiteJSON(&js, s); err != nil {
				t.Fatal(err)
			}
			if err := WriteJUnit(&xml, s); err != nil {
				t.Fatal(err)
			}
			if head := "suite sk: " + string(tc.verdict) + " - " + tc.summary + "\n"; !strings.HasPrefix(text.String(), head) {
				t.Errorf("text starts %q, want %q", firstLine(text.String()), head)
			}
			if head := "### Suite sk: " + string(tc.verdict) + "\n"; !strings.HasPrefix(md.String(), head) {
				t.Errorf("Markdown starts %q, want %q", firstLine(md.String()), head)
			}
			for what, out := range map[string]string{"text": text.String(), "Markdown": md.String()} {
				if strings.Contains(out, "Not as expected") || strings.Contains(out, "not as expected") {
					if tc.verdict != Fail {
						t.Errorf("%s lists a skip as not as expected:\n%s", what, out)
					}
				}
				if !strings.HasPrefix(tc.statuses[len(tc.statuses)-1], "Skipped as expected") && !strings.Contains(out, reason) {
					t.Errorf("%s does not give the skip's reason:\n%s", what, out)
				}
			}
			var doc struct {
				Verdict  Verdict `json:"verdict"`
				ExitCode int     `json:"exit_code"`
				Totals   struct {
					Skipped int `json:"skipped"`
				} `json:"totals"`
			}
			if err := json.Unmarshal(js.Bytes(), &doc); err != nil {
				t.Fatal(err)
			}
			if doc.Verdict != tc.verdict || doc.ExitCode != tc.verdict.ExitCode() {
				t.Errorf("JSON says %s, exit_code %d", doc.Verdict, doc.ExitCode)
			}
			if back := roundTrip(t, s); back.Verdict() != tc.verdict || back.Summary() != tc.summary {
				t.Errorf("read back: %s %q", back.Verdict(), back.Summary())
			}
			c := readJUnitCounts(t, xml.Bytes())
			if got := [4]int{c.Passed, c.Failures, c.Errors, c.Skipped}; got != tc.junit {
				t.Errorf("JUnit counts passed, failures, errors, skipped %v, want %v\n%s", got, tc.junit, xml.String())
			}
			if tc.junit[3] > 0 && !strings.Contains(xml.String(), reason) {
				t.Errorf("JUnit does not give the skip's reason:\n%s", xml.String())
			}
		})
	}
}
