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

// FillCapture writes the capture cases into r. One case: its own verdict.
// Several: PASS when every measured outcome is the expected one (the bug
// reproduces where the rules say it must and the fix holds elsewhere), with
// a checklist status that says which policies fail.
func FillCapture(r *report.Result, cases []CaptureCase, d hip.Dialect, end time.Time) {
	t := r.AddTable("capture after an abandoned naive evaluation", "reclaim", "mode", "variant", "expected", "measured", "end capture", "graph output", "detail")
	t.FlagColumn = "differs from expected"
	for _, c := range cases {
		out := "-"
		if c.EndCapture == hip.Success {
			out = map[bool]string{true: "correct", false: "WRONG"}[c.OutputOK]
		}
		cells := []string{string(c.Policy), c.Mode.String(), string(c.Variant), string(c.Expected), string(c.Measured),
			codeCell(c.EndCapture, d), out, c.Detail}
		if c.Agrees() {
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
	r.Count("abandoned", sum.Abandoned)
	r.Count("reclaimed by callback", sum.ReclaimedByCallback)
	r.Count("reclaimed by backstop", sum.ReclaimedByBackstop)
	r.Count("of which by the launch path", sum.ReclaimedByLaunch)
	finishMatrix(r, len(cases), func(i int) (streams.Policy, string, Outcome, Outcome, string) {
		c := cases[i]
		return c.Policy, c.Mode.String(), c.Expected, c.Measured, codeCell(c.EndCapture, d) + " " + c.Detail
	}, end)
}

// FillReplay writes the replay cases into r, with the same verdict rules.
func FillReplay(r *report.Result, cases []ReplayCase, d hip.Dialect, end time.Time) {
	t := r.AddTable("replay-only workload: is the abandoned evaluation's scratch released?", "reclaim", "expected", "measured", "end capture", "pinned after find", "pinned at deadline", "released after", "replays", "detail")
	t.FlagColumn = "differs from expected"
	for _, c := range cases {
		rel := "not released"
		if c.ReleasedAfter > 0 {
			rel = c.ReleasedAfter.Round(10 * time.Microsecond).String()
		}
		reps := fmt.Sprintf("%d", c.Replays)
		if c.EndCapture == hip.Success {
			reps += map[bool]string{true: ", output correct", false: ", output WRONG"}[c.ReplaysOK]
		}
		cells := []string{string(c.Policy), string(c.Expected), string(c.Measured), codeCell(c.EndCapture, d),
			fmt.Sprint(c.PinnedAfterFind), fmt.Sprint(c.PinnedAtEnd), rel, reps, c.Detail}
		if c.Agrees() {
			t.AddRow(cells...)
		} else {
			t.AddFlaggedRow("!", cells...)
		}
	}
	finishMatrix(r, len(cases), func(i int) (streams.Policy, string, Outcome, Outcome, string) {
		c := cases[i]
		return c.Policy, "", c.Expected, c.Measured, c.Detail
	}, end)
}

func codeCell(c hip.Code, d hip.Dialect) string {
	return fmt.Sprintf("%s (%d)", c.Name(d), int(c))
}

// finishMatrix sets the verdict and checklist status of a set of cases.
func finishMatrix(r *report.Result, n int, at func(int) (streams.Policy, string, Outcome, Outcome, string), end time.Time) {
	if n == 0 {
		r.Finish(report.Error, "no case ran", end)
		return
	}
	var inconclusive, disagree []string
	failsBy := map[streams.Policy][]string{}
	passes := map[streams.Policy]bool{}
	for i := range n {
		p, mode, exp, got, _ := at(i)
		label := string(p)
		if mode != "" {
			label += "/" + mode
		}
		switch {
		case got == Inconclusive:
			inconclusive = append(inconclusive, label)
		case got != exp:
			disagree = append(disagree, fmt.Sprintf("%s measured %s, expected %s", label, got, exp))
		}
		if got == Fail {
			failsBy[p] = append(failsBy[p], mode)
		} else if got == Pass {
			passes[p] = true
		}
	}
	r.Status = matrixStatus(failsBy, passes)
	switch {
	case len(inconclusive) > 0:
		r.Finish(report.Error, "the scenario's precondition did not hold (no abandoned naive evaluation) in: "+strings.Join(inconclusive, ", "), end)
	case n == 1:
		_, _, _, got, detail := at(0)
		r.Status = ""
		if got == Pass {
			r.Finish(report.Pass, "passed", end)
		} else {
			r.Finish(report.Fail, detail, end)
		}
	case len(disagree) > 0:
		r.Finish(report.Fail, "differs from the expectation: "+strings.Join(disagree, "; "), end)
	default:
		r.Finish(report.Pass, fmt.Sprintf("all %d cases as expected: %s", n, r.Status), end)
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
