package report

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"miotool/internal/words"
)

// The words a Testing Checklist status starts with: one per outcome, the
// same in every command's result, every suite's and every merge's, in
// text, Markdown, JSON and JUnit messages (docs/report-schema.md lists
// them). A status is the word, its count in brackets, and after a colon
// the reason (SKIP, ERROR, INTERRUPTED) or what the check found (its
// detail): "Passed (26/26)", "Fails as expected (20/20 runs failed)",
// "Error (1/1 run errored): no result within 5m0s; the process was killed",
// "Interrupted (120 of 243 cells finished): interrupted by SIGINT",
// "Not run (no access)".
const (
	StatusPassed            = "Passed"
	StatusFailsAsExpected   = "Fails as expected"
	StatusSkippedAsExpected = "Skipped as expected"
	StatusErrorsAsExpected  = "Errors as expected"
	StatusFailed            = "Failed"
	StatusSkipped           = "Skipped"
	StatusError             = "Error"
	StatusInterrupted       = "Interrupted"
	StatusNotRun            = "Not run"
)

// StatusWords are the words in the order the documentation lists them.
var StatusWords = []string{StatusPassed, StatusFailsAsExpected, StatusSkippedAsExpected, StatusErrorsAsExpected,
	StatusFailed, StatusSkipped, StatusError, StatusInterrupted, StatusNotRun}

// Progress is how far an interrupted run got: Finished of Planned units
// ("cells", "runs", "cases"), for "Interrupted (120 of 243 cells
// finished)". A zero Planned means not known.
type Progress struct {
	Finished int
	Planned  int
	Unit     string // the plural noun; "" reads as "cases"
}

// Interrupt finishes r as INTERRUPTED in the one wording every command's
// interrupted result has (InterruptedSummary), with how far it got as its
// Progress and why, with what the finished part showed, as its detail.
func (r *Result) Interrupt(why string, p Progress, stopped int, soFar string, end time.Time) {
	r.Progress, r.Detail = p, interruptedDetail(why, soFar)
	r.Finish(Interrupted, InterruptedSummary(why, p, stopped, soFar), end)
}

// InterruptedSummary is the one wording of an interrupted run: why (the
// signal, "interrupted by SIGINT"), how far it got, and what the part that
// finished showed so far:
//
//	interrupted by SIGINT: 54 of 1000 runs finished, 1 stopped while it ran, 945 not started; so far every finished run as expected
//
// stopped counts the units the interruption stopped while they ran (they
// count in no outcome; a count of none is left out, as are no units not
// started); soFar is "" when the finished part showed nothing to tell. A
// Progress with nothing planned says only why.
func InterruptedSummary(why string, p Progress, stopped int, soFar string) string {
	if why == "" {
		why = "interrupted"
	}
	summary := why
	if p.Planned > 0 {
		unit := p.Unit
		if unit == "" {
			unit = "cases"
		}
		summary += fmt.Sprintf(": %d of %d %s finished", p.Finished, p.Planned, unit)
		if stopped > 0 {
			summary += fmt.Sprintf(", %d stopped while %s ran", stopped, words.Plural(stopped, "it", "they"))
		}
		if notStarted := p.Planned - p.Finished - stopped; notStarted > 0 {
			summary += fmt.Sprintf(", %d not started", notStarted)
		}
	}
	if soFar != "" {
		summary += "; so far " + soFar
	}
	return summary
}

// interruptedDetail is what an interrupted row says after its count: why,
// and what the finished part showed.
func interruptedDetail(why, soFar string) string {
	if why == "" {
		why = "interrupted"
	}
	if soFar != "" {
		return why + "; so far " + soFar
	}
	return why
}

// InterruptedDetail is interruptedDetail for a result whose summary a
// command composes itself with InterruptedSummary.
func InterruptedDetail(why, soFar string) string { return interruptedDetail(why, soFar) }

// text is "120 of 243 cells finished".
func (p Progress) text() string {
	unit := p.Unit
	if unit == "" {
		unit = "cases"
	}
	return fmt.Sprintf("%d of %d %s finished", p.Finished, p.Planned, unit)
}

