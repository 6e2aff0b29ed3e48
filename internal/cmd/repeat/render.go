package repeat

import (
	"cmp"
	"fmt"
	"math"
	"strconv"
	"strings"
	"syscall"
	"time"

	"miotool/internal/childproc"
	"miotool/internal/repeat"
	"miotool/internal/report"
	"miotool/internal/stats"
	"miotool/internal/words"
)

// setup is how the runs were made, as the result records it.
type setup struct {
	Program, Against []string
	Baseline         string
	Label            string
	// Runs are this shard's runs of each build, from FirstRun; AllRuns the
	// runs of every shard.
	Runs, FirstRun, AllRuns int
	Jobs                    int
	Timeout                 time.Duration
	Devices                 []string
	Shard                   shard
	CPULoad                 int
	Env                     []string
	Confidence              float64
	Version                 string
	CrashReports            bool
	// CrashNote says why the runs had no crash handler, "" when they had.
	CrashNote string
	// Interrupted is what stopped the runs ("interrupted by SIGINT"), ""
	// when nothing did.
	Interrupted string
}

// The titles and names a result is read back by (a baseline).
const (
	setupTitle = "Setup"
	runsTitle  = "Runs"

	settingProgram  = "program"
	settingAgainst  = "against"
	settingBaseline = "baseline"
	settingLabel    = "build"
	settingShard    = "shard"
	settingVersion  = "miotool"

	counterRuns   = "runs"
	counterPassed = "passed"
)

// reportVerdict is the verdict the result states: an improvement not yet
// shown is a FAIL, whose detail says "not shown", so that no CI reads an
// undecided comparison as a success.
func reportVerdict(v repeat.Verdict) report.Verdict {
	switch v {
	case repeat.Pass:
		return report.Pass
	case repeat.Fail, repeat.NotShown:
		return report.Fail
	case repeat.Interrupted:
		return report.Interrupted
	}
	return report.Error
}

// render fills r with the runs' facts and the judgement: the verdict, its
// summary and checklist status, the tables and notes.
func render(r *report.Result, s setup, f *repeat.Facts, j repeat.Judgement, b *baseline) {
	conf := percent(s.Confidence)
	fixed := f.Builds[0]
	r.Verdict = reportVerdict(j.Verdict)
	r.Summary = summary(s, f, j, b)
	r.Detail = detail(f, j, b)
	switch {
	case j.Verdict == repeat.Interrupted:
		r.Progress = report.Progress{Finished: fixed.Finished(), Planned: s.Runs, Unit: "runs"}
		r.Detail = report.InterruptedDetail(s.Interrupted, stoppedSoFar(s, f, j, b))
	case j.Comparison != nil:
		// The comparison is the test: shown, or not.
		shown := 0
		if j.Verdict == repeat.Pass {
			shown = 1
		}
		r.Cases = report.Cases{Passed: shown, Total: 1, Unit: "comparison"}
	case j.Verdict != repeat.Error && fixed.Finished() > 0:
		r.Cases = report.Cases{Passed: fixed.Passed, Total: fixed.Finished(), Unit: "runs"}
	}
	if s.Shard.Count > 0 {
		r.Detail += fmt.Sprintf(" (shard %d/%d)", s.Shard.Index, s.Shard.Count)
		r.Shard = &report.Shard{Index: s.Shard.Index, Count: s.Shard.Count, Split: report.ShardRuns}
	}
	if len(s.Devices) > 0 {
		// Which GPUs the runs saw; the program opens them, miotool does not.
		r.Device = report.Device{Name: "GPUs " + strings.Join(s.Devices, ",")}
	}
	runsTable(r, s, f, b, conf)
	if c := j.Comparison; c != nil {
		comparisonTable(r, s, c, f, b, conf)
	}
	groupsTable(r, s, f)
	devicesTable(r, f, j)
	setupTable(r, s)
	notes(r, s, f, j, b)
	counters(r, f, b)
}

