package find

import (
	"strings"
	"testing"
	"time"

	"miotool/internal/finder"
	"miotool/internal/report"
	findscen "miotool/internal/scenario/find"
)

// The verdict says how the solver was chosen, and a find-db that could not
// be written is a note, never a failure.
func TestFillVerdicts(t *testing.T) {
	ok := []finder.Entry{{Solver: "ConvImplicitGemmTiledFwd", Status: finder.StatusOK, TimeMs: 0.5}}
	for _, tt := range []struct {
		name    string
		res     finder.Result
		verdict report.Verdict
		summary string
		note    string
	}{
		{"benchmarked", finder.Result{Entries: ok, Chosen: "ConvImplicitGemmTiledFwd", Verified: true, NaiveAbandoned: true, Naive: finder.NaiveAbandoned, NaiveDeadlineMs: 1.5, NaiveWaitMs: 1.5},
			report.Pass, "chose ConvImplicitGemmTiledFwd, verified against the CPU reference; naive timed out and was abandoned", "naive deadline 1.5 ms"},
		{"immediate mode", finder.Result{Entries: ok, Chosen: "ConvImplicitGemmTiledFwd", Verified: true, Mode: finder.ModeFast, Immediate: true},
			report.Pass, "immediate-mode fallback chose ConvImplicitGemmTiledFwd", "find took"},
		{"db not written", finder.Result{Entries: ok, Chosen: "ConvImplicitGemmTiledFwd", Verified: true, Warnings: []string{"find-db not written: read-only"}},
			report.Pass, "chose ConvImplicitGemmTiledFwd", "find-db not written: read-only"},
		{"chosen wrong", finder.Result{Entries: ok, Chosen: "ConvImplicitGemmTiledFwd"},
			report.Fail, "the chosen solver ConvImplicitGemmTiledFwd failed verification", ""},
		{"past the bound", finder.Result{Entries: ok, Chosen: "ConvImplicitGemmTiledFwd", Verified: true, NaiveDeadlineMs: 1, NaiveWaitMs: 500},
			report.Fail, "past its 1 ms deadline", ""},
		{"nothing chosen", finder.Result{}, report.Fail, "no solver produced a result", ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			res := tt.res
			r := report.New("find", "miotool find", time.Unix(0, 0))
			fill(r, fillInput{opts: findscen.Options{Reclaim: "worker", HWQueues: 4}, out: &findscen.Outcome{Result: &res, MaxDraining: 2, TornDown: true}}, time.Unix(1, 0))
			if r.Verdict != tt.verdict || !strings.Contains(r.Summary, tt.summary) {
				t.Errorf("verdict %s summary %q; want %s with %q", r.Verdict, r.Summary, tt.verdict, tt.summary)
			}
			if notes := strings.Join(r.Notes, "\n"); !strings.Contains(notes, tt.note) {
				t.Errorf("notes lack %q:\n%s", tt.note, notes)
			}
			if len(r.Tables) != 2 || r.Tables[1].Title != "stream tracker" {
				t.Errorf("tables %+v", r.Tables)
			}
		})
	}
}

// What the command knows beside the find's result decides the verdict
// first: an interruption (of the find or of its teardown), then
// --require-abandoned's precondition, whatever the find measured.
func TestFillVerdictsOfThePreconditionAndInterruptions(t *testing.T) {
	ok := finder.Entry{Solver: "ConvImplicitGemmTiledFwd", Status: finder.StatusOK, TimeMs: 0.5, Samples: 3}
	passed := finder.Result{Entries: []finder.Entry{ok}, Chosen: ok.Solver, Verified: true, NaiveDeadlineMs: 1.5, NaiveWaitMs: 0.2}
	withinDeadline, abandoned := passed, passed
	withinDeadline.Naive = finder.NaiveWithinDeadline
	abandoned.Naive, abandoned.NaiveAbandoned = finder.NaiveAbandoned, true
	stopped := finder.Result{Interrupted: true, Naive: finder.NaiveInterrupted, Entries: []finder.Entry{ok,
		{Solver: "ConvDirectNaiveConvFwd", Status: finder.StatusInterrupted},
		{Solver: "GemmFwd1x1Tiled", Status: finder.StatusNotRun}, {Solver: "X", Status: finder.StatusNotApplicable}}}
	for _, tt := range []struct {
		name    string
		in      fillInput
		res     finder.Result
		verdict report.Verdict
		summary string
		status  string
	}{
		{"required, not abandoned", fillInput{requireAbandoned: true}, withinDeadline, report.Error,
			"precondition did not hold: the naive evaluation finished within its deadline; the time bound was not tested (--require-abandoned)", ""},
		{"required and abandoned", fillInput{requireAbandoned: true}, abandoned, report.Pass, "naive timed out and was abandoned, find stayed within its bound", ""},
		{"not required, not abandoned", fillInput{}, withinDeadline, report.Pass, "chose ConvImplicitGemmTiledFwd, verified against the CPU reference", ""},
		{"the find interrupted", fillInput{interrupted: "interrupted by SIGTERM", requireAbandoned: true}, stopped, report.Interrupted,
			"interrupted by SIGTERM: 1 of 3 applicable solvers finished, 1 stopped while it ran, 1 not started",
			"Interrupted (1 of 3 applicable solvers finished): interrupted by SIGTERM"},
		{"the teardown interrupted", fillInput{teardownInterrupted: "interrupted by SIGINT"}, abandoned, report.Interrupted,
			"interrupted by SIGINT during the teardown that waits for the abandoned naive evaluation: 1 of 1 find finished; so far find had finished: PASS, chose",
			"Interrupted (1 of 1 find finished): interrupted by SIGINT during the teardown"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			res := tt.res
			in := tt.in
			in.opts = findscen.Options{Reclaim: "worker", HWQueues: 4}
			in.out = &findscen.Outcome{Result: &res, MaxDraining: 2}
			r := report.New("find", "miotool find", time.Unix(0, 0))
			fill(r, in, time.Unix(1, 0))
			if r.Verdict != tt.verdict || !strings.Contains(r.Summary, tt.summary) || !strings.HasPrefix(r.ChecklistStatus(), tt.status) {
				t.Errorf("verdict %s summary %q status %q; want %s with %q, status %q", r.Verdict, r.Summary, r.ChecklistStatus(), tt.verdict, tt.summary, tt.status)
			}
			// Without the teardown's figures, the counters are after find only.
			if c := r.Tables[1].Columns; len(c) != 2 || c[1] != "after find" {
				t.Errorf("counters' columns %q", c)
			}
		})
	}
}
