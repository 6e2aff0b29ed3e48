package report

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"miotool/internal/words"
)

// SuiteSchemaVersion names the JSON layout of a SuiteResult. Like
// SchemaVersion it changes only when a field is renamed or removed, or
// changes its meaning.
const SuiteSchemaVersion = "miotool/suite/v3"

// suiteSchemaV2 is the layout whose merged results carried the first
// input's options and version at the top level for every run; suiteSchemaV1
// the layout before run ids. Both are still read.
const (
	suiteSchemaV2 = "miotool/suite/v2"
	suiteSchemaV1 = "miotool/suite/v1"
)

// Tool identifies the miotool build that ran a suite.
type Tool struct {
	Version   string
	Commit    string
	GoVersion string
}

// SuiteOptions record how a suite was run.
type SuiteOptions struct {
	Repeat  int    // runs of each check per environment variant
	Shuffle bool   // checks ran in a shuffled order
	Seed    uint64 // the shuffle's seed (meaningful only with Shuffle)
	CPULoad int    // busy CPU workers kept running beside the checks
	// Jobs is how many checks ran at once at most (exclusive checks
	// alone); 0 and 1 both mean one at a time.
	Jobs int
	// Variants are the environment variants run besides the baseline,
	// e.g. "GPU_MAX_HW_QUEUES=3".
	Variants []string
}

// SuiteResult is the outcome of a suite: every check with every run, on one
// host or, after MergeSuites, on several.
type SuiteResult struct {
	Schema string
	// RunID names this suite run uniquely (NewRunID); a merged result has
	// one of its own, and lists the runs it holds in MergedRuns.
	RunID    string
	Suite    string // the suite's name, e.g. "pr12265"
	Title    string // one line that says what the suite covers
	File     string // the suite file as given
	Hosts    []string
	Tool     Tool
	Started  time.Time
	Duration time.Duration
	Options  SuiteOptions
	// Sources are the files a merged result was read from.
	Sources []string
	// MergedRuns are the suite runs a merged result holds, each once.
	MergedRuns []SuiteRunRef
	Checks     []*SuiteCheck
	// Interrupted, when set, says what stopped the suite before it
	// finished, e.g. "interrupted by SIGINT": its verdict is INTERRUPTED
	// and the checks it never reached are not run.
	Interrupted string
	// ExitStatus, when not zero, is the exit status of the process that
	// wrote the result where its verdict's code does not say it: 143 for
	// a suite SIGTERM stopped. ExitCode gives it.
	ExitStatus int
	// Failure, when set, says how miotool itself failed while it ran the
	// suite: its verdict is ERROR, whatever its checks say.
	Failure string
	// Notes say what the suite did besides its checks' runs: where its
	// checks' find-db was, which programs it ran.
	Notes []string
}

// SuiteRunRef names one suite run inside a merged result, with the
// options it ran with and the miotool that ran it.
type SuiteRunRef struct {
	RunID   string
	Hosts   []string
	Started time.Time
	File    string // the file it was merged from
	Options SuiteOptions
	Tool    Tool
}

// SuiteCheck is one check of a suite in one environment variant.
type SuiteCheck struct {
	Name string
	// Command is the command line as run, without output flags, e.g.
	// "miotool capture --mode=global --reclaim=lazy".
	Command string
	// Variant is the environment variant, e.g. "GPU_MAX_HW_QUEUES=3";
	// empty for the baseline.
	Variant string
	// Env is every KEY=VALUE the suite set for the check's process (the
	// suite's, the check's own and the variant's), in that order.
	Env    []string
	Expect Verdict
	// Skip, when set, says why the check was not run.
	Skip string
	Runs []SuiteRun
}

// SuiteRun is one run of a check: one miotool process.
type SuiteRun struct {
	Host      string
	Iteration int // which repetition, from 1
	Order     int // the position in the order the suite ran its checks, from 1
	Verdict   Verdict
	ExitCode  int
	Status    string // the child result's checklist status, when it set one
	Summary   string
	Backend   string
	Device    Device
	Started   time.Time
	Duration  time.Duration
	// StderrTail is the end of the process's standard error, kept for runs
	// that did not meet the expectation.
	StderrTail string
	// Cases are the sub-tests of the run, when its result counted them.
	Cases Cases
}

// NewSuiteResult starts a result for the named suite, with a new run id.
func NewSuiteResult(suite string, start time.Time) *SuiteResult {
	return &SuiteResult{Schema: SuiteSchemaVersion, RunID: NewRunID(), Suite: suite, Started: start}
}

// ran reports whether any check has a run.
func (s *SuiteResult) ran() bool {
	for _, c := range s.Checks {
		if len(c.Runs) > 0 {
			return true
		}
	}
	return false
}