// stoppedSoFar is what the runs that finished before an interruption
// showed: their failure rate, and against the unfixed build its p.
func stoppedSoFar(s setup, f *repeat.Facts, j repeat.Judgement, b *baseline) string {
	fixed := f.Builds[0]
	if fixed.Finished() == 0 {
		return ""
	}
	text := failedOf(fixed) + " (" + rateText(fixed.Count(), s.Confidence, percent(s.Confidence)) + ")"
	if c := j.Comparison; c != nil && c.Before.N > 0 && c.After.N > 0 {
		text += fmt.Sprintf("; against %s %s, p = %s", countText(c.Before), strings.ToLower(unfixedName(f, b)), pText(c.P))
	}
	return text
}

// summary is the headline's sentence.
func summary(s setup, f *repeat.Facts, j repeat.Judgement, b *baseline) string {
	fixed := f.Builds[0]
	conf := percent(s.Confidence)
	prefix := ""
	if s.Shard.Count > 0 {
		prefix = fmt.Sprintf("shard %d/%d: ", s.Shard.Index, s.Shard.Count)
	}
	switch j.Reason {
	case repeat.StartFailed:
		n := f.StartFailures()
		return prefix + fmt.Sprintf("%s of %d could not start: %s", words.Count(n, "run", "runs"), s.Runs*len(f.Builds), firstStartError(f))
	case repeat.Stopped:
		return prefix + report.InterruptedSummary(s.Interrupted, report.Progress{Finished: fixed.Finished(), Planned: s.Runs, Unit: "runs"},
			fixed.Interrupted, stoppedSoFar(s, f, j, b))
	case repeat.AllPassed:
		return prefix + fmt.Sprintf("0 of %d runs failed: below %s at %s confidence", fixed.Finished(), percent(stats.UpperBound(fixed.Count(), s.Confidence)), conf)
	case repeat.SomeFailed:
		return prefix + fmt.Sprintf("%s (%s, %s interval %s): %s", failedOf(fixed), percent(fixed.Count().Rate()), conf,
			intervalText(fixed.Count(), s.Confidence), endings(fixed))
	}
	c := j.Comparison
	versus := fmt.Sprintf("%s, against %s %s", failedOf(fixed), countText(c.Before), strings.ToLower(unfixedName(f, b)))
	test := fmt.Sprintf("one-sided Fisher exact test, p = %s", pText(c.P))
	switch j.Reason {
	case repeat.Shown:
		return prefix + fmt.Sprintf("improvement shown at %s confidence: %s (%s)", conf, versus, test)
	case repeat.NotYet:
		return prefix + fmt.Sprintf("improvement not yet shown at %s confidence: %s (%s > %s); %s", conf, versus, test, alphaText(s.Confidence), runsNeeded(c))
	case repeat.NothingToImprove:
		return prefix + fmt.Sprintf("nothing to show an improvement over: the %s build never failed (0 of %d runs); here %s",
			strings.ToLower(unfixedName(f, b)), c.Before.N, failedOf(fixed))
	}
	return prefix + fmt.Sprintf("no improvement: %s (%s)", versus, test)
}

// runsNeeded says how many runs per build would show the difference.
func runsNeeded(c *repeat.Comparison) string {
	if c.Half == 0 {
		return fmt.Sprintf("at these rates even %d runs per build would not show it half the time", repeat.RunsLimit)
	}
	text := fmt.Sprintf("at these rates about %d runs per build would show it half the time", stats.About(c.Half))
	if c.MostTimes > 0 {
		text += fmt.Sprintf(", about %d four times in five", stats.About(c.MostTimes))
	}
	return text
}

