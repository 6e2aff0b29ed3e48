package stress

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"miotool/internal/aiheur/cache"
	"miotool/internal/report"
	"miotool/internal/scenario"
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
}

// Tally counts the outcomes of a set of runs.
type Tally struct {
	Runs, Passed, Crashed, Wrong, Hung, Errors int
	// Crashes counts crashes by name (a signal, or the runtime's words).
	Crashes map[string]int
	// Replaced is how many completed runs had a model replaced while in
	// use (the race happened, and the process survived it).
	Replaced int
	// Completed is how many runs printed a result line.
	Completed int
}

// TallyOf counts runs.
func TallyOf(runs []RunOutcome) Tally {
	t := Tally{Runs: len(runs), Crashes: map[string]int{}}
	for _, r := range runs {
		switch r.Kind {
		case RunPassed:
			t.Passed++
		case RunCrashed:
			t.Crashed++
			t.Crashes[r.Crash]++
		case RunWrong:
			t.Wrong++
		case RunHung:
			t.Hung++
		default:
			t.Errors++
		}
		if r.Run != nil {
			t.Completed++
			if r.Run.CacheStats.Replaced > 0 {
				t.Replaced++
			}
		}
	}
	return t
}

// CrashList is "SIGSEGV 2, fatal error: concurrent map writes 1", most
// frequent first.
func (t Tally) CrashList() string { return sortedCounts(t.Crashes) }

