package find

import (
	"fmt"
	"strings"
	"time"

	"miotool/internal/finder"
	"miotool/internal/report"
	"miotool/internal/scenario"
	findscen "miotool/internal/scenario/find"
	"miotool/internal/streams"
)

// fill writes a find's outcome into r: the ranked table, the tracker's
// counters, notes (the find-db's warnings among them) and the verdict. A
// find-db that could not be written is a note, not a failure.
func fill(r *report.Result, o findscen.Options, out *findscen.Outcome, end time.Time) {
	res := out.Result
	if o.ProblemName != "" {
		r.Note("problem %s: %s", o.ProblemName, o.Problem)
	} else {
		r.Note("problem: %s", o.Problem)
	}
	r.Note("teardown (waits for abandoned evaluations) took %s", out.Teardown.Round(time.Millisecond))
	r.Note("reclaim policy %s, backlog cap %d (GPU_MAX_HW_QUEUES=%d)", o.Reclaim, out.MaxDraining, o.HWQueues)
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
		if e.Samples > 0 && !res.Immediate { // immediate mode's one run is no sample set
			detail = scenario.JoinDetail(detail, fmt.Sprintf("%d samples, %d dropped", e.Samples, e.Dropped))
		}
		rank := fmt.Sprint(i + 1)
		if e.Status != finder.StatusOK {
			rank = "-"
		}
		t.AddRow(rank, e.Solver, strings.TrimPrefix(e.Algorithm, "miopenConvolution"), tm, fmt.Sprint(e.Workspace), string(e.Status), detail)
	}
	counters(r, "stream tracker", out.AfterFind, out.AfterTeardown)
	if res.NaiveDeadlineMs > 0 {
		r.Note("naive deadline %.4g ms (MIOPEN_NAIVE_TIMEOUT percent of the best time); find waited %.4g ms on it", res.NaiveDeadlineMs, res.NaiveWaitMs)
	}
	if res.NaiveAbandoned && out.AfterTeardown.LastAbandonedFor > 0 {
		r.Note("the abandoned naive evaluation ran on for %s after find moved on (until its stream was reclaimed)", out.AfterTeardown.LastAbandonedFor.Round(time.Millisecond))
	}
	switch {
	case res.FromDB:
		r.Note("find-db record used from %s: %s", res.DBPath, res.DBRecord)
	case res.DBWritten:
		r.Note("find-db record written to %s: %s", res.DBPath, res.DBRecord)
	}
	if res.Mode != finder.ModeNormal && !res.Immediate {
		r.Note("find-db (%s mode): %s", res.Mode, res.Lookup)
	}
	for _, w := range res.Warnings {
		r.Note("%s", w)
	}
	r.Note("find took %s", res.Elapsed.Round(time.Millisecond))
	verdict(r, res, end)
}

// verdict finishes r: PASS only when a solver was chosen, find stayed
// within the naive bound and every timed solver verified.
func verdict(r *report.Result, res *finder.Result, end time.Time) {
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
	case res.FromDB:
		r.Finish(report.Pass, fmt.Sprintf("took %s from the find-db (%s mode), verified against the CPU reference", res.Chosen, res.Mode), end)
	case res.Immediate:
		r.Finish(report.Pass, fmt.Sprintf("immediate-mode fallback chose %s (fast mode, find-db miss; not benchmarked), verified against the CPU reference", res.Chosen), end)
	default:
		s := fmt.Sprintf("chose %s, verified against the CPU reference", res.Chosen)
		if res.NaiveAbandoned {
			s += "; naive timed out and was abandoned, find stayed within its bound"
		}
		r.Finish(report.Pass, s, end)
	}
}

func counters(r *report.Result, title string, a, b streams.Counters) {
	t := r.AddTable(title, "counter", "after find", "after teardown")
	row := func(name string, x, y int64) { t.AddRow(name, fmt.Sprint(x), fmt.Sprint(y)) }
	row("acquired", a.Acquired, b.Acquired)
	row("abandoned", a.Abandoned, b.Abandoned)
	row("reclaimed by callback", a.ReclaimedByCallback, b.ReclaimedByCallback)
	row("reclaimed by backstop", a.ReclaimedByBackstop, b.ReclaimedByBackstop)
	row("scratch bytes pinned now", a.ScratchBytesPinned, b.ScratchBytesPinned)
	row("worker wake-ups", a.WorkerWakeups, b.WorkerWakeups)
}