// detail is what decided the verdict, in the seed's words, for the
// Testing Checklist's status after its word and count
// (report.Result.ChecklistStatus): "Failed (3/220 runs failed): 3 crashes
// — 2× SIGSEGV, 1× SIGABRT", "Failed (1/1 comparison failed): not shown:
// Patched 0 of 220, Unpatched 3 of 220 (p = 0.124)".
func detail(f *repeat.Facts, j repeat.Judgement, b *baseline) string {
	fixed := f.Builds[0]
	switch {
	case j.Reason == repeat.StartFailed:
		return words.Count(f.StartFailures(), "run", "runs") + " could not start"
	case j.Comparison != nil:
		c := j.Comparison
		shown := ""
		if j.Verdict == repeat.NotShown {
			shown = "not shown: "
		}
		return fmt.Sprintf("%s%s %s, %s %s (p = %s)", shown, fixed.Label, countText(c.After),
			unfixedName(f, b), countText(c.Before), pText(c.P))
	}
	return endings(fixed)
}

// unfixedName is the unfixed build's name.
func unfixedName(f *repeat.Facts, b *baseline) string {
	if len(f.Builds) > 1 {
		return f.Builds[1].Label
	}
	if b != nil {
		return b.Label
	}
	return unfixedLabel
}

func firstStartError(f *repeat.Facts) string {
	for _, b := range f.Builds {
		if b.StartError != "" {
			return b.StartError
		}
	}
	return "no reason given"
}

// failedOf is "3 of 220 runs failed".
func failedOf(b *repeat.BuildFacts) string {
	return fmt.Sprintf("%d of %s failed", b.NotPassed(), words.Count(b.Finished(), "run", "runs"))
}

// countText is "3 of 220".
func countText(c stats.Count) string { return fmt.Sprintf("%d of %d", c.K, c.N) }

// crashesText is the seed's words: "3 crashes — 2× SIGSEGV, 1× SIGABRT".
func crashesText(b *repeat.BuildFacts) string {
	return withCounts(words.Count(b.Crashed, "crash", "crashes"), b.SignalCounts(), func(name string) string { return name })
}

// failedText is "2 failed — 2× exit status 3".
func failedText(b *repeat.BuildFacts) string {
	return withCounts(fmt.Sprintf("%d failed", b.Failed), b.ExitCounts(), func(code int) string { return fmt.Sprintf("exit status %d", code) })
}

// withCounts is a total followed by how it splits: "3 crashes — 2×
// SIGSEGV, 1× SIGABRT"; the total alone when nothing splits it.
func withCounts[K cmp.Ordered](total string, counts []repeat.Count[K], name func(K) string) string {
	if len(counts) == 0 {
		return total
	}
	parts := make([]string, 0, len(counts))
	for _, c := range counts {
		parts = append(parts, fmt.Sprintf("%d× %s", c.N, name(c.Key)))
	}
	return total + " — " + strings.Join(parts, ", ")
}

// endings is how the runs that did not pass ended: "3 crashes — 2×
// SIGSEGV, 1× SIGABRT; 1 failed — 1× exit status 3; 1 hung", or "0
// crashes" when every run passed.
func endings(b *repeat.BuildFacts) string {
	parts := []string{crashesText(b)}
	if b.Failed > 0 {
		parts = append(parts, failedText(b))
	}
	if b.Hung > 0 {
		parts = append(parts, fmt.Sprintf("%d hung", b.Hung))
	}
	if b.Crashed == 0 && len(parts) > 1 {
		parts = parts[1:]
	}
	return strings.Join(parts, "; ")
}

// percent is a rate as people read one: 1.36%, 0.28%, 26%, 0.012%.
func percent(x float64) string {
	v := x * 100
	switch {
	case v == 0:
		return "0%"
	case v >= 99.995 && v < 100:
		return strconv.FormatFloat(v, 'g', 6, 64) + "%"
	case v >= 10:
		return trimZeros(strconv.FormatFloat(v, 'f', 1, 64)) + "%"
	case v >= 0.1:
		return trimZeros(strconv.FormatFloat(v, 'f', 2, 64)) + "%"
	}
	return strconv.FormatFloat(v, 'g', 2, 64) + "%"
}