// runs are the suite runs s holds: those a merge recorded, else s itself.
// A result written before run ids existed is named by a digest of its
// runs, so that the same file read twice is still recognised.
func (s *SuiteResult) runs() []SuiteRunRef {
	if len(s.MergedRuns) > 0 {
		return s.MergedRuns
	}
	id := s.RunID
	if id == "" {
		id = s.digest()
	}
	return []SuiteRunRef{{RunID: id, Hosts: slices.Clone(s.Hosts), Started: s.Started, Options: s.Options, Tool: s.Tool}}
}

// digest is "sha256:" and the first 128 bits of a hash over what makes
// a run: the suite, hosts, start and every run of every check.
func (s *SuiteResult) digest() string {
	h := sha256.New()
	fmt.Fprintf(h, "%q %q %s\n", s.Suite, s.Hosts, s.Started.Format(time.RFC3339Nano))
	for _, c := range s.Checks {
		fmt.Fprintf(h, "%q %q %q %q\n", c.Name, c.Command, c.Variant, c.Env)
		for _, r := range c.Runs {
			fmt.Fprintf(h, "%q %d %d %s %s %d %q\n", r.Host, r.Iteration, r.Order, r.Started.Format(time.RFC3339Nano), r.Verdict, r.Duration, r.Summary)
		}
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil)[:16])
}

// runMet reports whether a run's verdict is the expected one.
func (c *SuiteCheck) runMet(r SuiteRun) bool { return r.Verdict == c.Expect }

// runSkipped reports whether a run skipped where the check expected
// another verdict: the check found no device or library to test on, so
// the run tested nothing, and says neither that the check holds nor that
// it does not.
func (c *SuiteCheck) runSkipped(r SuiteRun) bool { return r.Verdict == Skip && c.Expect != Skip }

// skippedRuns counts the runs that skipped where another verdict was
// expected.
func (c *SuiteCheck) skippedRuns() int {
	n := 0
	for _, r := range c.Runs {
		if c.runSkipped(r) {
			n++
		}
	}
	return n
}

// stopped reports whether a run is one the suite's interruption stopped
// before it gave a verdict: no outcome, neither met nor unmet.
func (r SuiteRun) stopped() bool { return r.Verdict == Interrupted }

// Met reports whether the check met its expectation: every run had the
// expected verdict. A check the suite did not run counts as met, since
// there is nothing against it; one an interruption stopped does not.
func (c *SuiteCheck) Met() bool {
	if c.Skip != "" && len(c.Runs) == 0 {
		return true
	}
	if len(c.Runs) == 0 {
		return false
	}
	for _, r := range c.Runs {
		if !c.runMet(r) {
			return false
		}
	}
	return true
}

// unexplained counts the checks with no run that the suite did not skip.
func (s *SuiteResult) unexplained() int {
	n := 0
	for _, c := range s.Checks {
		if c.NotRun() && c.Skip == "" {
			n++
		}
	}
	return n
}

// NotRun reports whether the check has no run: the suite skipped it, or
// was interrupted before it.
func (c *SuiteCheck) NotRun() bool { return len(c.Runs) == 0 }

// Interrupted reports whether the suite's interruption stopped a run of
// the check while it ran.
func (c *SuiteCheck) Interrupted() bool {
	return slices.ContainsFunc(c.Runs, SuiteRun.stopped)
}

// unmetFinished reports whether a run that finished gave another verdict
// than the expected one, other than a skip: a finding, whatever stopped
// the suite later.
func (c *SuiteCheck) unmetFinished() bool {
	return slices.ContainsFunc(c.Runs, func(r SuiteRun) bool { return !r.stopped() && !c.runMet(r) && !c.runSkipped(r) })
}

// Test is the checklist's Test cell: the name, with the variant in brackets.
func (c *SuiteCheck) Test() string {
	if c.Variant == "" {
		return c.Name
	}
	return c.Name + " [" + c.Variant + "]"
}

// CommandLine is the command with the environment the suite set, as one
// would type it: "GPU_MAX_HW_QUEUES=3 miotool capture --mode=global".
func (c *SuiteCheck) CommandLine() string {
	if len(c.Env) == 0 {
		return c.Command
	}
	return JoinCommandLine(c.Env) + " " + c.Command
}

// Duration is the time all runs took.
func (c *SuiteCheck) Duration() time.Duration {
	var d time.Duration
	for _, r := range c.Runs {
		d += r.Duration
	}
	return d
}