// Fill writes the runs' outcomes into r and decides the verdict:
// PASS only when every run passed; FAIL when any crashed, printed a wrong
// sum or hung (the bug reproduced); ERROR when runs failed otherwise. The
// cache policy and race window are spelled by w.
func Fill(r *report.Result, s Setup, runs []RunOutcome, w scenario.Words, end time.Time) {
	t := TallyOf(runs)
	expected := ExpectedSum(s.Size, s.Iters)
	how := w.Cache(s.Policy)
	if s.Library != "" {
		how = s.Library
	}
	tab := r.AddTable(fmt.Sprintf("%s, each a fresh process: %s x %s x %s, %s",
		plural(t.Runs, "run"), plural(s.Threads, "thread"), plural(s.Iters, "iteration"), plural(s.Trials, "trial"), how),
		"outcome", "runs", "first seen")
	tab.FlagColumn = "failed"
	first := func(match func(RunOutcome) bool) string {
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
	tab.AddRow("passed", fmt.Sprint(t.Passed), fmt.Sprintf("every sum %.0f", expected))
	names := make([]string, 0, len(t.Crashes))
	for name := range t.Crashes {
		names = append(names, name)
	}
	sort.Slice(names, func(i, j int) bool {
		if t.Crashes[names[i]] != t.Crashes[names[j]] {
			return t.Crashes[names[i]] > t.Crashes[names[j]]
		}
		return names[i] < names[j]
	})
	if len(names) == 0 {
		tab.AddRow("crashed", "0", "-")
	}
	for _, name := range names {
		tab.AddFlaggedRow("!", "crashed: "+name, fmt.Sprint(t.Crashes[name]),
			first(func(o RunOutcome) bool { return o.Kind == RunCrashed && o.Crash == name }))
	}
	for _, row := range []struct {
		label string
		kind  RunKind
		n     int
	}{{"wrong result", RunWrong, t.Wrong}, {"hung (killed by the watchdog)", RunHung, t.Hung}, {"error", RunError, t.Errors}} {
		cells := []string{row.label, fmt.Sprint(row.n), first(func(o RunOutcome) bool { return o.Kind == row.kind })}
		if row.n > 0 {
			tab.AddFlaggedRow("!", cells...)
		} else {
			tab.AddRow(cells...)
		}
	}

	fillStressTimes(r, runs)
	if s.Library != "" {
		r.Note("library: %s (its own heuristic and caches)", s.Library)
	} else {
		r.Note("model cache: %s", s.Cache)
		if s.RaceWindow > 0 {
			r.Note("%s: the race window is widened on purpose (a random wait of up to that between a miss's load and its insert); results are not comparable with runs without it", w.RaceWindow(s.RaceWindow))
		}
		r.Note("heuristic: TunaNet %s from %s, queried for every convolution through the model cache", s.Arch, s.Models)
	}
	for _, o := range runs {
		if o.Run != nil {
			r.Note("solvers chosen in run %d: %s (%d convolutions the model did not cover)", o.Index+1, sortedCounts(o.Run.Solvers), o.Run.Fallbacks)
			break
		}
	}
	if s.Policy == cache.Unlocked && t.Completed > 0 {
		r.Note("a cached model was replaced (and released) by a concurrent insert, and the process survived, in %d of the %d runs that finished", t.Replaced, t.Completed)
	}
	r.Note("expected sum per thread and trial: (%d - %d)^2 = %.0f", s.Size, s.Iters, expected)
	r.Note("%d at a time; watchdog %v per run", s.Jobs, s.Timeout)
	for _, o := range runs {
		if o.Kind == RunCrashed && o.Excerpt != "" {
			r.Note("run %d crashed: %s", o.Index+1, o.Excerpt)
			break
		}
	}
	for _, o := range runs {
		if o.Kind != RunPassed && o.Kind != RunCrashed && o.StderrTail != "" {
			r.Note("run %d (%s) standard error ends: %s", o.Index+1, o.Kind, strings.ReplaceAll(o.StderrTail, "\n", " | "))
			break
		}
	}

	r.Count("runs", int64(t.Runs))
	r.Count("passed", int64(t.Passed))
	r.Count("crashed", int64(t.Crashed))
	r.Count("wrong results", int64(t.Wrong))
	r.Count("hung", int64(t.Hung))
	r.Count("errors", int64(t.Errors))
	r.Count("runs with a model replaced", int64(t.Replaced))

	failed := t.Crashed + t.Wrong + t.Hung
	switch {
	case t.Runs == 0:
		r.Finish(report.Error, "no run happened", end)
	case failed > 0:
		var parts []string
		if t.Crashed > 0 {
			parts = append(parts, fmt.Sprintf("%d crashed (%s)", t.Crashed, t.CrashList()))
		}
		if t.Wrong > 0 {
			parts = append(parts, fmt.Sprintf("%d gave a wrong sum", t.Wrong))
		}
		if t.Hung > 0 {
			parts = append(parts, fmt.Sprintf("%d hung", t.Hung))
		}
		if t.Errors > 0 {
			parts = append(parts, fmt.Sprintf("%d failed to run", t.Errors))
		}
		r.Status = fmt.Sprintf("Failed (%d/%d)", failed, t.Runs)
		r.Finish(report.Fail, fmt.Sprintf("%d of %d runs failed: %s", failed, t.Runs, strings.Join(parts, ", ")), end)
	case t.Errors > 0:
		r.Finish(report.Error, fmt.Sprintf("%d of %d runs could not run: %s", t.Errors, t.Runs,
			first(func(o RunOutcome) bool { return o.Kind == RunError })), end)
	default:
		if t.Runs > 1 {
			r.Status = fmt.Sprintf("Passed (%d/%d)", t.Passed, t.Runs)
		}
		what := fmt.Sprintf("all %d runs passed", t.Runs)
		if t.Runs == 1 {
			what = "the run passed"
		}
		r.Finish(report.Pass, fmt.Sprintf("%s: no crash, no hang, every sum %.0f", what, expected), end)
	}
}

// fillStressTimes adds the wall time per fresh-process run: the median,
// fastest and slowest of the runs that passed (they did all the work),
// and of every run.
func fillStressTimes(r *report.Result, runs []RunOutcome) {
	var passed, all []time.Duration
	for _, o := range runs {
		all = append(all, o.Wall)
		if o.Kind == RunPassed {
			passed = append(passed, o.Wall)
		}
	}
	tab := r.AddTable("wall time per run (process start to exit)", "runs", "count", "median", "min", "max")
	for _, row := range []struct {
		label string
		d     []time.Duration
	}{{"passed", passed}, {"all", all}} {
		if len(row.d) == 0 {
			tab.AddRow(row.label, "0", "-", "-", "-")
			continue
		}
		sort.Slice(row.d, func(i, j int) bool { return row.d[i] < row.d[j] })
		tab.AddRow(row.label, fmt.Sprint(len(row.d)), roundDuration(median(row.d)), roundDuration(row.d[0]), roundDuration(row.d[len(row.d)-1]))
	}
}

// plural is "1 run", "2 runs".
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

func median(sorted []time.Duration) time.Duration {
	n := len(sorted)
	if n%2 == 1 {
		return sorted[n/2]
	}
	return (sorted[n/2-1] + sorted[n/2]) / 2
}

func roundDuration(d time.Duration) string {
	switch {
	case d >= 10*time.Second:
		return d.Round(100 * time.Millisecond).String()
	case d >= time.Second:
		return d.Round(10 * time.Millisecond).String()
	}
	return d.Round(time.Millisecond).String()
}
