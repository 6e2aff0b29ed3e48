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

// fillInput is what fill renders: the find's options and outcome, and
// what the command knows beside them.
type fillInput struct {
	opts findscen.Options
	out  *findscen.Outcome
	// requireAbandoned: --require-abandoned, the naive evaluation's
	// abandonment is the check's precondition.
	requireAbandoned bool
	// interrupted says what stopped the find ("interrupted by SIGINT");
	// teardownInterrupted what stopped the teardown after it.
	interrupted, teardownInterrupted string
}

// fill writes a find's outcome into r: the ranked table, the tracker's
// counters, notes (the find-db's warnings among them) and the verdict. A
// find-db that could not be written is a note, not a failure. The
// teardown's figures are in it when the teardown has run.
func fill(r *report.Result, in fillInput, end time.Time) {
	o, out := in.opts, in.out
	if o.ProblemName != "" {
		r.Note("problem %s: %s", o.ProblemName, o.Problem)
	} else {
		r.Note("problem: %s", o.Problem)
	}
	if out.TornDown {
		r.Note("teardown (waits for abandoned evaluations) took %s", out.Teardown.Round(time.Millisecond))
	}
	r.Note("reclaim policy %s, backlog cap %d (GPU_MAX_HW_QUEUES=%d)", o.Reclaim, out.MaxDraining, o.HWQueues)
	rankTable(r, out.Result)
	if out.TornDown {
		counters(r, "stream tracker", out.AfterFind, out.AfterTeardown)
	} else {
		countersAfterFind(r, "stream tracker", out.AfterFind)
	}
	findNotes(r, in)
	verdict(r, in, end)
	if in.teardownInterrupted != "" {
		// Find had finished: nothing it planned was left, only the wait.
		r.Interrupt(in.teardownInterrupted+" during the teardown that waits for the abandoned naive evaluation", report.Progress{Finished: 1, Planned: 1, Unit: "find"}, 0,
			fmt.Sprintf("find had finished: %s, %s", r.Verdict, r.Summary), end)
	}
}

// rankTable adds the solvers, ranked, with their times and checks.
func rankTable(r *report.Result, res *finder.Result) {
	t := r.AddTable(fmt.Sprintf("find %s", res.Key), "rank", "solver", "algorithm", "time (ms)", "workspace", "status", "detail")
	for i, e := range res.Entries {
		tm := "-"
		if e.Status == finder.StatusOK || e.Status == finder.StatusFailedVerification || e.Status == finder.StatusInterrupted && e.Samples > 0 {
			tm = fmt.Sprintf("%.4f", e.TimeMs)
		}
		detail := e.Detail
		if e.Status == finder.StatusOK && e.Check != nil {
			detail = scenario.JoinDetail(detail, fmt.Sprintf("verified: max |err| %.3g", e.Check.MaxAbs))
		}
		if e.Samples > 0 && !res.Immediate && e.Status != finder.StatusInterrupted { // immediate mode's one run is no sample set
			detail = scenario.JoinDetail(detail, fmt.Sprintf("%d samples, %d dropped", e.Samples, e.Dropped))
		}
		rank := fmt.Sprint(i + 1)
		if e.Status != finder.StatusOK || res.Interrupted {
			rank = "-"
		}
		t.AddRow(rank, e.Solver, strings.TrimPrefix(e.Algorithm, "miopenConvolution"), tm, fmt.Sprint(e.Workspace), string(e.Status), detail)
	}
}

// findNotes says what the naive evaluation did, what the find-db gave or
// took, and how long find took.
func findNotes(r *report.Result, in fillInput) {
	out := in.out
	res := out.Result
	if res.NaiveDeadlineMs > 0 {
		r.Note("naive deadline %.4g ms (MIOPEN_NAIVE_TIMEOUT percent of the best time); find waited %.4g ms on it", res.NaiveDeadlineMs, res.NaiveWaitMs)
	}
	if res.Naive != "" {
		r.Note("the naive evaluation %s", res.Naive)
	}
	if res.NaiveAbandoned && out.TornDown && out.AfterTeardown.LastAbandonedFor > 0 {
		r.Note("the abandoned naive evaluation ran on for %s after find moved on (until its stream was reclaimed)", out.AfterTeardown.LastAbandonedFor.Round(time.Millisecond))
	}
	switch {
	case res.FromDB:
		r.Note("find-db record used from %s: %s", res.DBPath, res.DBRecord)
	case res.DBWritten:
		r.Note("find-db record written to %s: %s", res.DBPath, res.DBRecord)
	}
	if res.Mode != finder.ModeNormal && !res.Immediate && res.Lookup != "" {
		r.Note("find-db (%s mode): %s", res.Mode, res.Lookup)
	}
	for _, w := range res.DBWaited {
		r.Note("find-db: the write found the lock held and waited: %s", w)
	}
	for _, w := range res.Warnings {
		r.Note("%s", w)
	}
	if res.Elapsed > 0 || in.interrupted == "" {
		r.Note("find took %s", res.Elapsed.Round(time.Millisecond))
	}
	if in.interrupted != "" && out.AfterFind.Draining > 0 {
		r.Note("%s: the teardown did not wait for the abandoned naive evaluation; the process's exit ends it", in.interrupted)
	}
}

// verdict finishes r: INTERRUPTED when the find was stopped; ERROR when
// --require-abandoned was given and naive was not abandoned (the bound
// was not tested); PASS only when a solver was chosen, find stayed within
// the naive bound and every timed solver verified.
func verdict(r *report.Result, in fillInput, end time.Time) {
	res := in.out.Result
	failed := res.FailedVerification()
	switch {
	case in.interrupted != "":
		timed, stopped, notRun := solverCounts(res)
		r.Note("the find was interrupted: nothing chosen, nothing written to the find-db")
		r.Interrupt(in.interrupted, report.Progress{Finished: timed, Planned: timed + stopped + notRun, Unit: "applicable solvers"}, stopped, "", end)
	case in.requireAbandoned && !res.Naive.Abandoned():
		why := string(res.Naive)
		if why == "" {
			why = "did not run"
		}
		r.Finish(report.Error, "precondition did not hold: the naive evaluation "+why+"; the time bound was not tested (--require-abandoned)", end)
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
		if res.Naive.Abandoned() {
			s += "; naive timed out and was abandoned, find stayed within its bound"
		}
		r.Finish(report.Pass, s, end)
	}
}

// solverCounts counts the applicable solvers that were timed, stopped by
// an interruption and never run.
func solverCounts(res *finder.Result) (timed, stopped, notRun int) {
	for _, e := range res.Entries {
		switch e.Status {
		case finder.StatusNotApplicable:
		case finder.StatusInterrupted:
			stopped++
		case finder.StatusNotRun:
			notRun++
		default:
			timed++
		}
	}
	return timed, stopped, notRun
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

func countersAfterFind(r *report.Result, title string, a streams.Counters) {
	t := r.AddTable(title, "counter", "after find")
	row := func(name string, x int64) { t.AddRow(name, fmt.Sprint(x)) }
	row("acquired", a.Acquired)
	row("abandoned", a.Abandoned)
	row("reclaimed by callback", a.ReclaimedByCallback)
	row("reclaimed by backstop", a.ReclaimedByBackstop)
	row("scratch bytes pinned now", a.ScratchBytesPinned)
	row("worker wake-ups", a.WorkerWakeups)
}