// trimZeros drops a decimal part's trailing zeros: 95.0 is 95.
func trimZeros(s string) string {
	if !strings.Contains(s, ".") {
		return s
	}
	return strings.TrimSuffix(strings.TrimRight(s, "0"), ".")
}

// pText is a p-value to three significant figures: 0.124, 0.000116.
func pText(p float64) string {
	if p >= 0.9995 {
		return "1"
	}
	return strconv.FormatFloat(p, 'g', 3, 64)
}

// alphaText is the test's level, 1 - confidence: 0.05.
func alphaText(confidence float64) string {
	return strconv.FormatFloat(math.Round((1-confidence)*1e6)/1e6, 'g', -1, 64)
}

// intervalText is "0.28%–3.93%".
func intervalText(c stats.Count, confidence float64) string {
	lo, hi := stats.Interval(c, confidence)
	return percent(lo) + "–" + percent(hi)
}

// rateText is the rate with its interval, or with no failure its
// one-sided bound: "1.36%, 95% interval 0.28%–3.93%" or "below 1.35% at
// 95% confidence".
func rateText(c stats.Count, confidence float64, conf string) string {
	if c.K == 0 {
		return fmt.Sprintf("below %s at %s confidence", percent(stats.UpperBound(c, confidence)), conf)
	}
	return fmt.Sprintf("%s, %s interval %s", percent(c.Rate()), conf, intervalText(c, confidence))
}

// runsTable is the seed's table: Build | Runs | Crashes, with the other
// endings, the rate and its interval.
func runsTable(r *report.Result, s setup, f *repeat.Facts, b *baseline, conf string) {
	unfinished := false
	for _, bf := range f.Builds {
		unfinished = unfinished || bf.Interrupted+bf.NotRun+bf.NotStarted > 0
	}
	cols := []string{"Build", "Runs", "Crashes", "Failed", "Hung", "Failure rate", "Interval"}
	if unfinished {
		cols = append(cols, "Not finished")
	}
	t := r.AddTable(fmt.Sprintf("%s (failure rates with exact %s intervals; with no failure, the one-sided %s bound)", runsTitle, conf, conf), cols...)
	row := func(bf *repeat.BuildFacts) {
		c := bf.Count()
		cells := []string{bf.Label, words.Count(bf.Finished(), "run", "runs"), crashesText(bf), failedText(bf),
			fmt.Sprintf("%d hung", bf.Hung), rateCell(c), intervalCell(c, s.Confidence)}
		if unfinished {
			cells = append(cells, unfinishedText(bf))
		}
		t.AddRow(cells...)
	}
	if b != nil {
		cells := []string{b.Label, words.Count(b.Count.N, "run", "runs"), "", "", "", rateCell(b.Count), intervalCell(b.Count, s.Confidence)}
		if len(b.Row) >= 5 {
			copy(cells[2:5], b.Row[2:5])
		}
		if unfinished {
			cells = append(cells, "")
		}
		t.AddFlaggedRow(strings.Join(b.Flags, "; "), cells...)
	}
	// The unfixed build first, as a reader compares before with after.
	for i := len(f.Builds) - 1; i >= 0; i-- {
		row(f.Builds[i])
	}
}

func rateCell(c stats.Count) string {
	if c.N == 0 {
		return "no run finished"
	}
	return fmt.Sprintf("%s (%s)", percent(c.Rate()), countText(c))
}

func intervalCell(c stats.Count, confidence float64) string {
	switch {
	case c.N == 0:
		return "-"
	case c.K == 0:
		return "below " + percent(stats.UpperBound(c, confidence))
	}
	return intervalText(c, confidence)
}

