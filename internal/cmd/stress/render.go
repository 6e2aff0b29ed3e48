package stress

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"miotool/internal/aiheur/cache"
	"miotool/internal/cli"
	"miotool/internal/report"
	stressscen "miotool/internal/scenario/stress"
	"miotool/internal/words"
)

// Setup is how a stress-threads comparison ran, for its report.
type Setup struct {
	Threads, Iters, Trials, Size int
	Runs, Jobs                   int
	Policy                       cache.Policy
	RaceWindow                   time.Duration
	// Cache is the policy line of the caches (cache's Describe).
	Cache string
	// Models says where the TunaNet files came from; Arch is the set used.
	Models, Arch string
	// Library, when set, is the real library that ran the convolutions
	// (--target) and its algorithm selection; the cache fields are unused.
	Library string
	Timeout time.Duration
	// Interrupted, when set, says what stopped the runs early ("interrupted
	// by SIGINT"): the result is INTERRUPTED and holds the runs started.
	Interrupted string
}

// Fill writes the runs' outcomes into r and its judgement (judge).
func Fill(r *report.Result, s Setup, runs []stressscen.RunOutcome, end time.Time) {
	t := stressscen.TallyOf(runs)
	fillOutcomes(r, s, runs, t)
	fillStressTimes(r, runs)
	fillNotes(r, s, runs, t)
	fillCounts(r, t)
	j := judge(s, runs, t)
	if j.countRuns && t.Runs > 1 {
		r.Cases = report.Cases{Passed: t.Passed, Total: t.Runs, Unit: "runs"}
	}
	if j.verdict == report.Interrupted {
		r.Interrupt(s.why(), j.progress, t.Interrupted, j.soFar, end)
		return
	}
	r.Finish(j.verdict, j.summary, end)
}

// interrupted reports whether the runs were stopped early.
func (s Setup) interrupted(t stressscen.Tally) bool { return s.Interrupted != "" || t.Interrupted > 0 }

// why is what stopped the runs, for an interrupted result.
func (s Setup) why() string {
	if s.Interrupted == "" {
		return "interrupted"
	}
	return s.Interrupted
}

// firstRun is "run N: detail" of the first run match accepts, "-" when none.
func firstRun(runs []stressscen.RunOutcome, match func(stressscen.RunOutcome) bool) string {
	for _, o := range runs {
		if match(o) {
			d := o.Detail
			if d == "" {
				d = "-"
			}
			return fmt.Sprintf("run %d: %s", o.Index+1, d)
		}
	}
	return "-"
}

// firstRecord is "run N: record" of the first finished run whose caches
// recorded k, "-" when none did.
func firstRecord(runs []stressscen.RunOutcome, k cache.Kind) string {
	for _, o := range runs {
		if tl := o.Detections.Of(k); tl.Count > 0 && o.Kind != stressscen.RunInterrupted {
			if tl.First == nil {
				return fmt.Sprintf("run %d", o.Index+1)
			}
			return fmt.Sprintf("run %d: %s", o.Index+1, tl.First)
		}
	}
	return "-"
}