// Outcome is the check's verdict as a test: PASS when it met its
// expectation, ERROR when a run that finished did not meet it and could
// not produce a result, FAIL when one did not meet it otherwise,
// INTERRUPTED when the suite's interruption stopped a run of it and every
// run before met the expectation or skipped, SKIP when it was not run or
// its runs skipped (the device or library it needs is not there) where
// they were not expected to: it tested nothing it was asked to.
func (c *SuiteCheck) Outcome() Verdict {
	switch {
	case c.NotRun():
		return Skip
	case c.Met():
		return Pass
	case c.unmetFinished():
		for _, r := range c.Runs {
			if r.Verdict == Error && c.Expect != Error {
				return Error
			}
		}
		return Fail
	case c.stoppedRuns() > 0:
		return Interrupted
	}
	return Skip
}

// Status is the checklist's Status cell. Its count in brackets means what
// a PR checklist's does ("Passed (26/26)" for 26 sub-tests of one test
// binary): the sub-tests of one run, where the run's result counted them,
// e.g. the 24 combinations of a capture matrix; repetitions are counted
// apart, in runs. So: "Passed", "Passed (24/24)", "Fails as expected",
// the child's own status ("Fails with --reclaim=lazy (global), passes
// with --reclaim=worker (24/24)"), with ", 20/20 runs" after it when the
// check ran 20 times; "Skipped (expected PASS)" for a check whose runs
// skipped (the device or library it needs is not there), "Skipped in 3
// of 5 runs (expected PASS); 2 as expected" for one whose runs did so in
// part; "Interrupted after 2.04s" for a check the suite's
// interruption stopped; "Unexpected (expected PASS): FAIL" or, over
// several runs, "Unexpected (expected PASS): FAIL 3, PASS 17 of 20 runs".
func (c *SuiteCheck) Status() string {
	n := len(c.Runs)
	if n == 0 {
		if c.Skip != "" {
			return "Not run (" + c.Skip + ")"
		}
		return "Not run"
	}
	if c.Met() {
		s := c.Runs[0].Status
		if s == "" || !c.sameStatus() {
			s = map[Verdict]string{Pass: "Passed", Fail: "Fails as expected", Skip: "Skipped as expected", Error: "Errors as expected"}[c.Expect]
		}
		s += c.casesText()
		if n > 1 {
			s += fmt.Sprintf(", %d/%d runs", n, n)
		}
		return s
	}
	if !c.unmetFinished() && c.stoppedRuns() == 0 {
		// Every run that did not meet the expectation skipped.
		skipped := c.skippedRuns()
		s := fmt.Sprintf("Skipped (expected %s)", c.Expect)
		if n > 1 {
			s = fmt.Sprintf("Skipped in %d of %d runs (expected %s)", skipped, n, c.Expect)
			if met := n - skipped; met > 0 {
				s += fmt.Sprintf("; %d as expected", met)
			}
		}
		return s
	}
	if !c.unmetFinished() {
		var stopped time.Duration
		for _, r := range c.Runs {
			if r.stopped() {
				stopped += r.Duration
			}
		}
		s := "Interrupted after " + durationText(stopped)
		if met := n - c.stoppedRuns(); met > 0 {
			s += fmt.Sprintf("; %d %s before it as expected", met, words.Plural(met, "run", "runs"))
		}
		return s
	}
	if n == 1 {
		return fmt.Sprintf("Unexpected (expected %s): %s%s", c.Expect, c.Runs[0].Verdict, c.casesText())
	}
	hosts := c.hosts()
	var parts []string
	for _, v := range []Verdict{Error, Fail, Skip, Pass, Interrupted} {
		var k int
		var on []string
		for _, r := range c.Runs {
			if r.Verdict == v {
				k++
				if r.Host != "" && !slices.Contains(on, r.Host) {
					on = append(on, r.Host)
				}
			}
		}
		if k == 0 {
			continue
		}
		part := fmt.Sprintf("%s %d", v, k)
		if len(hosts) > 1 && v != c.Expect {
			part += " (" + strings.Join(on, ", ") + ")"
		}
		parts = append(parts, part)
	}
	return fmt.Sprintf("Unexpected (expected %s): %s of %d runs", c.Expect, strings.Join(parts, ", "), n)
}

// casesText is the sub-test count of the check's runs: " (24/24)" when
// every run counted the same, " (479/480 in all)" when their counts
// differ, "" when some run did not count them.
func (c *SuiteCheck) casesText() string {
	var sum Cases
	same := true
	for _, r := range c.Runs {
		if r.Cases.Total <= 0 {
			return ""
		}
		same = same && r.Cases == c.Runs[0].Cases
		sum.Passed += r.Cases.Passed
		sum.Total += r.Cases.Total
	}
	if same {
		return " " + c.Runs[0].Cases.text()
	}
	return fmt.Sprintf(" (%d/%d in all)", sum.Passed, sum.Total)
}

// stoppedRuns counts the runs the suite's interruption stopped.
func (c *SuiteCheck) stoppedRuns() int {
	n := 0
	for _, r := range c.Runs {
		if r.stopped() {
			n++
		}
	}
	return n
}

