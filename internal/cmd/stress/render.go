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

// Fill writes the runs' outcomes into r and decides the verdict:
// INTERRUPTED when the runs were stopped early (what finished is still
// shown); FAIL when any run crashed, hung, printed a wrong sum, or its
// caches recorded a use-after-free, a destroyed published model or a race
// (the bug reproduced); ERROR when runs failed otherwise; PASS only when
// every run passed.
func Fill(r *report.Result, s Setup, runs []stressscen.RunOutcome, end time.Time) {
	t := stressscen.TallyOf(runs)
	expected := stressscen.ExpectedSum(s.Size, s.Iters)
	how := cli.CacheFlag(s.Policy)
	if s.Library != "" {
		how = s.Library
	}
	counted := words.Count(t.Runs, "run", "runs")
	interrupted := s.Interrupted != "" || t.Interrupted > 0
	if interrupted && s.Runs > t.Runs {
		counted = fmt.Sprintf("%d of %d runs (interrupted)", t.Runs, s.Runs)
	}
	tab := r.AddTable(fmt.Sprintf("%s, each a fresh process: %s x %s x %s, %s",
		counted, words.Count(s.Threads, "thread", "threads"), words.Count(s.Iters, "iteration", "iterations"), words.Count(s.Trials, "trial", "trials"), how),
		"outcome", "runs", "first seen")
	tab.FlagColumn = "failed"
	first := func(match func(stressscen.RunOutcome) bool) string {
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
	firstRecord := func(k cache.Kind) string {
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
			first(func(o stressscen.RunOutcome) bool { return o.Kind == stressscen.RunCrashed && o.Crash == name }))
	}
	for _, k := range []struct {
		label string
		kind  cache.Kind
		n     int
	}{{"use-after-free", cache.KindUseAfterFree, t.UseAfterFree}, {"published model destroyed", cache.KindDestroyed, t.Destroyed},
		{"race detected", cache.KindRace, t.Raced}} {
		row(k.n > 0, k.label, fmt.Sprint(k.n), firstRecord(k.kind))
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
		row(k.flag && k.n > 0, k.label, fmt.Sprint(k.n), first(func(o stressscen.RunOutcome) bool { return o.Kind == k.kind }))
	}
	tab.AddRow("passed", fmt.Sprint(t.Passed), fmt.Sprintf("every sum %.0f, nothing detected", expected))

	fillStressTimes(r, runs)
	if interrupted {
		why := s.Interrupted
		if why == "" {
			why = "interrupted"
		}
		r.Note("%s after %d of %d runs had started; %d killed by the interruption, counted as interrupted and in no other row",
			why, t.Runs, s.Runs, t.Interrupted)
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
	for _, o := range runs {
		if o.Run != nil {
			r.Note("solvers chosen in run %d: %s (%d convolutions the model did not cover)", o.Index+1, sortedCounts(o.Run.Solvers), o.Run.Fallbacks)
			break
		}
	}
	for _, k := range cache.Kinds {
		for _, o := range runs {
			if tl := o.Detections.Of(k); tl.Count > 0 && tl.First != nil && o.Kind != stressscen.RunInterrupted {
				r.Note("run %d first showed %s: %s", o.Index+1, k, tl.First)
				break
			}
		}
	}
	r.Note("expected sum per thread and trial: (%d - %d)^2 = %.0f", s.Size, s.Iters, expected)
	r.Note("%d at a time; watchdog %v per run", s.Jobs, s.Timeout)
	for _, o := range runs {
		if o.Kind == stressscen.RunCrashed && o.Excerpt != "" {
			r.Note("run %d crashed: %s", o.Index+1, o.Excerpt)
			break
		}
	}
	for _, o := range runs {
		if o.Kind != stressscen.RunPassed && o.Kind != stressscen.RunCrashed && o.Kind != stressscen.RunInterrupted && o.StderrTail != "" {
			r.Note("run %d (%s) standard error ends: %s", o.Index+1, o.Kind, strings.ReplaceAll(o.StderrTail, "\n", " | "))
			break
		}
	}

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

	failed := 0
	for _, o := range runs {
		if o.Failed() {
			failed++
		}
	}
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
	switch {
	case interrupted:
		why := s.Interrupted
		if why == "" {
			why = "interrupted"
		}
		what := fmt.Sprintf("%s: %d of %d runs finished, %d interrupted, %d not started", why, t.Runs-t.Interrupted, s.Runs, t.Interrupted, s.Runs-t.Runs)
		if len(parts) > 0 {
			what += "; so far " + strings.Join(parts, ", ")
		}
		r.Status = fmt.Sprintf("Interrupted: %d of %d runs finished", t.Runs-t.Interrupted, s.Runs)
		r.Finish(report.Interrupted, what, end)
	case t.Runs == 0:
		r.Finish(report.Error, "no run happened", end)
	case failed > 0:
		countRuns(r, t)
		r.Finish(report.Fail, fmt.Sprintf("%d of %d runs failed: %s", failed, t.Runs, strings.Join(parts, ", ")), end)
	case t.Errors > 0:
		r.Finish(report.Error, fmt.Sprintf("%d of %d runs could not run: %s", t.Errors, t.Runs,
			first(func(o stressscen.RunOutcome) bool { return o.Kind == stressscen.RunError })), end)
	default:
		countRuns(r, t)
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
		r.Finish(report.Pass, fmt.Sprintf("%s: no crash, no hang%s, every sum %.0f", what, detected, expected), end)
	}
}

// countRuns counts the runs as the check's sub-tests, as a test binary's
// "Passed (26/26)" counts its tests: the runs that passed of those run
// ("Failed (0/20)": none of 20 passed). One run is not counted. The
// status is the verdict's own word, so that a suite's checklist says a
// met expectation in its words, "Fails as expected (0/20)", as for every
// other check.
func countRuns(r *report.Result, t stressscen.Tally) {
	if t.Runs > 1 {
		r.Cases = report.Cases{Passed: t.Passed, Total: t.Runs}
	}
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
	tab := r.AddTable("wall time per run (process start to exit)", "runs", "count", "median", "min", "max")
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
		tab.AddRow(row.label, fmt.Sprint(len(row.d)), roundDuration(words.Median(row.d)), roundDuration(row.d[0]), roundDuration(row.d[len(row.d)-1]))
	}
}

func roundDuration(d time.Duration) string {
	switch {
	case d >= 10*time.Second:
		return d.Round(100 * time.Millisecond).String()
	case d >= time.Second:
		return d.Round(10 * time.Millisecond).String()
	case d >= time.Millisecond:
		return d.Round(time.Millisecond).String()
	}
	return d.Round(time.Microsecond).String()
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
