package repro

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"miotool/internal/finder"
	"miotool/internal/hip"
	"miotool/internal/report"
	"miotool/internal/streams"
)

// FillFind writes a find's ranked table, the tracker's counters and the
// find-db record into r, and decides the verdict: PASS when find waited on
// naive no longer than its bound and every timed solver's output (the
// chosen one's above all) matched the reference.
func FillFind(r *report.Result, res *finder.Result, afterFind, afterTeardown streams.Counters, end time.Time) {
	t := r.AddTable(fmt.Sprintf("find %s", res.Key), "rank", "solver", "algorithm", "time (ms)", "workspace", "status", "detail")
	for i, e := range res.Entries {
		tm := "-"
		if e.Status == finder.StatusOK || e.Status == finder.StatusFailedVerification {
			tm = fmt.Sprintf("%.4f", e.TimeMs)
		}
		detail := e.Detail
		if e.Status == finder.StatusOK && e.Check != nil {
			detail = joinDetail(detail, fmt.Sprintf("verified: max |err| %.3g", e.Check.MaxAbs))
		}
		if e.Samples > 0 {
			detail = joinDetail(detail, fmt.Sprintf("%d samples, %d dropped", e.Samples, e.Dropped))
		}
		rank := fmt.Sprint(i + 1)
		if e.Status != finder.StatusOK {
			rank = "-"
		}
		t.AddRow(rank, e.Solver, strings.TrimPrefix(e.Algorithm, "miopenConvolution"), tm, fmt.Sprint(e.Workspace), string(e.Status), detail)
	}
	fillCounters(r, "stream tracker", afterFind, afterTeardown)
	if res.NaiveDeadlineMs > 0 {
		r.Note("naive deadline %.4g ms (MIOPEN_NAIVE_TIMEOUT percent of the best time); find waited %.4g ms on it", res.NaiveDeadlineMs, res.NaiveWaitMs)
	}
	if res.NaiveAbandoned && afterTeardown.LastAbandonedFor > 0 {
		r.Note("the abandoned naive evaluation ran on for %s after find moved on (until its stream was reclaimed)", afterTeardown.LastAbandonedFor.Round(time.Millisecond))
	}
	if res.DBRecord != "" {
		verb := "find-db record written to"
		if res.FromDB {
			verb = "find-db record used from"
		}
		r.Note("%s %s: %s", verb, res.DBPath, res.DBRecord)
	}
	for _, w := range res.DBWarnings {
		r.Note("find-db: %s", w)
	}
	r.Note("find took %s", res.Elapsed.Round(time.Millisecond))
	failed := res.FailedVerification()
	switch {
	case res.Chosen == "":
		r.Finish(report.Fail, "no solver produced a result", end)
	case !res.WithinBound():
		r.Finish(report.Fail, fmt.Sprintf("find waited %.4g ms on naive, past its %.4g ms deadline", res.NaiveWaitMs, res.NaiveDeadlineMs), end)
	case !res.Verified:
		r.Finish(report.Fail, fmt.Sprintf("the chosen solver %s failed verification", res.Chosen), end)
	case len(failed) > 0:
		r.Finish(report.Fail, fmt.Sprintf("chose %s (verified), but %s failed verification", res.Chosen, strings.Join(failed, ", ")), end)
	default:
		s := fmt.Sprintf("chose %s, verified against the CPU reference", res.Chosen)
		if res.NaiveAbandoned {
			s += "; naive timed out and was abandoned, find stayed within its bound"
		}
		if res.FromDB {
			s = fmt.Sprintf("took %s from the find-db (fast mode), verified against the CPU reference", res.Chosen)
		}
		r.Finish(report.Pass, s, end)
	}
}

func fillCounters(r *report.Result, title string, a, b streams.Counters) {
	t := r.AddTable(title, "counter", "after find", "after teardown")
	row := func(name string, x, y int64) { t.AddRow(name, fmt.Sprint(x), fmt.Sprint(y)) }
	row("acquired", a.Acquired, b.Acquired)
	row("abandoned", a.Abandoned, b.Abandoned)
	row("reclaimed by callback", a.ReclaimedByCallback, b.ReclaimedByCallback)
	row("reclaimed by backstop", a.ReclaimedByBackstop, b.ReclaimedByBackstop)
	row("scratch bytes pinned now", a.ScratchBytesPinned, b.ScratchBytesPinned)
	row("worker wake-ups", a.WorkerWakeups, b.WorkerWakeups)
}

// caseRun is one run of one combination, as the verdict logic sees it.
type caseRun struct {
	policy   streams.Policy
	mode     string // "" where the mode is not an axis
	key      string // the combination
	expected Outcome
	measured Outcome
	end      hip.Code
	detail   string
}