func (c *SuiteCheck) sameStatus() bool {
	for _, r := range c.Runs[1:] {
		if r.Status != c.Runs[0].Status {
			return false
		}
	}
	return true
}

func (c *SuiteCheck) hosts() []string {
	var hs []string
	for _, r := range c.Runs {
		if r.Host != "" && !slices.Contains(hs, r.Host) {
			hs = append(hs, r.Host)
		}
	}
	return hs
}

// SuiteTotals counts a suite's checks by outcome.
type SuiteTotals struct {
	Checks int // every check in every variant
	Met    int // met their expectation (not counting those not run)
	Unmet  int // did not
	Errors int // of the unmet, those where a run produced no result
	NotRun int // skipped by the suite, or not reached before an interruption
	// Skipped are the checks that ran and skipped where they were
	// expected to give another verdict: what they need is not there.
	Skipped int
	// Interrupted are the checks the suite's interruption stopped while
	// one of their runs ran: neither met nor unmet.
	Interrupted int
}

// Totals counts the checks by outcome.
func (s *SuiteResult) Totals() SuiteTotals {
	var t SuiteTotals
	for _, c := range s.Checks {
		t.Checks++
		switch c.Outcome() {
		case Pass:
			t.Met++
		case Skip:
			if c.NotRun() {
				t.NotRun++
			} else {
				t.Skipped++
			}
		case Interrupted:
			t.Interrupted++
		case Error:
			t.Unmet++
			t.Errors++
		default:
			t.Unmet++
		}
	}
	return t
}

// interrupted reports whether something stopped the suite before it
// finished: it says so, or a check of it was stopped while it ran.
func (s *SuiteResult) interrupted() bool {
	return s.Interrupted != "" || slices.ContainsFunc(s.Checks, (*SuiteCheck).Interrupted)
}

// tested reports whether any check was tested: it met its expectation or
// did not. A check whose runs skipped was not, even if some of its runs
// met the expectation.
func (s *SuiteResult) tested() bool {
	t := s.Totals()
	return t.Met+t.Unmet > 0
}

// Verdict is INTERRUPTED when the suite was stopped before it finished,
// FAIL when a check did not meet its expectation, ERROR when a check has
// no run and no reason, SKIP when no check tested anything (none ran,
// every run skipped, or there are no checks: nothing passed), PASS
// otherwise.
func (s *SuiteResult) Verdict() Verdict {
	switch {
	case s.interrupted():
		return Interrupted
	case s.Failure != "":
		return Error
	case s.Totals().Unmet > 0:
		return Fail
	case s.unexplained() > 0:
		// Checks with no run and no reason, in a suite that was not
		// interrupted: the tool lost them.
		return Error
	case !s.tested():
		return Skip
	}
	return Pass
}

// ExitCode is the suite's exit status: 0 when every check met its
// expectation, 1 when one did not, 4 when no check was tested, 130 when
// it was interrupted (ExitStatus, when set, in place of these: 143 for
// SIGTERM).
func (s *SuiteResult) ExitCode() int {
	if s.ExitStatus != 0 {
		return s.ExitStatus
	}
	return s.Verdict().ExitCode()
}

// Summary is one line on the outcome. For an interrupted suite it says how
// many checks finished, how many the interruption stopped and how many
// never started.
func (s *SuiteResult) Summary() string {
	t := s.Totals()
	if s.interrupted() {
		return s.interruptedSummary(t)
	}
	if s.Failure != "" {
		return "miotool failed: " + s.Failure
	}
	var b strings.Builder
	switch {
	case t.Checks == 0:
		b.WriteString("the suite has no checks")
	case t.Unmet == 0 && !s.ran():
		b.WriteString("no check ran")
	case !s.tested():
		b.WriteString("no check was tested")
	case t.Unmet == 0 && t.Skipped > 0:
		fmt.Fprintf(&b, "every check that was tested met its expectation (%d %s)", t.Met, words.Plural(t.Met, "check", "checks"))
	case t.Unmet == 0:
		fmt.Fprintf(&b, "every check met its expectation (%d %s)", t.Met, words.Plural(t.Met, "check", "checks"))
	default:
		ran := t.Checks - t.NotRun - t.Skipped
		fmt.Fprintf(&b, "%d of %d %s did not meet the expectation", t.Unmet, ran, words.Plural(ran, "check", "checks"))
		if t.Errors > 0 {
			fmt.Fprintf(&b, " (%d without a result)", t.Errors)
		}
	}
	if t.Skipped > 0 {
		sep := "; "
		if !s.tested() {
			sep = ": "
		}
		fmt.Fprintf(&b, "%s%d skipped (what %s not there)", sep, t.Skipped, words.Plural(t.Skipped, "it needs is", "they need is"))
	}
	if t.NotRun > 0 {
		fmt.Fprintf(&b, "; %d not run", t.NotRun)
	}
	return b.String()
}

