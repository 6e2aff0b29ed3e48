// Package find turns a find's result into a report: the ranked solvers, the
// stream tracker's counters and the find-db record, and the verdict.
package find

import (
	"fmt"
	"strings"
	"time"

	"miotool/internal/finder"
	"miotool/internal/report"
	"miotool/internal/scenario"
	"miotool/internal/streams"
)

// Fill writes a find's ranked table, the tracker's counters and the
// find-db record into r, and decides the verdict: PASS when find waited on
// naive no longer than its bound and every timed solver's output (the
// chosen one's above all) matched the reference.
func Fill(r *report.Result, res *finder.Result, afterFind, afterTeardown streams.Counters, end time.Time) {
	t := r.AddTable(fmt.Sprintf("find %s", res.Key), "rank", "solver", "algorithm", "time (ms)", "workspace", "status", "detail")
	for i, e := range res.Entries {
		tm := "-"
		if e.Status == finder.StatusOK || e.Status == finder.StatusFailedVerification {
			tm = fmt.Sprintf("%.4f", e.TimeMs)
		}
		detail := e.Detail
		if e.Status == finder.StatusOK && e.Check != nil {
			detail = scenario.JoinDetail(detail, fmt.Sprintf("verified: max |err| %.3g", e.Check.MaxAbs))
		}
		if e.Samples > 0 {
			detail = scenario.JoinDetail(detail, fmt.Sprintf("%d samples, %d dropped", e.Samples, e.Dropped))
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