func unfinishedText(b *repeat.BuildFacts) string {
	var parts []string
	if b.Interrupted > 0 {
		parts = append(parts, fmt.Sprintf("%d killed by the interruption", b.Interrupted))
	}
	if b.NotRun > 0 {
		parts = append(parts, fmt.Sprintf("%d never started", b.NotRun))
	}
	if b.NotStarted > 0 {
		parts = append(parts, fmt.Sprintf("%d could not start", b.NotStarted))
	}
	if len(parts) == 0 {
		return "0"
	}
	return strings.Join(parts, ", ")
}

// comparisonTable is the test of the fixed build against the unfixed one.
func comparisonTable(r *report.Result, s setup, c *repeat.Comparison, f *repeat.Facts, b *baseline, conf string) {
	unfixed := unfixedName(f, b)
	source := "run beside it, interleaved run by run"
	if b != nil {
		source = "from " + s.Baseline
	}
	t := r.AddTable(fmt.Sprintf("%s against %s: one-sided Fisher exact test at %s confidence", f.Builds[0].Label, unfixed, conf), "Measure", "Value")
	t.AddRow(fmt.Sprintf("%s (%s)", unfixed, source), fmt.Sprintf("%s failed (%s)", countText(c.Before), percent(c.Before.Rate())))
	t.AddRow(f.Builds[0].Label, fmt.Sprintf("%s failed (%s)", countText(c.After), percent(c.After.Rate())))
	t.AddRow("p (so large a difference, or larger, if both failed alike)", strconv.FormatFloat(c.P, 'g', 4, 64))
	shown := "no: p > " + alphaText(s.Confidence)
	switch {
	case c.Shown:
		shown = "yes: p ≤ " + alphaText(s.Confidence)
	case !c.Better:
		shown = fmt.Sprintf("no: %s fails as often or more", f.Builds[0].Label)
	}
	t.AddRow(fmt.Sprintf("shown at %s confidence", conf), shown)
	if c.Better && !c.Shown {
		half, most := "more than "+strconv.Itoa(repeat.RunsLimit), "more than "+strconv.Itoa(repeat.RunsLimit)
		if c.Half > 0 {
			half = fmt.Sprintf("about %d (%d)", stats.About(c.Half), c.Half)
		}
		if c.MostTimes > 0 {
			most = fmt.Sprintf("about %d (%d)", stats.About(c.MostTimes), c.MostTimes)
		}
		t.AddRow("runs per build that would show it half the time", half)
		t.AddRow("runs per build that would show it four times in five", most)
	}
}

// groupsTable lists the runs that did not pass by where they ended.
func groupsTable(r *report.Result, s setup, f *repeat.Facts) {
	any := false
	for _, b := range f.Builds {
		any = any || len(b.Groups) > 0 || b.Ungrouped > 0
	}
	if !any {
		return
	}
	t := r.AddTable("Runs that did not pass, by where they ended", "Build", "Runs", "Ended", "Where", "Details")
	for i := len(f.Builds) - 1; i >= 0; i-- {
		b := f.Builds[i]
		for _, g := range b.Groups {
			t.AddRow(b.Label, strconv.Itoa(g.Count), endedText(g, s.Timeout), whereText(g), detailsText(g))
		}
		if b.Ungrouped > 0 {
			t.AddRow(b.Label, strconv.Itoa(b.Ungrouped), "other", "-",
				fmt.Sprintf("runs of signatures past the first %d, counted but not kept", repeat.MaxGroups))
		}
	}
}

// endedText is how a group's runs ended: "SIGSEGV", "SIGABRT, core
// dumped", "exit status 139 (128+SIGSEGV)", "hung (killed after 10m0s)".
func endedText(g *repeat.Group, timeout time.Duration) string {
	switch g.Kind {
	case repeat.RunCrashed:
		switch {
		case g.CoreDumped == g.Count:
			return g.Signal + ", core dumped"
		case g.CoreDumped > 0:
			return fmt.Sprintf("%s, %d of them core dumped", g.Signal, g.CoreDumped)
		}
		return g.Signal
	case repeat.RunFailed:
		if sig, ok := shellSignal(g.Exit); ok {
			return fmt.Sprintf("exit status %d (128+%s)", g.Exit, sig)
		}
		return fmt.Sprintf("exit status %d", g.Exit)
	}
	return fmt.Sprintf("hung (killed after %v)", timeout)
}