// interruptedSummary is "interrupted by SIGINT before the suite finished:
// 4 of 9 checks finished (every one met its expectation), 1 interrupted,
// 4 never started".
func (s *SuiteResult) interruptedSummary(t SuiteTotals) string {
	why := s.Interrupted
	if why == "" {
		why = "interrupted"
	}
	skipped := 0
	for _, c := range s.Checks {
		if c.NotRun() && c.Skip != "" {
			skipped++
		}
	}
	finished := t.Met + t.Unmet + t.Skipped
	var b strings.Builder
	fmt.Fprintf(&b, "%s before the suite finished: %d of %d %s finished", why, finished, t.Checks, words.Plural(t.Checks, "check", "checks"))
	switch {
	case finished == 0:
	case t.Unmet == 0 && t.Skipped > 0:
		fmt.Fprintf(&b, " (%d met the expectation, %d skipped)", t.Met, t.Skipped)
	case t.Unmet == 0:
		b.WriteString(" (every one met its expectation)")
	default:
		fmt.Fprintf(&b, " (%d did not meet the expectation", t.Unmet)
		if t.Errors > 0 {
			fmt.Fprintf(&b, ", %d without a result", t.Errors)
		}
		b.WriteString(")")
	}
	fmt.Fprintf(&b, ", %d interrupted, %d never started", t.Interrupted, t.NotRun-skipped)
	if skipped > 0 {
		fmt.Fprintf(&b, ", %d skipped by the suite", skipped)
	}
	return b.String()
}

// statusOf is the check's Status cell in this suite: a check an
// interruption left without a run says so.
func (s *SuiteResult) statusOf(c *SuiteCheck) string {
	if c.NotRun() && c.Skip == "" && s.interrupted() {
		return "Not run (the suite was interrupted before it started)"
	}
	return c.Status()
}

// Checklist is the suite's Testing Checklist: Test | Command | Devices |
// Status, one row per check and variant.
func (s *SuiteResult) Checklist() *Table {
	t := &Table{Columns: ChecklistColumns}
	label := s.deviceLabeler()
	for _, c := range s.Checks {
		t.AddRow(c.Test(), c.CommandLine(), s.devicesCell(c, label), s.statusOf(c))
	}
	return t
}

// checklistView is the Checklist as the text and Markdown outputs show
// it: when the checks that ran, two or more, all ran on one and the same
// device, the Devices column goes and devices, for the header, names it
// once.
func (s *SuiteResult) checklistView() (t *Table, devices string) {
	t = s.Checklist()
	label := s.deviceLabeler()
	ran := 0
	for _, c := range s.Checks {
		if c.NotRun() || c.stoppedRuns() == len(c.Runs) {
			continue // no device to name: not run, or stopped before one opened
		}
		ran++
		var one string
		for _, r := range c.Runs {
			switch l := label(r); {
			case r.Device.Name == "":
			case one == "":
				one = l
			case l != one:
				return t, "" // this row names several
			}
		}
		if one == "" || devices != "" && one != devices {
			return t, ""
		}
		devices = one
	}
	if ran < 2 {
		return t, ""
	}
	t.Columns = slices.Delete(slices.Clone(t.Columns), 2, 3)
	for i := range t.Rows {
		t.Rows[i].Cells = slices.Delete(t.Rows[i].Cells, 2, 3)
	}
	return t, devices
}

// devicesCell lists the distinct devices a check's runs used.
func (s *SuiteResult) devicesCell(c *SuiteCheck, label func(SuiteRun) string) string {
	var ds []string
	for _, r := range c.Runs {
		if r.Device.Name == "" {
			continue
		}
		if l := label(r); !slices.Contains(ds, l) {
			ds = append(ds, l)
		}
	}
	if len(ds) == 0 {
		return "none"
	}
	return strings.Join(ds, ", ")
}

// deviceLabeler names a run's device as the checklist shows it. A device
// name seen on more than one host is followed by the host ("NVIDIA H200
// (sm_90) on node7"), so that a fleet's table tells the machines apart.
func (s *SuiteResult) deviceLabeler() func(SuiteRun) string {
	hostsOf := map[string][]string{}
	for _, c := range s.Checks {
		for _, r := range c.Runs {
			short := r.Device.Short()
			if !slices.Contains(hostsOf[short], r.Host) {
				hostsOf[short] = append(hostsOf[short], r.Host)
			}
		}
	}
	return func(r SuiteRun) string {
		short := r.Device.Short()
		if len(hostsOf[short]) > 1 && r.Host != "" {
			return short + " on " + r.Host
		}
		return short
	}
}