// group is every run of one combination, in first-seen order.
type group struct {
	runs []caseRun
}

func groupRuns(runs []caseRun) []*group {
	var order []*group
	by := map[string]*group{}
	for _, r := range runs {
		g := by[r.key]
		if g == nil {
			g = &group{}
			by[r.key] = g
			order = append(order, g)
		}
		g.runs = append(g.runs, r)
	}
	return order
}

// measured is "FAIL" for one run, "FAIL (20/20)" for a steady repeat, and
// the split otherwise ("PASS 18/20, FAIL 2/20").
func (g *group) measured() string {
	counts := map[Outcome]int{}
	var seen []Outcome
	for _, r := range g.runs {
		if counts[r.measured] == 0 {
			seen = append(seen, r.measured)
		}
		counts[r.measured]++
	}
	n := len(g.runs)
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

// agrees reports whether every run measured the expected outcome.
func (g *group) agrees() bool {
	for _, r := range g.runs {
		if r.measured != r.expected {
			return false
		}
	}
	return true
}

// endCodes lists the end-capture codes seen, with counts when repeated.
func (g *group) endCodes(d hip.Dialect) string {
	counts := map[hip.Code]int{}
	var seen []hip.Code
	for _, r := range g.runs {
		if counts[r.end] == 0 {
			seen = append(seen, r.end)
		}
		counts[r.end]++
	}
	var parts []string
	for _, c := range seen {
		s := codeCell(c, d)
		if len(g.runs) > 1 {
			s += fmt.Sprintf(" x%d", counts[c])
		}
		parts = append(parts, s)
	}
	return strings.Join(parts, ", ")
}

// detail is the first disagreeing run's detail, else the first run's.
func (g *group) detail() string {
	for _, r := range g.runs {
		if r.measured != r.expected {
			return r.detail
		}
	}
	return g.runs[0].detail
}

// FillCapture writes the capture cases into r, one row per combination
// (repeated runs counted in the row). One combination: its own verdict.
// Several: PASS when every run measured the expected outcome (the bug
// reproduces where the rules say it must and the fix holds elsewhere), with
// a checklist status that says which policies fail.
func FillCapture(r *report.Result, cases []CaptureCase, d hip.Dialect, end time.Time) {
	t := r.AddTable("capture after an abandoned naive evaluation", "reclaim", "mode", "variant", "expected", "measured", "end capture", "graph output", "detail")
	t.FlagColumn = "differs from expected"
	runs := make([]caseRun, len(cases))
	for i, c := range cases {
		runs[i] = caseRun{c.Policy, c.Mode.String(), fmt.Sprintf("%s/%s/%s", c.Policy, c.Mode, c.Variant), c.Expected, c.Measured, c.EndCapture, c.Detail}
	}
	groups := groupRuns(runs)
	byKey := map[string][]CaptureCase{}
	for i, c := range cases {
		byKey[runs[i].key] = append(byKey[runs[i].key], c)
	}
	for _, g := range groups {
		cs := byKey[g.runs[0].key]
		first := cs[0]
		out := "-"
		okN, endedN := 0, 0
		for _, c := range cs {
			if c.EndCapture == hip.Success {
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
		cells := []string{string(first.Policy), first.Mode.String(), string(first.Variant), string(first.Expected), g.measured(),
			g.endCodes(d), out, g.detail()}
		if g.agrees() {
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
	r.Count("runs", int64(len(cases)))
	r.Count("runs whose find was repeated until naive overran", int64(retried))
	r.Count("abandoned", sum.Abandoned)
	r.Count("reclaimed by callback", sum.ReclaimedByCallback)
	r.Count("reclaimed by backstop", sum.ReclaimedByBackstop)
	r.Count("of which by the launch path", sum.ReclaimedByLaunch)
	finishMatrix(r, groups, end)
}

// FillReplay writes the replay cases into r, with the same verdict rules.
func FillReplay(r *report.Result, cases []ReplayCase, d hip.Dialect, end time.Time) {
	t := r.AddTable("replay-only workload: is the abandoned evaluation's scratch released?", "reclaim", "expected", "measured", "end capture", "pinned after find", "pinned at deadline", "released after (median)", "replays", "detail")
	t.FlagColumn = "differs from expected"
	runs := make([]caseRun, len(cases))
	for i, c := range cases {
		runs[i] = caseRun{c.Policy, "", string(c.Policy), c.Expected, c.Measured, c.EndCapture, c.Detail}
	}
	groups := groupRuns(runs)
	byPolicy := map[streams.Policy][]ReplayCase{}
	for _, c := range cases {
		byPolicy[c.Policy] = append(byPolicy[c.Policy], c)
	}
	for _, g := range groups {
		cs := byPolicy[g.runs[0].policy]
		first := cs[0]
		var released []time.Duration
		okN, ranN := 0, 0
		for _, c := range cs {
			if c.ReleasedAfter > 0 {
				released = append(released, c.ReleasedAfter)
			}
			if c.EndCapture == hip.Success {
				ranN++
				if c.ReplaysOK {
					okN++
				}
			}
		}
		rel := "not released"
		if len(released) > 0 {
			sort.Slice(released, func(i, j int) bool { return released[i] < released[j] })
			rel = released[len(released)/2].Round(10 * time.Microsecond).String()
			if len(released) < len(cs) {
				rel += fmt.Sprintf(" (%d of %d runs)", len(released), len(cs))
			}
		}
		reps := fmt.Sprintf("%d per run", first.Replays)
		if ranN > 0 {
			if okN == ranN {
				reps += ", output correct"
			} else {
				reps += fmt.Sprintf(", output WRONG in %d of %d", ranN-okN, ranN)
			}
		}
		cells := []string{string(first.Policy), string(first.Expected), g.measured(), g.endCodes(d),
			fmt.Sprint(first.PinnedAfterFind), fmt.Sprint(cs[len(cs)-1].PinnedAtEnd), rel, reps, g.detail()}
		if g.agrees() {
			t.AddRow(cells...)
		} else {
			t.AddFlaggedRow("!", cells...)
		}
	}
	r.Count("runs", int64(len(cases)))
	finishMatrix(r, groups, end)
}

func codeCell(c hip.Code, d hip.Dialect) string {
	return fmt.Sprintf("%s (%d)", c.Name(d), int(c))
}

// finishMatrix sets the verdict and checklist status of a set of groups.
func finishMatrix(r *report.Result, groups []*group, end time.Time) {
	if len(groups) == 0 {
		r.Finish(report.Error, "no case ran", end)
		return
	}
	var inconclusive, disagree []string
	failsBy := map[streams.Policy][]string{}
	passes := map[streams.Policy]bool{}
	for _, g := range groups {
		for _, run := range g.runs {
			switch {
			case run.measured == Inconclusive:
				inconclusive = append(inconclusive, run.key)
			case run.measured != run.expected:
				disagree = append(disagree, fmt.Sprintf("%s measured %s, expected %s", run.key, run.measured, run.expected))
			}
			if run.measured == Fail {
				failsBy[run.policy] = append(failsBy[run.policy], run.mode)
			} else if run.measured == Pass {
				passes[run.policy] = true
			}
		}
	}
	r.Status = matrixStatus(failsBy, passes)
	switch {
	case len(inconclusive) > 0:
		r.Finish(report.Error, "the scenario's precondition did not hold (no abandoned naive evaluation) in: "+strings.Join(uniqueNonEmpty(inconclusive), ", "), end)
	case len(groups) == 1:
		g := groups[0]
		r.Status = ""
		n, passed := len(g.runs), 0
		for _, run := range g.runs {
			if run.measured == Pass {
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
			r.Finish(report.Fail, g.detail(), end)
		default:
			r.Status = fmt.Sprintf("Failed (%d/%d)", n-passed, n)
			r.Finish(report.Fail, fmt.Sprintf("failed in %d of %d runs: %s", n-passed, n, g.detail()), end)
		}
	case len(disagree) > 0:
		r.Finish(report.Fail, "differs from the expectation: "+strings.Join(disagree, "; "), end)
	default:
		runs := 0
		for _, g := range groups {
			runs += len(g.runs)
		}
		r.Finish(report.Pass, fmt.Sprintf("all %d runs of %d combinations as expected: %s", runs, len(groups), r.Status), end)
	}
}

// matrixStatus is a checklist status such as "Fails with --reclaim=lazy
// (global, thread-local), passes with --reclaim=guarded, --reclaim=worker".
func matrixStatus(failsBy map[streams.Policy][]string, passes map[streams.Policy]bool) string {
	var fails, oks []string
	for _, p := range streams.Policies {
		if ms, ok := failsBy[p]; ok {
			s := "--reclaim=" + string(p)
			if modes := uniqueNonEmpty(ms); len(modes) > 0 {
				s += " (" + strings.Join(modes, ", ") + ")"
			}
			fails = append(fails, s)
		} else if passes[p] {
			oks = append(oks, "--reclaim="+string(p))
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