// fillOutcomes adds the table of outcomes: one row per crash signal, per
// kind of record the caches make, per other way a run ends, and passed.
func fillOutcomes(r *report.Result, s Setup, runs []stressscen.RunOutcome, t stressscen.Tally) {
	how := cli.CacheFlag(s.Policy)
	if s.Library != "" {
		how = s.Library
	}
	counted := words.Count(t.Runs, "run", "runs")
	if s.interrupted(t) && s.Runs > t.Runs {
		counted = fmt.Sprintf("%d of %d runs (interrupted)", t.Runs, s.Runs)
	}
	tab := r.AddTable(fmt.Sprintf("%s, each a fresh process: %s x %s x %s, %s",
		counted, words.Count(s.Threads, "thread", "threads"), words.Count(s.Iters, "iteration", "iterations"), words.Count(s.Trials, "trial", "trials"), how),
		"outcome", "runs", "first seen")
	tab.FlagColumn = "failed"
	row := func(flag bool, cells ...string) {
		if flag {
			tab.AddFlaggedRow("!", cells...)
		} else {
			tab.AddRow(cells...)
		}
	}
	names := byCount(t.Crashes)
	if len(names) == 0 {
		tab.AddRow("crashed", "0", "-")
	}
	for _, name := range names {
		tab.AddFlaggedRow("!", "crashed: "+name, fmt.Sprint(t.Crashes[name]),
			firstRun(runs, func(o stressscen.RunOutcome) bool { return o.Kind == stressscen.RunCrashed && o.Crash == name }))
	}
	for _, k := range []struct {
		label string
		kind  cache.Kind
		n     int
	}{{"use-after-free", cache.KindUseAfterFree, t.UseAfterFree}, {"published model destroyed", cache.KindDestroyed, t.Destroyed},
		{"race detected", cache.KindRace, t.Raced}} {
		row(k.n > 0, k.label, fmt.Sprint(k.n), firstRecord(runs, k.kind))
	}
	for _, k := range []struct {
		label string
		kind  stressscen.RunKind
		n     int
		flag  bool
	}{{"wrong result", stressscen.RunWrong, t.Wrong, true}, {"hung (killed by the watchdog)", stressscen.RunHung, t.Hung, true},
		{"interrupted", stressscen.RunInterrupted, t.Interrupted, false}, {"error", stressscen.RunError, t.Errors, true}} {
		if k.kind == stressscen.RunError && k.n == 0 {
			continue
		}
		row(k.flag && k.n > 0, k.label, fmt.Sprint(k.n), firstRun(runs, func(o stressscen.RunOutcome) bool { return o.Kind == k.kind }))
	}
	tab.AddRow("passed", fmt.Sprint(t.Passed), fmt.Sprintf("every sum %.0f, nothing detected", stressscen.ExpectedSum(s.Size, s.Iters)))
}

// fillNotes says how the runs ran (interruption, library or cache, model,
// solvers, expected sum, jobs) and quotes the first of each kind of record,
// crash and failure.
func fillNotes(r *report.Result, s Setup, runs []stressscen.RunOutcome, t stressscen.Tally) {
	if s.interrupted(t) {
		r.Note("%s after %d of %d runs had started; %d killed by the interruption, counted as interrupted and in no other row",
			s.why(), t.Runs, s.Runs, t.Interrupted)
	}
	if s.Library != "" {
		r.Note("library: %s (its own heuristic and caches)", s.Library)
	} else {
		r.Note("model cache: %s", s.Cache)
		if s.RaceWindow > 0 {
			r.Note("%s: the race window is widened on purpose (a random wait of up to that between a miss's load and its insert); results are not comparable with runs without it", cli.RaceWindowFlag(s.RaceWindow))
		}
		r.Note("heuristic: TunaNet %s from %s, queried for every convolution through the model cache", s.Arch, s.Models)
	}
	if i := slices.IndexFunc(runs, func(o stressscen.RunOutcome) bool { return o.Run != nil }); i >= 0 {
		o := runs[i]
		r.Note("solvers chosen in run %d: %s (%d convolutions the model did not cover)", o.Index+1, sortedCounts(o.Run.Solvers), o.Run.Fallbacks)
	}
	for _, k := range cache.Kinds {
		if i := slices.IndexFunc(runs, func(o stressscen.RunOutcome) bool {
			tl := o.Detections.Of(k)
			return tl.Count > 0 && tl.First != nil && o.Kind != stressscen.RunInterrupted
		}); i >= 0 {
			r.Note("run %d first showed %s: %s", runs[i].Index+1, k, runs[i].Detections.Of(k).First)
		}
	}
	r.Note("expected sum per thread and trial: (%d - %d)^2 = %.0f", s.Size, s.Iters, stressscen.ExpectedSum(s.Size, s.Iters))
	r.Note("%d at a time; watchdog %v per run", s.Jobs, s.Timeout)
	if i := slices.IndexFunc(runs, func(o stressscen.RunOutcome) bool { return o.Kind == stressscen.RunCrashed && o.Excerpt != "" }); i >= 0 {
		r.Note("run %d crashed: %s", runs[i].Index+1, runs[i].Excerpt)
	}
	if i := slices.IndexFunc(runs, func(o stressscen.RunOutcome) bool {
		return o.Kind != stressscen.RunPassed && o.Kind != stressscen.RunCrashed && o.Kind != stressscen.RunInterrupted && o.StderrTail != ""
	}); i >= 0 {
		o := runs[i]
		r.Note("run %d (%s) standard error ends: %s", o.Index+1, o.Kind, strings.ReplaceAll(o.StderrTail, "\n", " | "))
	}
}