// shellSignal is the crash signal an exit status of 128+N names, as a
// shell reports a program that a signal ended.
func shellSignal(code int) (string, bool) {
	switch sig := syscall.Signal(code - 128); sig {
	case syscall.SIGSEGV, syscall.SIGABRT, syscall.SIGBUS, syscall.SIGILL, syscall.SIGFPE, syscall.SIGKILL, syscall.SIGTRAP:
		return childproc.SignalName(sig), true
	}
	return "", false
}

// whereText is a group's frames, innermost first, "←" reading "called
// from".
func whereText(g *repeat.Group) string {
	if g.Source == repeat.FromFaulthandlerCut {
		return "not known: faulthandler's report ended before it reached the crashing thread (a second crash cut it short)"
	}
	var parts []string
	if len(g.Native) > 0 {
		parts = append(parts, strings.Join(g.Native, " ← "))
	}
	if len(g.Python) > 0 {
		parts = append(parts, "Python: "+strings.Join(g.Python, " ← "))
	}
	if g.Thread != "" && len(parts) > 0 {
		parts = append(parts, "thread "+g.Thread)
	}
	if len(parts) == 0 {
		return "-"
	}
	return strings.Join(parts, "; ")
}

// detailsText is the runs of a group and one run's standard error.
func detailsText(g *repeat.Group) string {
	runs := fmt.Sprintf("run %d", g.FirstRun)
	if g.Count > 1 {
		runs = fmt.Sprintf("runs %d to %d", g.FirstRun, g.LastRun)
	}
	if strings.TrimSpace(g.Stderr) == "" {
		return runs + "; nothing on standard error"
	}
	return fmt.Sprintf("%s; run %d's standard error ends:\n%s", runs, g.StderrRun, g.Stderr)
}

// devicesTable counts each build's runs by device and flags a device
// whose runs fail more often than on the others.
func devicesTable(r *report.Result, f *repeat.Facts, j repeat.Judgement) {
	if len(f.Builds[0].Devices) == 0 {
		return
	}
	t := r.AddTable("Runs by device", "Device", "Build", "Runs", "Not passed", "Failure rate")
	t.FlagColumn = "stands out"
	for i := len(f.Builds) - 1; i >= 0; i-- {
		b := f.Builds[i]
		for d, dev := range b.Devices {
			flag := ""
			if i < len(j.Outliers) && containsInt(j.Outliers[i], d) {
				flag = "fails more often than on the other devices"
			}
			c := stats.Count{K: dev.NotPassed, N: dev.Finished}
			t.AddFlaggedRow(flag, dev.Device, b.Label, strconv.Itoa(dev.Finished), strconv.Itoa(dev.NotPassed), rateCell(c))
		}
	}
}

func containsInt(xs []int, x int) bool {
	for _, v := range xs {
		if v == x {
			return true
		}
	}
	return false
}

