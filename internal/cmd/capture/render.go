package capture

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"miotool/internal/cli"
	"miotool/internal/hip"
	"miotool/internal/report"
	"miotool/internal/scenario"
	capturescen "miotool/internal/scenario/capture"
	"miotool/internal/streams"
)

// MatrixRun is one run of one combination, as the matrix verdict that
// capture and replay share sees it.
type MatrixRun struct {
	Policy   streams.Policy
	Mode     string // "" where the mode is not an axis
	Key      string // the combination
	Expected scenario.Outcome
	Measured scenario.Outcome
	End      hip.Code
	Detail   string
}

// MatrixGroup is every run of one combination, in first-seen order.
type MatrixGroup struct {
	Runs []MatrixRun
}

// GroupRuns groups runs by combination, in first-seen order.
func GroupRuns(runs []MatrixRun) []*MatrixGroup {
	var order []*MatrixGroup
	by := map[string]*MatrixGroup{}
	for _, r := range runs {
		g := by[r.Key]
		if g == nil {
			g = &MatrixGroup{}
			by[r.Key] = g
			order = append(order, g)
		}
		g.Runs = append(g.Runs, r)
	}
	return order
}

// Measured is "FAIL" for one run, "FAIL (20/20)" for a steady repeat, and
// the split otherwise ("PASS 18/20, FAIL 2/20").
func (g *MatrixGroup) Measured() string {
	counts := map[scenario.Outcome]int{}
	var seen []scenario.Outcome
	for _, r := range g.Runs {
		if counts[r.Measured] == 0 {
			seen = append(seen, r.Measured)
		}
		counts[r.Measured]++
	}
	n := len(g.Runs)
	if len(seen) == 1 {
		if n == 1 {
			return string(seen[0])
		}
		return fmt.Sprintf("%s (%d/%d)", seen[0], n, n)
	}
	var parts []string
	for _, o := range seen {
		parts = append(parts, fmt.Sprintf("%s %d/%d", o, counts[o], n))
	}
	return strings.Join(parts, ", ")
}

// Agrees reports whether every run measured the expected outcome; a run
// an interruption stopped measured nothing, and does not disagree.
func (g *MatrixGroup) Agrees() bool {
	for _, r := range g.Runs {
		if r.Disagrees() {
			return false
		}
	}
	return true
}

// Disagrees reports a finished run that measured another outcome than
// the expected one.
func (r MatrixRun) Disagrees() bool {
	return r.Measured != r.Expected && r.Measured != scenario.Interrupted
}

// EndCodes lists the end-capture codes seen, with counts when repeated.
func (g *MatrixGroup) EndCodes(d hip.Dialect) string {
	counts := map[hip.Code]int{}
	var seen []hip.Code
	for _, r := range g.Runs {
		if r.Measured == scenario.Interrupted {
			continue // it may not have reached the end of its capture
		}
		if counts[r.End] == 0 {
			seen = append(seen, r.End)
		}
		counts[r.End]++
	}
	if len(seen) == 0 {
		return "-"
	}
	var parts []string
	for _, c := range seen {
		s := CodeCell(c, d)
		if len(g.Runs) > 1 {
			s += fmt.Sprintf(" x%d", counts[c])
		}
		parts = append(parts, s)
	}
	return strings.Join(parts, ", ")
}

// Detail is the first disagreeing run's detail, else the first finished
// run's, else the first run's.
func (g *MatrixGroup) Detail() string {
	for _, r := range g.Runs {
		if r.Disagrees() {
			return r.Detail
		}
	}
	for _, r := range g.Runs {
		if r.Measured != scenario.Interrupted {
			return r.Detail
		}
	}
	return g.Runs[0].Detail
}