// fillCounts adds the tally as the result's counters.
func fillCounts(r *report.Result, t stressscen.Tally) {
	r.Count("runs", int64(t.Runs))
	r.Count("passed", int64(t.Passed))
	r.Count("crashed", int64(t.Crashed))
	r.Count("use-after-free", int64(t.UseAfterFree))
	r.Count("published model destroyed", int64(t.Destroyed))
	r.Count("race detected", int64(t.Raced))
	r.Count("wrong results", int64(t.Wrong))
	r.Count("hung", int64(t.Hung))
	r.Count("interrupted", int64(t.Interrupted))
	r.Count("errors", int64(t.Errors))
	r.Count("runs with a model replaced", int64(t.Replaced))
}

// judgement is the verdict of a set of runs, with its summary, how far
// interrupted runs got, and whether the runs are what the checklist
// status counts ("Passed (26/26 runs)"; "Failed (20/20 runs failed)").
type judgement struct {
	verdict   report.Verdict
	summary   string
	progress  report.Progress
	soFar     string // what the runs that finished showed, for INTERRUPTED
	countRuns bool
}

// judge decides the verdict of the runs: INTERRUPTED when they were
// stopped early (what finished is still shown); FAIL when any run crashed,
// hung, printed a wrong sum, or its caches recorded a use-after-free, a
// destroyed published model or a race (the bug reproduced); ERROR when
// runs failed otherwise; PASS only when every run passed.
func judge(s Setup, runs []stressscen.RunOutcome, t stressscen.Tally) judgement {
	failed := 0
	for _, o := range runs {
		if o.Failed() {
			failed++
		}
	}
	parts := failureParts(t)
	expected := stressscen.ExpectedSum(s.Size, s.Iters)
	switch {
	case s.interrupted(t):
		return judgement{verdict: report.Interrupted, soFar: strings.Join(parts, ", "),
			progress: report.Progress{Finished: t.Runs - t.Interrupted, Planned: s.Runs, Unit: "runs"}}
	case t.Runs == 0:
		return judgement{verdict: report.Error, summary: "no run happened"}
	case failed > 0:
		return judgement{verdict: report.Fail, summary: fmt.Sprintf("%d of %d runs failed: %s", failed, t.Runs, strings.Join(parts, ", ")), countRuns: true}
	case t.Errors > 0:
		return judgement{verdict: report.Error, summary: fmt.Sprintf("%d of %d runs could not run: %s", t.Errors, t.Runs,
			firstRun(runs, func(o stressscen.RunOutcome) bool { return o.Kind == stressscen.RunError })), countRuns: true}
	}
	what := fmt.Sprintf("all %d runs passed", t.Runs)
	if t.Runs == 1 {
		what = "the run passed"
	}
	// A library target chooses its algorithms itself: miotool's model
	// caches never ran, so there is nothing they could have detected.
	detected := ", nothing detected in the caches"
	if s.Library != "" {
		detected = ""
	}
	return judgement{verdict: report.Pass, summary: fmt.Sprintf("%s: no crash, no hang%s, every sum %.0f", what, detected, expected), countRuns: true}
}