// unmetRun is what the runs of a check that did not meet its expectation
// in the same way (one verdict, one summary) have in common: repeated
// identical failures are told once, with their count.
type unmetRun struct {
	check *SuiteCheck
	run   SuiteRun   // the first of them
	runs  []SuiteRun // all of them
}

// unmetRuns lists, in check order, the runs that finished and did not
// meet their check's expectation (a run an interruption stopped has no
// outcome: its row says so; a run that skipped tested nothing:
// skippedRuns lists it), runs with the same verdict and summary together.
func (s *SuiteResult) unmetRuns() []unmetRun {
	return s.groupRuns(func(c *SuiteCheck, r SuiteRun) bool { return !r.stopped() && !c.runMet(r) && !c.runSkipped(r) })
}

// skippedRuns lists, like unmetRuns, the runs that skipped where their
// check expected another verdict, each with the reason it gave.
func (s *SuiteResult) skippedRuns() []unmetRun {
	return s.groupRuns((*SuiteCheck).runSkipped)
}

// groupRuns lists, in check order, the runs keep accepts, runs of a check
// with the same verdict and summary together.
func (s *SuiteResult) groupRuns(keep func(*SuiteCheck, SuiteRun) bool) []unmetRun {
	var out []unmetRun
	for _, c := range s.Checks {
		first := len(out)
	runs:
		for _, r := range c.Runs {
			if !keep(c, r) {
				continue
			}
			for i := first; i < len(out); i++ {
				if out[i].run.Verdict == r.Verdict && out[i].run.Summary == r.Summary {
					out[i].runs = append(out[i].runs, r)
					continue runs
				}
			}
			out = append(out, unmetRun{check: c, run: r, runs: []SuiteRun{r}})
		}
	}
	return out
}

// which names the runs: "run 2 on node1", or "runs 1-6, 8-20 on node1,
// run 3 on node2 (20 of 40 runs)".
func (u unmetRun) which() string {
	var hosts []string
	its := map[string][]int{}
	for _, r := range u.runs {
		if _, ok := its[r.Host]; !ok {
			hosts = append(hosts, r.Host)
		}
		its[r.Host] = append(its[r.Host], r.Iteration)
	}
	parts := make([]string, len(hosts))
	for i, h := range hosts {
		word := "run"
		if len(its[h]) > 1 {
			word = "runs"
		}
		parts[i] = word + " " + intRanges(its[h])
		if h != "" {
			parts[i] += " on " + h
		}
	}
	s := strings.Join(parts, ", ")
	if len(u.runs) > 1 {
		s += fmt.Sprintf(" (%d of %d runs)", len(u.runs), len(u.check.Runs))
	}
	return s
}

// intRanges is "1-6, 8, 10-20" for the numbers in ns.
func intRanges(ns []int) string {
	ns = slices.Clone(ns)
	slices.Sort(ns)
	ns = slices.Compact(ns)
	var parts []string
	for i := 0; i < len(ns); {
		j := i
		for j+1 < len(ns) && ns[j+1] == ns[j]+1 {
			j++
		}
		if j > i {
			parts = append(parts, fmt.Sprintf("%d-%d", ns[i], ns[j]))
		} else {
			parts = append(parts, fmt.Sprint(ns[i]))
		}
		i = j + 1
	}
	return strings.Join(parts, ", ")
}

// describe is "on node1, started 2026-12-01T09:00:00Z".
func (ref SuiteRunRef) describe() string {
	var parts []string
	if len(ref.Hosts) > 0 {
		parts = append(parts, "on "+strings.Join(ref.Hosts, ", "))
	}
	if !ref.Started.IsZero() {
		parts = append(parts, "started "+ref.Started.Format(time.RFC3339))
	}
	if len(parts) == 0 {
		return "no host or start recorded"
	}
	return strings.Join(parts, ", ")
}

// optionsText describes how the suite ran, for the rendered header. A
// merged result says it for each suite run it holds, "node1: each check
// once; node2: each check 2 times, in shuffled order (seed 7)", runs
// made alike sharing one entry: the rows count the runs of all of them.
func (s *SuiteResult) optionsText() string {
	if len(s.MergedRuns) == 0 {
		return s.Options.text()
	}
	return perRun(s.MergedRuns, func(ref SuiteRunRef) string { return ref.Options.text() })
}

// toolText names the miotool that ran the suite, for each suite run of a
// merged result whose runs were made by different builds.
func (s *SuiteResult) toolText() string {
	if _, same := s.uniform(); same || len(s.MergedRuns) == 0 {
		return s.Tool.text()
	}
	text := perRun(s.MergedRuns, func(ref SuiteRunRef) string {
		if ref.Tool.Version == "" {
			return "version not recorded"
		}
		return ref.Tool.text()
	})
	if text == "version not recorded" {
		return ""
	}
	return text
}