// fillCases writes the capture cases into r, one row per combination
// (repeated runs counted in the row). One combination: its own verdict.
// Several: PASS when every run measured the expected outcome (the bug
// reproduces where the rules say it must and the fix holds elsewhere), with
// a checklist status that says which policies fail.
func fillCases(r *report.Result, cases []capturescen.Case, d hip.Dialect, stop *Interruption, end time.Time) {
	t := r.AddTable("capture after an abandoned naive evaluation", "reclaim", "mode", "variant", "expected", "measured", "end capture", "graph output", "detail")
	t.FlagColumn = "differs from expected"
	runs := make([]MatrixRun, len(cases))
	for i, c := range cases {
		runs[i] = MatrixRun{Policy: c.Policy, Mode: c.Mode.String(), Key: fmt.Sprintf("%s/%s/%s", c.Policy, c.Mode, c.Variant),
			Expected: c.Expected, Measured: c.Measured, End: c.EndCapture, Detail: c.Detail}
	}
	groups := GroupRuns(runs)
	byKey := map[string][]capturescen.Case{}
	for i, c := range cases {
		byKey[runs[i].Key] = append(byKey[runs[i].Key], c)
	}
	for _, g := range groups {
		cs := byKey[g.Runs[0].Key]
		first := cs[0]
		out := "-"
		okN, endedN := 0, 0
		for _, c := range cs {
			if c.EndCapture == hip.Success && c.Measured != scenario.Interrupted {
				endedN++
				if c.OutputOK {
					okN++
				}
			}
		}
		if endedN > 0 {
			out = "correct"
			if okN < endedN {
				out = fmt.Sprintf("WRONG in %d of %d", endedN-okN, endedN)
			}
		}
		cells := []string{string(first.Policy), first.Mode.String(), string(first.Variant), string(first.Expected), g.Measured(),
			g.EndCodes(d), out, g.Detail()}
		if g.Agrees() {
			t.AddRow(cells...)
		} else {
			t.AddFlaggedRow("!", cells...)
		}
	}
	var sum streams.Counters
	for _, c := range cases {
		sum.Abandoned += c.Counters.Abandoned
		sum.ReclaimedByCallback += c.Counters.ReclaimedByCallback
		sum.ReclaimedByBackstop += c.Counters.ReclaimedByBackstop
		sum.ReclaimedByLaunch += c.Counters.ReclaimedByLaunch
	}
	retried := 0
	for _, c := range cases {
		if c.FindAttempts > 1 {
			retried++
		}
	}
	r.Count("runs", int64(FinishedRuns(runs)))
	r.Count("runs whose find was repeated until naive overran and still ran", int64(retried))
	r.Count("abandoned", sum.Abandoned)
	r.Count("reclaimed by callback", sum.ReclaimedByCallback)
	r.Count("reclaimed by backstop", sum.ReclaimedByBackstop)
	r.Count("of which by the launch path", sum.ReclaimedByLaunch)
	FinishMatrix(r, groups, stop, end)
}

// FinishedRuns counts the runs an interruption did not stop.
func FinishedRuns(runs []MatrixRun) int {
	n := 0
	for _, r := range runs {
		if r.Measured != scenario.Interrupted {
			n++
		}
	}
	return n
}

// CodeCell is a runtime code with its name in d and its number.
func CodeCell(c hip.Code, d hip.Dialect) string {
	return fmt.Sprintf("%s (%d)", c.Name(d), int(c))
}

// Interruption says that a signal stopped a run of cases: what it was
// ("interrupted by SIGINT") and how many cases were planned.
type Interruption struct {
	Reason  string
	Planned int
}

// FinishMatrix sets the verdict and checklist status of a set of groups.
// Stopped by an interruption (stop set), the verdict is INTERRUPTED and
// says how many runs finished, were interrupted and were not run, and
// what the finished ones showed so far.
func FinishMatrix(r *report.Result, groups []*MatrixGroup, stop *Interruption, end time.Time) {
	if stop != nil {
		finishInterrupted(r, groups, stop, end)
		return
	}
	if len(groups) == 0 {
		r.Finish(report.Error, "no case ran", end)
		return
	}
	var inconclusive, disagree []string
	failsBy := map[streams.Policy][]string{}
	passes := map[streams.Policy]bool{}
	for _, g := range groups {
		for _, run := range g.Runs {
			switch {
			case run.Measured == scenario.Inconclusive:
				inconclusive = append(inconclusive, run.Key)
			case run.Measured != run.Expected:
				disagree = append(disagree, fmt.Sprintf("%s measured %s, expected %s", run.Key, run.Measured, run.Expected))
			}
			if run.Measured == scenario.Fail {
				failsBy[run.Policy] = append(failsBy[run.Policy], run.Mode)
			} else if run.Measured == scenario.Pass {
				passes[run.Policy] = true
			}
		}
	}
	r.Status = matrixStatus(failsBy, passes)
	if len(groups) > 1 {
		// A matrix counts its combinations as a binary counts its
		// sub-tests: how many behaved as expected, of how many ran.
		agree := 0
		for _, g := range groups {
			if g.Agrees() {
				agree++
			}
		}
		r.Cases = report.Cases{Passed: agree, Total: len(groups)}
	}
	switch {
	case len(inconclusive) > 0:
		r.Finish(report.Error, "the scenario's precondition did not hold (no abandoned naive evaluation) in: "+strings.Join(uniqueNonEmpty(inconclusive), ", "), end)
	case len(groups) == 1:
		g := groups[0]
		r.Status = ""
		n, passed := len(g.Runs), 0
		for _, run := range g.Runs {
			if run.Measured == scenario.Pass {
				passed++
			}
		}
		switch {
		case passed == n && n == 1:
			r.Finish(report.Pass, "passed", end)
		case passed == n:
			r.Status = fmt.Sprintf("Passed (%d/%d)", n, n)
			r.Finish(report.Pass, fmt.Sprintf("passed in %d of %d runs", n, n), end)
		case n == 1:
			r.Finish(report.Fail, g.Detail(), end)
		default:
			r.Status = fmt.Sprintf("Failed (%d/%d)", n-passed, n)
			r.Finish(report.Fail, fmt.Sprintf("failed in %d of %d runs: %s", n-passed, n, g.Detail()), end)
		}
	case len(disagree) > 0:
		r.Finish(report.Fail, "differs from the expectation: "+strings.Join(disagree, "; "), end)
	default:
		runs := 0
		for _, g := range groups {
			runs += len(g.Runs)
		}
		r.Finish(report.Pass, fmt.Sprintf("all %d runs of %d combinations as expected: %s", runs, len(groups), r.Status), end)
	}
}