// failureParts says what went wrong in the runs, one phrase per kind:
// "2 crashed (SIGSEGV 2)", "5 recorded a race", ...
func failureParts(t stressscen.Tally) []string {
	var parts []string
	if t.Crashed > 0 {
		parts = append(parts, fmt.Sprintf("%d crashed (%s)", t.Crashed, sortedCounts(t.Crashes)))
	}
	for _, k := range []struct {
		n    int
		what string
	}{{t.UseAfterFree, "a use-after-free"}, {t.Destroyed, "a published model destroyed"}, {t.Raced, "a race"}} {
		if k.n > 0 {
			parts = append(parts, fmt.Sprintf("%d recorded %s", k.n, k.what))
		}
	}
	if t.Wrong > 0 {
		parts = append(parts, fmt.Sprintf("%d gave a wrong result", t.Wrong))
	}
	if t.Hung > 0 {
		parts = append(parts, fmt.Sprintf("%d hung", t.Hung))
	}
	if t.Errors > 0 {
		parts = append(parts, fmt.Sprintf("%d failed to run", t.Errors))
	}
	return parts
}

// fillStressTimes adds the wall time per fresh-process run: the median,
// fastest and slowest of the runs that completed (they did all the work
// and every sum was right, whatever their caches recorded), and of every
// run; then the two parts a run measures itself, its device open and its
// workload after it (the rest of a run's wall time is its process start,
// loading the model, and its teardown). "completed" is not "passed": a run
// whose caches recorded a race completed and failed.
func fillStressTimes(r *report.Result, runs []stressscen.RunOutcome) {
	var completed, all, open, work []time.Duration
	ms := func(v float64) time.Duration { return time.Duration(v * float64(time.Millisecond)) }
	for _, o := range runs {
		all = append(all, o.Wall)
		if o.Kind == stressscen.RunPassed {
			completed = append(completed, o.Wall)
		}
		if o.Device != nil && o.Device.OpenMs > 0 {
			open = append(open, ms(o.Device.OpenMs))
		}
		if o.Run != nil && o.Run.ElapsedMs > 0 {
			work = append(work, ms(o.Run.ElapsedMs))
		}
	}
	tab := r.AddTable("wall time per run (process start to exit)", "runs", "count", "median (ms)", "min (ms)", "max (ms)")
	for _, row := range []struct {
		label string
		d     []time.Duration
		shown bool
	}{{"completed", completed, true}, {"all", all, true},
		{"device open, in the run", open, len(open) > 0}, {"workload, in the run after the open", work, len(work) > 0}} {
		switch {
		case !row.shown:
			continue
		case len(row.d) == 0:
			tab.AddRow(row.label, "0", "-", "-", "-")
			continue
		}
		sort.Slice(row.d, func(i, j int) bool { return row.d[i] < row.d[j] })
		tab.AddRow(row.label, fmt.Sprint(len(row.d)), report.Millis(words.Median(row.d)), report.Millis(row.d[0]), report.Millis(row.d[len(row.d)-1]))
	}
}

// sortedCounts renders a name -> count map as "a 3, b 1", largest first.
func sortedCounts(m map[string]int) string {
	names := byCount(m)
	parts := make([]string, len(names))
	for i, n := range names {
		parts[i] = fmt.Sprintf("%s %d", n, m[n])
	}
	return strings.Join(parts, ", ")
}

// byCount lists m's names, the largest count first, ties by name.
func byCount(m map[string]int) []string {
	names := make([]string, 0, len(m))
	for k := range m {
		names = append(names, k)
	}
	slices.SortFunc(names, func(a, b string) int {
		if m[a] != m[b] {
			return m[b] - m[a]
		}
		return strings.Compare(a, b)
	})
	return names
}