// perRun is what describe says of each run, "hosts: text" joined by "; "
// in order of first appearance, runs with the same text sharing an entry;
// the plain text when every run shares it and the result has one run.
func perRun(refs []SuiteRunRef, describe func(SuiteRunRef) string) string {
	var texts []string
	labels := map[string][]string{}
	for _, ref := range refs {
		t := describe(ref)
		if _, ok := labels[t]; !ok {
			texts = append(texts, t)
		}
		for _, l := range ref.labels() {
			if !slices.Contains(labels[t], l) {
				labels[t] = append(labels[t], l)
			}
		}
	}
	if len(refs) == 1 {
		return texts[0]
	}
	parts := make([]string, len(texts))
	for i, t := range texts {
		parts[i] = strings.Join(labels[t], ", ") + ": " + t
	}
	return strings.Join(parts, "; ")
}

// labels name a suite run in a merged header: its hosts, else the file it
// came from.
func (ref SuiteRunRef) labels() []string {
	if len(ref.Hosts) > 0 {
		return ref.Hosts
	}
	if ref.File != "" {
		return []string{strings.TrimSuffix(filepath.Base(ref.File), filepath.Ext(ref.File))}
	}
	return []string{"run " + ref.RunID}
}

// text is "each check 2 times, in shuffled order (seed 7), up to 3 at a
// time, beside 2 busy CPU workers, in the baseline environment and with GPU_MAX_HW_QUEUES=3".
func (o SuiteOptions) text() string {
	var parts []string
	switch {
	case o.Repeat > 1:
		parts = append(parts, fmt.Sprintf("each check %d times", o.Repeat))
	default:
		parts = append(parts, "each check once")
	}
	if o.Shuffle {
		parts = append(parts, fmt.Sprintf("in shuffled order (seed %d)", o.Seed))
	}
	if o.Jobs > 1 {
		parts = append(parts, fmt.Sprintf("up to %d at a time", o.Jobs))
	}
	if o.CPULoad > 0 {
		parts = append(parts, fmt.Sprintf("beside %d busy CPU %s", o.CPULoad, words.Plural(o.CPULoad, "worker", "workers")))
	}
	if len(o.Variants) > 0 {
		parts = append(parts, "in the baseline environment and with "+strings.Join(o.Variants, "; "))
	}
	return strings.Join(parts, ", ")
}

// equal reports whether o and p describe the same way of running.
func (o SuiteOptions) equal(p SuiteOptions) bool {
	return o.Repeat == p.Repeat && o.Shuffle == p.Shuffle && (!o.Shuffle || o.Seed == p.Seed) &&
		o.CPULoad == p.CPULoad && max(o.Jobs, 1) == max(p.Jobs, 1) && slices.Equal(o.Variants, p.Variants)
}

// uniform reports whether every suite run s holds was made with the same
// options, and by the same miotool: only then do s.Options and s.Tool
// speak for all of them.
func (s *SuiteResult) uniform() (options, tool bool) {
	options, tool = true, true
	for _, ref := range s.MergedRuns {
		options = options && ref.Options.equal(s.MergedRuns[0].Options)
		tool = tool && ref.Tool == s.MergedRuns[0].Tool
	}
	return options, tool
}

// text is "1.2.3 (commit c0ffee, go1.26.8)".
func (t Tool) text() string {
	var in []string
	if t.Commit != "" {
		in = append(in, "commit "+t.Commit)
	}
	if t.GoVersion != "" {
		in = append(in, t.GoVersion)
	}
	if len(in) == 0 {
		return t.Version
	}
	return t.Version + " (" + strings.Join(in, ", ") + ")"
}