// finishInterrupted is the verdict of a run of cases a signal stopped:
// INTERRUPTED, with the runs that finished, the one stopped and those
// never reached counted, and what the finished runs showed so far. Only
// the finished runs count toward the checklist status's failures and
// passes, so nothing is claimed of a run that did not end.
func finishInterrupted(r *report.Result, groups []*MatrixGroup, stop *Interruption, end time.Time) {
	finished, stopped := 0, 0
	var inconclusive, disagree []string
	for _, g := range groups {
		for _, run := range g.Runs {
			switch {
			case run.Measured == scenario.Interrupted:
				stopped++
				continue
			case run.Measured == scenario.Inconclusive:
				inconclusive = append(inconclusive, run.Key)
			case run.Measured != run.Expected:
				disagree = append(disagree, fmt.Sprintf("%s measured %s, expected %s", run.Key, run.Measured, run.Expected))
			}
			finished++
		}
	}
	notRun := max(0, stop.Planned-finished-stopped)
	r.Count("interrupted", int64(stopped))
	r.Count("not run", int64(notRun))
	what := fmt.Sprintf("%s: %d of %d runs finished (%d interrupted, %d not run)", stop.Reason, finished, stop.Planned, stopped, notRun)
	switch {
	case finished == 0:
	case len(inconclusive) > 0:
		what += "; so far the precondition did not hold (no abandoned naive evaluation) in: " + strings.Join(uniqueNonEmpty(inconclusive), ", ")
	case len(disagree) > 0:
		what += "; so far differs from the expectation: " + strings.Join(disagree, "; ")
	default:
		what += "; so far every finished run as expected"
	}
	r.Status = fmt.Sprintf("Interrupted (%d/%d finished)", finished, stop.Planned)
	r.Finish(report.Interrupted, what, end)
}

// matrixStatus is a checklist status such as "Fails with --reclaim=lazy
// (global, thread-local), passes with --reclaim=guarded, --reclaim=worker".
func matrixStatus(failsBy map[streams.Policy][]string, passes map[streams.Policy]bool) string {
	var fails, oks []string
	for _, p := range streams.Policies {
		if ms, ok := failsBy[p]; ok {
			s := cli.ReclaimFlag(p)
			if modes := uniqueNonEmpty(ms); len(modes) > 0 {
				s += " (" + strings.Join(modes, ", ") + ")"
			}
			fails = append(fails, s)
		} else if passes[p] {
			oks = append(oks, cli.ReclaimFlag(p))
		}
	}
	var parts []string
	if len(fails) > 0 {
		parts = append(parts, "Fails with "+strings.Join(fails, ", "))
	}
	if len(oks) > 0 {
		w := "passes with "
		if len(parts) == 0 {
			w = "Passes with "
		}
		parts = append(parts, w+strings.Join(oks, ", "))
	}
	return strings.Join(parts, ", ")
}

func uniqueNonEmpty(ss []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, s := range ss {
		if s != "" && !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	sort.Strings(out)
	return out
}