// verb is how a count names runs or sub-tests that gave v.
func verb(v Verdict) string {
	switch v {
	case Pass:
		return "passed"
	case Fail:
		return "failed"
	case Skip:
		return "skipped"
	case Interrupted:
		return "interrupted"
	}
	return "errored"
}

// metWord is the word of a check that met its expectation.
func metWord(expect Verdict) string {
	switch expect {
	case Fail:
		return StatusFailsAsExpected
	case Skip:
		return StatusSkippedAsExpected
	case Error:
		return StatusErrorsAsExpected
	}
	return StatusPassed
}

// composeStatus is "word (count): text", the count's parts joined by "; ",
// without the colon when text is empty.
func composeStatus(word string, count []string, text string) string {
	s := word
	if len(count) > 0 {
		s += " (" + strings.Join(count, "; ") + ")"
	}
	if text = strings.TrimSpace(words.OneLine(text)); text != "" {
		s += ": " + text
	}
	return s
}

// runsCount is "20/20 runs failed": k of n runs that gave v, without a
// verb for PASS, as a PR checklist writes "Passed (26/26)".
func runsCount(k, n int, v Verdict) string {
	s := fmt.Sprintf("%d/%d %s", k, n, words.Plural(n, "run", "runs"))
	if v != Pass {
		s += " " + verb(v)
	}
	return s
}

// casesCount is the sub-tests that gave v: "24/24" (PASS), "3/24 failed"
// (FAIL: those that did not pass), with the unit when it is not
// sub-tests ("243/243 cells").
func casesCount(c Cases, v Verdict) string {
	k := c.Passed
	if v != Pass {
		k = c.Total - c.Passed
	}
	s := fmt.Sprintf("%d/%d", k, c.Total)
	if c.Unit != "" {
		s += " " + c.Unit
	}
	if v != Pass {
		s += " " + verb(v)
	}
	return s
}

// legacyDetail is what a status written before results carried their
// detail apart (read from a miotool/result/v3 or miotool/suite/v3 file,
// where a command worded it in place of the verdict's word) says beyond
// the verdict: a status that only restates
// the verdict ("Passed (24/24)", "Interrupted (3/24 finished)",
// "Skipped: 243 cells measured, none compared") says nothing more, since
// the composed status has the word and the count; any other
// ("Fails with --reclaim=lazy (global), passes with --reclaim=worker") is
// the detail.
func legacyDetail(status string) string {
	for _, w := range append(slices.Clone(StatusWords), "Unexpected", "Interrupted:") {
		rest, ok := strings.CutPrefix(status, w)
		if ok && (rest == "" || strings.HasPrefix(rest, " (") || strings.HasPrefix(rest, ":") || strings.HasPrefix(rest, " after") ||
			strings.HasPrefix(rest, ",")) {
			return ""
		}
	}
	return status
}

// ChecklistStatus is the result's Testing Checklist status, composed from
// its verdict, its count and its reason or detail:
//
//	PASS         Passed (24/24): <detail>          Passed (1/1 run) without sub-tests
//	FAIL         Failed (3/24 failed): <detail>    Failed (1/1 run failed)
//	SKIP         Skipped (1/1 run skipped): <summary>
//	ERROR        Error (1/1 run errored): <summary>    Error (1/2 runs errored) with a count
//	INTERRUPTED  Interrupted (120 of 243 cells finished): <summary>
func (r *Result) ChecklistStatus() string {
	detail := r.Detail
	counted := r.Cases.Total > 0
	switch r.Verdict {
	case Pass, Fail:
		word := StatusPassed
		if r.Verdict == Fail {
			word = StatusFailed
		}
		count := runsCount(1, 1, r.Verdict)
		if counted {
			count = casesCount(r.Cases, r.Verdict)
		}
		return composeStatus(word, []string{count}, detail)
	case Skip:
		return composeStatus(StatusSkipped, []string{runsCount(1, 1, Skip)}, r.Summary)
	case Error:
		count := runsCount(1, 1, Error)
		if counted {
			count = casesCount(r.Cases, Error)
		}
		return composeStatus(StatusError, []string{count}, r.Summary)
	case Interrupted:
		p := r.Progress
		if p.Planned <= 0 {
			p = Progress{Finished: 0, Planned: 1, Unit: "run"}
		}
		// The count is in the brackets: after the colon, why and what the
		// finished part showed (Interrupt's detail), else the summary.
		why := r.Summary
		if detail != "" {
			why = detail
		}
		return composeStatus(StatusInterrupted, []string{p.text()}, why)
	}
	return composeStatus(StatusError, []string{runsCount(1, 1, Error)}, r.Summary)
}