// setupTable records how the runs were made; a later run reads its
// program, build, shard and version back when given it as a baseline.
func setupTable(r *report.Result, s setup) {
	t := r.AddTable(setupTitle, "Setting", "Value")
	t.AddRow(settingProgram, report.JoinCommandLine(s.Program))
	if s.Against != nil {
		t.AddRow(settingAgainst, report.JoinCommandLine(s.Against))
	}
	if s.Baseline != "" {
		t.AddRow(settingBaseline, s.Baseline)
	}
	t.AddRow(settingLabel, s.Label)
	t.AddRow("runs of each build", strconv.Itoa(s.Runs))
	if s.Shard.Count > 0 {
		t.AddRow(settingShard, fmt.Sprintf("%d/%d", s.Shard.Index, s.Shard.Count))
		t.AddRow("runs of the shard", fmt.Sprintf("%d to %d of %d (from %s)", s.FirstRun, s.FirstRun+s.Runs-1, s.AllRuns, s.Shard.From))
	}
	t.AddRow("jobs", strconv.Itoa(s.Jobs))
	// A duration is milliseconds, as in every table (docs/report-schema.md).
	timeout := "none"
	if s.Timeout > 0 {
		timeout = report.Millis(s.Timeout)
	}
	t.AddRow("timeout (ms)", timeout)
	if len(s.Devices) > 0 {
		t.AddRow("devices", strings.Join(s.Devices, ","))
	}
	if s.CPULoad > 0 {
		t.AddRow("cpu load", words.Count(s.CPULoad, "busy worker", "busy workers"))
	}
	if len(s.Env) > 0 {
		t.AddRow("env", strings.Join(s.Env, " "))
	}
	t.AddRow("confidence", percent(s.Confidence))
	crashes := "standard error: faulthandler's Python frames where it printed them, else the last lines"
	if s.CrashReports {
		crashes = "the crash handler's native and Python frames"
	}
	t.AddRow("crashes grouped by", crashes)
	t.AddRow(settingVersion, s.Version)
}

// notes say what the tables cannot.
func notes(r *report.Result, s setup, f *repeat.Facts, j repeat.Judgement, b *baseline) {
	conf := percent(s.Confidence)
	if s.CrashNote != "" {
		r.Note("%s", s.CrashNote)
	}
	if s.Interrupted != "" {
		r.Note("%s: the statistics are over the runs that finished; those the interruption killed and those never started count in none", s.Interrupted)
	}
	if c := j.Comparison; c != nil && c.Better && !c.Shown {
		r.Note("Runs per build that would show it: the smallest n at which the one-sided Fisher exact test at %s confidence, with n runs of each build, is significant half the time (four times in five) if the builds fail at the rates measured, %s and %s; the power is exact, over both builds' binomial counts",
			conf, percent(c.Before.Rate()), percent(c.After.Rate()))
	}
	if b != nil {
		for _, fl := range b.Flags {
			r.Note("%s", fl)
		}
	}
	for _, bf := range f.Builds {
		if bf.NotStarted > 0 {
			r.Note("%s: %s could not start: %s", bf.Label, words.Count(bf.NotStarted, "run", "runs"), bf.StartError)
		}
		for _, e := range bf.ExitCounts() {
			if sig, ok := shellSignal(e.Key); ok {
				r.Note("%s: exit status %d is 128+%s, a shell's way of saying the program it ran was ended by %s: repeat the program itself, not a shell around it, to see the signal", bf.Label, e.Key, sig, sig)
			}
		}
	}
	if s.CPULoad > 0 {
		r.Note("%s kept the CPU busy beside the runs", words.Count(s.CPULoad, "busy worker", "busy workers"))
	}
}

// counters are the counts a later run or a merge reads: this build's, and
// the unfixed build's under "unpatched".
func counters(r *report.Result, f *repeat.Facts, b *baseline) {
	put := func(prefix string, bf *repeat.BuildFacts) {
		r.Count(prefix+counterRuns, int64(bf.Finished()))
		r.Count(prefix+counterPassed, int64(bf.Passed))
		r.Count(prefix+"crashed", int64(bf.Crashed))
		r.Count(prefix+"failed", int64(bf.Failed))
		r.Count(prefix+"hung", int64(bf.Hung))
		r.Count(prefix+"interrupted", int64(bf.Interrupted))
		r.Count(prefix+"not run", int64(bf.NotRun))
		r.Count(prefix+"not started", int64(bf.NotStarted))
	}
	put("", f.Builds[0])
	if len(f.Builds) > 1 {
		put("unpatched ", f.Builds[1])
	}
	if b != nil {
		r.Count("unpatched runs", int64(b.Count.N))
		r.Count("unpatched not passed", int64(b.Count.K))
	}
}