// MergeSuites joins the suite results of several hosts into one, so that
// a matrix run across a fleet becomes one table. sources names each
// result (its file); a run without a host takes its source's base name as
// host. Checks with the same name, command, variant, environment and
// expectation become one row with the runs of every host.
//
// A result with no checks, or none that ran, is refused: it passed
// nothing, and merged beside others it would read as a pass. So is a
// suite run met a second time (by run id, in any input or inside a merged
// one), which would otherwise count its runs twice, and so is a run met a
// second time (the same host, repetition, order and start in one check),
// within one file or across files. Errors name the file.
func MergeSuites(results []*SuiteResult, sources []string) (*SuiteResult, error) {
	if len(results) == 0 {
		return nil, errors.New("no suite results to merge")
	}
	if len(sources) != len(results) {
		return nil, fmt.Errorf("%d sources for %d suite results", len(sources), len(results))
	}
	first := results[0]
	m := &SuiteResult{
		Schema:  SuiteSchemaVersion,
		RunID:   NewRunID(),
		Title:   first.Title,
		File:    first.File,
		Sources: slices.Clone(sources),
	}
	var names []string
	var end time.Time
	index := map[string]*SuiteCheck{}
	mergedFrom := map[string]string{} // run id -> the file it came from
	runFrom := map[string]string{}    // a run's identity -> the file it came from
	for i, r := range results {
		switch {
		case len(r.Checks) == 0:
			return nil, fmt.Errorf("%s: the suite result has no checks; it passed nothing, so it is not merged", sources[i])
		case !r.ran():
			return nil, fmt.Errorf("%s: no check of the suite result ran (%d checks, none with a run); it passed nothing, so it is not merged", sources[i], len(r.Checks))
		}
		for _, ref := range r.runs() {
			if prev, dup := mergedFrom[ref.RunID]; dup {
				what := fmt.Sprintf("%s and %s hold", prev, sources[i])
				if prev == sources[i] {
					what = sources[i] + " holds twice"
				}
				return nil, fmt.Errorf("%s the same suite run (run id %s, %s): merging it again would count its runs twice", what, ref.RunID, ref.describe())
			}
			mergedFrom[ref.RunID] = sources[i]
			if ref.File == "" {
				ref.File = sources[i]
			}
			ref.Hosts = slices.Clone(ref.Hosts)
			ref.Options.Variants = slices.Clone(ref.Options.Variants)
			m.MergedRuns = append(m.MergedRuns, ref)
		}
		if !slices.Contains(names, r.Suite) {
			names = append(names, r.Suite)
		}
		if r.Title != m.Title {
			m.Title = ""
		}
		if r.File != m.File {
			m.File = ""
		}
		if !r.Started.IsZero() {
			if m.Started.IsZero() || r.Started.Before(m.Started) {
				m.Started = r.Started
			}
			if e := r.Started.Add(r.Duration); e.After(end) {
				end = e
			}
		}
		if r.Interrupted != "" {
			// A merge of an interrupted run is incomplete too.
			why := sources[i] + ": " + r.Interrupted
			if m.Interrupted != "" {
				why = m.Interrupted + "; " + why
			}
			m.Interrupted = why
		}
		for _, n := range r.Notes {
			m.Notes = append(m.Notes, sources[i]+": "+n)
		}
		fallbackHost := strings.TrimSuffix(filepath.Base(sources[i]), filepath.Ext(sources[i]))
		for _, h := range r.Hosts {
			if !slices.Contains(m.Hosts, h) {
				m.Hosts = append(m.Hosts, h)
			}
		}
		for _, c := range r.Checks {
			key := strings.Join([]string{c.Name, c.Command, c.Variant, string(c.Expect), strings.Join(c.Env, "\x01")}, "\x00")
			mc, ok := index[key]
			if !ok {
				mc = &SuiteCheck{Name: c.Name, Command: c.Command, Variant: c.Variant, Env: slices.Clone(c.Env), Expect: c.Expect, Skip: c.Skip}
				index[key] = mc
				m.Checks = append(m.Checks, mc)
			}
			if mc.Skip == "" && len(mc.Runs) == 0 {
				mc.Skip = c.Skip
			}
			for _, run := range c.Runs {
				if run.Host == "" {
					run.Host = fallbackHost
					if !slices.Contains(m.Hosts, fallbackHost) {
						m.Hosts = append(m.Hosts, fallbackHost)
					}
				}
				// A run is one process: its host, repetition, place in the
				// order and start name it. Met twice, it would count twice.
				id := fmt.Sprintf("%s\x00%s\x00%d\x00%d\x00%s", key, run.Host, run.Iteration, run.Order, run.Started.Format(time.RFC3339Nano))
				if prev, dup := runFrom[id]; dup {
					what, twice := fmt.Sprintf("%s and %s both hold", prev, sources[i]), ""
					if prev == sources[i] {
						what, twice = sources[i]+" holds", " twice"
					}
					return nil, fmt.Errorf("%s run %d of %s on %s (order %d, started %s)%s: merging it would count the same run twice",
						what, run.Iteration, c.Test(), run.Host, run.Order, run.Started.Format(time.RFC3339Nano), twice)
				}
				runFrom[id] = sources[i]
				mc.Runs = append(mc.Runs, run)
			}
		}
	}
	for _, c := range m.Checks {
		if len(c.Runs) > 0 {
			c.Skip = "" // it ran somewhere
		}
	}
	// Options and version speak for the whole only where every run
	// shares them; each run keeps its own in MergedRuns.
	options, tool := m.uniform()
	if options {
		m.Options = m.MergedRuns[0].Options
		m.Options.Variants = slices.Clone(m.Options.Variants)
	}
	if tool {
		m.Tool = m.MergedRuns[0].Tool
	}
	m.Suite = strings.Join(names, " + ")
	if !m.Started.IsZero() {
		m.Duration = end.Sub(m.Started)
	}
	return m, nil
}