// status is the check's Status cell in its suite; planned is how many
// runs the suite meant to make of it (0: as many as it has), why what
// stopped the suite ("" when nothing did).
//
// A check that met its expectation counts what it met: "Passed (24/24)"
// for one run's 24 sub-tests, "Passed (24/24; 20/20 runs)" over 20 runs,
// "Passed (2/2 runs)" without sub-tests, "Fails as expected (20/20 runs
// failed)", with what the runs found after a colon when they all say the
// same. One that did not says how many runs gave which verdict and what
// was expected: "Failed (3/20 runs failed; expected PASS)", "Error (1/2
// runs errored; expected PASS): <the first error's summary>". A run an
// interruption stopped: "Interrupted (2 of 20 runs finished): <why>
// (after 2.03s)". Runs that skipped: "Skipped (1/1 run skipped; expected
// PASS): <why>". Not run: "Not run (<reason>)".
func (c *SuiteCheck) status(planned int, why string) string {
	n := len(c.Runs)
	if n == 0 {
		reason := c.Skip
		if reason == "" {
			reason = "no run recorded"
		}
		return composeStatus(StatusNotRun, []string{reason}, "")
	}
	if c.Met() {
		return composeStatus(metWord(c.Expect), c.metCount(), c.runDetail())
	}
	switch c.Outcome() {
	case Skip:
		first := c.firstRun(c.runSkipped)
		return composeStatus(StatusSkipped, []string{runsCount(c.skippedRuns(), n, Skip), "expected " + string(c.Expect)}, first.Summary)
	case Interrupted:
		return composeStatus(StatusInterrupted, []string{c.interruptedCount(planned)}, c.interruptedReason(why))
	}
	word, text := StatusFailed, c.unmetDetail()
	if c.Outcome() == Error {
		word = StatusError
		first := c.firstRun(func(r SuiteRun) bool { return !c.runMet(r) && (r.Verdict == Error || c.mismatch(r) != "") })
		text = first.Summary
		if m := c.mismatch(first); m != "" {
			text = m
		}
	}
	return composeStatus(word, append(c.unmetCounts(), "expected "+string(c.Expect)), text)
}

// firstRun is the first run keep accepts.
func (c *SuiteCheck) firstRun(keep func(SuiteRun) bool) SuiteRun {
	for _, r := range c.Runs {
		if keep(r) {
			return r
		}
	}
	return SuiteRun{}
}

// metCount is the count of a check whose every run met its expectation:
// the sub-tests when every run counted them ("24/24", "44/44 in all"
// when their counts differ), then the runs when there are several, or
// the runs alone.
func (c *SuiteCheck) metCount() []string {
	n := len(c.Runs)
	runs := runsCount(n, n, c.Expect)
	cases, ok := c.casesSum()
	if !ok || (c.Expect != Pass && c.Expect != Fail) {
		return []string{runs}
	}
	if cases.Unit == "runs" && n > 1 {
		// Each result counted runs of its own (the shards of a repeat):
		// they add up to the runs of the check.
		sum, _ := c.casesTotal()
		return []string{casesCount(sum, c.Expect)}
	}
	text := casesCount(cases, c.Expect)
	if !c.sameCases() {
		text += " in all"
	}
	if n == 1 {
		return []string{text}
	}
	return []string{text, runs}
}

// casesSum is the sub-tests the check's runs counted: one run's when
// every run counted the same, else their sum; false when some run did not
// count them.
func (c *SuiteCheck) casesSum() (Cases, bool) {
	sum, ok := c.casesTotal()
	if ok && c.sameCases() {
		return c.Runs[0].Cases, true
	}
	return sum, ok
}

// casesTotal is the sum of the sub-tests of every run; false when some
// run did not count them.
func (c *SuiteCheck) casesTotal() (Cases, bool) {
	var sum Cases
	for _, r := range c.Runs {
		if r.Cases.Total <= 0 {
			return Cases{}, false
		}
		sum.Passed += r.Cases.Passed
		sum.Total += r.Cases.Total
		sum.Unit = r.Cases.Unit
	}
	return sum, true
}

func (c *SuiteCheck) sameCases() bool {
	for _, r := range c.Runs[1:] {
		if r.Cases != c.Runs[0].Cases {
			return false
		}
	}
	return true
}

// unmetDetail is what the runs that missed the expectation found, when
// they all say the same.
func (c *SuiteCheck) unmetDetail() string {
	d, first := "", true
	for _, r := range c.Runs {
		if r.stopped() || c.runMet(r) || c.runSkipped(r) {
			continue
		}
		if !first && r.detail() != d {
			return ""
		}
		d, first = r.detail(), false
	}
	return d
}

// runDetail is what the runs found, when every run says the same.
func (c *SuiteCheck) runDetail() string {
	d := c.Runs[0].detail()
	for _, r := range c.Runs[1:] {
		if r.detail() != d {
			return ""
		}
	}
	return d
}

// detail is what the run's result found beyond its verdict.
func (r SuiteRun) detail() string { return r.Detail }

// unmetCounts are the runs of a check that did not meet its expectation,
// by verdict: "3/20 runs failed", "1/20 runs errored on node2"; the
// sub-tests of a single run when it counted them ("1/24 failed").
func (c *SuiteCheck) unmetCounts() []string {
	n := len(c.Runs)
	if n == 1 {
		r := c.Runs[0]
		if r.Cases.Total > 0 && (r.Verdict == Pass || r.Verdict == Fail) && c.mismatch(r) == "" {
			return []string{casesCount(r.Cases, r.Verdict)}
		}
	}
	hosts := c.hosts()
	var parts []string
	add := func(what string, keep func(SuiteRun) bool) {
		k := 0
		var on []string
		for _, r := range c.Runs {
			if !keep(r) {
				continue
			}
			k++
			if r.Host != "" && !slices.Contains(on, r.Host) {
				on = append(on, r.Host)
			}
		}
		if k == 0 {
			return
		}
		part := fmt.Sprintf("%d/%d %s %s", k, n, words.Plural(n, "run", "runs"), what)
		if len(hosts) > 1 {
			part += " on " + strings.Join(on, ", ")
		}
		parts = append(parts, part)
	}
	add("not compared", func(r SuiteRun) bool { return c.mismatch(r) != "" })
	for _, v := range []Verdict{Error, Fail, Pass, Skip, Interrupted} {
		add(verb(v), func(r SuiteRun) bool { return r.Verdict == v && !c.runMet(r) && c.mismatch(r) == "" })
	}
	return parts
}

// interruptedCount is "2 of 20 runs finished": the runs that finished of
// those planned, or, for one run that said how far it got before it was
// stopped, its own progress ("120 of 243 cells finished").
func (c *SuiteCheck) interruptedCount(planned int) string {
	n := len(c.Runs)
	if n == 1 && c.Runs[0].Progress.Planned > 0 && planned <= 1 {
		return c.Runs[0].Progress.text()
	}
	planned = max(planned, n)
	return Progress{Finished: n - c.stoppedRuns(), Planned: planned, Unit: words.Plural(planned, "run", "runs")}.text()
}

// interruptedReason is what stopped the check's run and how long it ran:
// "interrupted by SIGINT after 2.03s" (what stopped the suite), else what
// the stopped run said.
func (c *SuiteCheck) interruptedReason(why string) string {
	var stopped time.Duration
	for _, r := range c.Runs {
		if r.stopped() {
			stopped += r.Duration
		}
	}
	if why == "" {
		if why = c.firstRun(SuiteRun.stopped).Summary; why != "" {
			return why
		}
		why = "interrupted"
	}
	return why + " after " + durationText(stopped)
}
