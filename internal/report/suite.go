package report

import (
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"miotool/internal/words"
)

// SuiteSchemaVersion names the JSON layout of a SuiteResult. Like
// SchemaVersion it changes only when a field is renamed or removed, or
// changes its meaning.
const SuiteSchemaVersion = "miotool/suite/v4"

// suiteSchemaV3 is the layout whose statuses were worded by each command
// and whose runs' status was the child's own; suiteSchemaV2 the layout
// whose merged results carried the first input's options and version at
// the top level for every run; suiteSchemaV1 the layout before run ids.
// All are still read.
const (
	suiteSchemaV3 = "miotool/suite/v3"
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
	// Shard, when set, says which part of a split run this result is
	// (report --suite --shard, repeat --shard).
	Shard *Shard
	// MissingShards are the shards a merge was told to do without: its
	// checklist names them, and its verdict is never PASS.
	MissingShards []MissingShard
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
	// Shard is the shard that runs the check when a suite is split by
	// checks (1 to the count); 0 otherwise.
	Shard int
	Runs  []SuiteRun
}

// key is what makes two checks of different results the same check in a
// merge: name, command, variant, expectation and environment.
func (c *SuiteCheck) key() string {
	return strings.Join([]string{c.Name, c.Command, c.Variant, string(c.Expect), strings.Join(c.Env, "\x01")}, "\x00")
}

// SuiteRun is one run of a check: one miotool process.
type SuiteRun struct {
	Host      string
	Iteration int // which repetition, from 1
	Order     int // the position in the order the suite ran its checks, from 1
	Verdict   Verdict
	ExitCode  int
	// Detail is what the child's result found beyond its verdict
	// (Result.Detail).
	Detail  string
	Summary string
	// Progress is how far the child got, when an interruption stopped it
	// and its result said so.
	Progress Progress
	Backend  string
	Device   Device
	// PinnedDevice is the id of the device the run was pinned to among
	// its host's (report --devices: its CUDA_VISIBLE_DEVICES and
	// HIP_VISIBLE_DEVICES), "" when it was not pinned. Device names the
	// device the run reported, which two GPUs of one model share.
	PinnedDevice string
	Started      time.Time
	Duration     time.Duration
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

// runMet reports whether a run's verdict is the expected one, on what the
// check asks to run on (see mismatch).
func (c *SuiteCheck) runMet(r SuiteRun) bool { return r.Verdict == c.Expect && c.mismatch(r) == "" }

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
	for _, c := range s.ownChecks() {
		if c.NotRun() && c.Skip == "" && s.missingShard(c) == nil {
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
			if !c.runMet(r) && (r.Verdict == Error || c.mismatch(r) != "") {
				return Error
			}
		}
		return Fail
	case c.stoppedRuns() > 0:
		return Interrupted
	}
	return Skip
}

// Status is the checklist's Status cell of the check on its own (see
// status): a suite says how many runs it planned and what stopped it
// (SuiteResult.StatusOf).
func (c *SuiteCheck) Status() string { return c.status(0, "") }

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
	for _, c := range s.ownChecks() {
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
	case s.unexplained() > 0 || len(s.MissingShards) > 0:
		// Checks with no run and no reason, in a suite that was not
		// interrupted: the tool lost them. A merge without some of its
		// shards lacks what they ran.
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
	if m := s.missingText(); m != "" {
		b.WriteString("; " + m)
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

// StatusOf is the check's Status cell in this suite: a check an
// interruption left without a run, or whose shard a merge lacks, says so;
// an interrupted check counts the runs the suite planned.
func (s *SuiteResult) StatusOf(c *SuiteCheck) string {
	switch {
	case !c.NotRun():
	case s.missingShard(c) != nil:
		return composeStatus(StatusNotRun, []string{"shard " + s.missingShard(c).String() + " missing"}, "")
	case c.Skip == "" && s.interrupted():
		return composeStatus(StatusNotRun, []string{"the suite was interrupted before it started"}, "")
	case !s.own(c):
		return composeStatus(StatusNotRun, []string{fmt.Sprintf("shard %d/%d runs it", c.Shard, s.Shard.Count)}, "")
	}
	planned := 0
	if len(s.MergedRuns) <= 1 {
		planned = s.Options.Repeat
	}
	return c.status(planned, s.Interrupted)
}

// Checklist is the suite's Testing Checklist: Test | Command | Devices |
// Status, one row per check and variant (in a shard split by checks, per
// check of that shard). Every row names its devices, whether the suite
// ran on one or many, so that a row pasted alone still says where it ran.
func (s *SuiteResult) Checklist() *Table {
	t := &Table{Columns: ChecklistColumns}
	label := s.deviceLabeler()
	for _, c := range s.ownChecks() {
		t.AddRow(c.Test(), c.CommandLine(), s.devicesCell(c, label), s.StatusOf(c))
	}
	return t
}

// devices lists the distinct devices of every run, for the header.
func (s *SuiteResult) devices() string {
	label := s.deviceLabeler()
	var ds []string
	for _, c := range s.ownChecks() {
		for _, r := range c.Runs {
			if l := onHost(label(r)); r.Device.Name != "" && !slices.Contains(ds, l) {
				ds = append(ds, l)
			}
		}
	}
	return strings.Join(ds, ", ")
}

// devicesCell lists the distinct devices a check's runs used: each
// device's name, with its host where another host has a device of that
// name, and for runs pinned to one of their host's devices (report
// --devices) the ids they were pinned to: "NVIDIA H200 (sm_90) on devices
// 0, 2", "NVIDIA H200 (sm_90) on device 1 of node7". A pinned run that
// reported no device is still named by its id ("device 3").
func (s *SuiteResult) devicesCell(c *SuiteCheck, label deviceLabel) string {
	type used struct {
		name, host string
		pinned     []string
	}
	var ds []*used
	for _, r := range c.Runs {
		if r.Device.Name == "" && r.PinnedDevice == "" {
			continue
		}
		name, host := label(r)
		if r.Device.Name == "" {
			name = ""
		}
		i := slices.IndexFunc(ds, func(u *used) bool {
			return u.name == name && u.host == host && (len(u.pinned) > 0) == (r.PinnedDevice != "")
		})
		if i < 0 {
			ds = append(ds, &used{name: name, host: host})
			i = len(ds) - 1
		}
		if r.PinnedDevice != "" && !slices.Contains(ds[i].pinned, r.PinnedDevice) {
			ds[i].pinned = append(ds[i].pinned, r.PinnedDevice)
		}
	}
	if len(ds) == 0 {
		return "none"
	}
	sep := ", "
	texts := make([]string, len(ds))
	for k, u := range ds {
		if len(u.pinned) == 0 {
			texts[k] = onHost(u.name, u.host)
			continue
		}
		// The ids hold commas of their own.
		sep = "; "
		slices.SortFunc(u.pinned, compareDeviceIDs)
		ids := words.Plural(len(u.pinned), "device ", "devices ") + strings.Join(u.pinned, ", ")
		if u.name != "" {
			ids = u.name + " on " + ids
		}
		if u.host != "" {
			ids += " of " + u.host
		}
		texts[k] = ids
	}
	return strings.Join(texts, sep)
}

// compareDeviceIDs orders device ids as a host numbers its devices:
// indexes by number, before any other id (a GPU-... UUID), those by text.
func compareDeviceIDs(a, b string) int {
	x, errA := strconv.Atoi(a)
	y, errB := strconv.Atoi(b)
	switch {
	case errA == nil && errB == nil:
		return cmp.Compare(x, y)
	case errA == nil:
		return -1
	case errB == nil:
		return 1
	}
	return strings.Compare(a, b)
}

// deviceLabel names a run's device as the checklist shows it: its short
// name, and the host where the name alone would not tell it apart ("").
type deviceLabel func(SuiteRun) (name, host string)

// onHost is "NVIDIA H200 (sm_90) on node7", or the name alone without a
// host.
func onHost(name, host string) string {
	if host == "" {
		return name
	}
	return name + " on " + host
}

// deviceLabeler names a run's device as the checklist shows it. A device
// name seen on more than one host is followed by the host ("NVIDIA H200
// (sm_90) on node7"), so that a fleet's table tells the machines apart.
func (s *SuiteResult) deviceLabeler() deviceLabel {
	hostsOf := map[string][]string{}
	for _, c := range s.Checks {
		for _, r := range c.Runs {
			short := r.Device.Short()
			if !slices.Contains(hostsOf[short], r.Host) {
				hostsOf[short] = append(hostsOf[short], r.Host)
			}
		}
	}
	return func(r SuiteRun) (string, string) {
		short := r.Device.Short()
		if len(hostsOf[short]) > 1 && r.Host != "" {
			return short, r.Host
		}
		return short, ""
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
// within one file or across files. Shards of a split run (SuiteResult.Shard)
// must all be there, each once: a shard given twice is refused, and so
// is a set with a shard missing unless opts.TakeMissingShards, when the
// merged result names the missing shards (its checklist, its summary, its
// JUnit) and is never PASS. Errors name the file.
func MergeSuites(results []*SuiteResult, sources []string) (*SuiteResult, error) {
	return MergeSuitesWith(results, sources, MergeOptions{})
}

// MergeOptions tune MergeSuitesWith.
type MergeOptions struct {
	// TakeMissingShards merges the shards that are there of a split run
	// some of whose shards are missing, rather than refusing the set.
	TakeMissingShards bool
}

// MergeSuitesWith is MergeSuites with options.
func MergeSuitesWith(results []*SuiteResult, sources []string, opts MergeOptions) (*SuiteResult, error) {
	if len(results) == 0 {
		return nil, errors.New("no suite results to merge")
	}
	if len(sources) != len(results) {
		return nil, fmt.Errorf("%d sources for %d suite results", len(sources), len(results))
	}
	missing, err := checkShards(results, sources, opts.TakeMissingShards)
	if err != nil {
		return nil, err
	}
	g := &merger{
		m: &SuiteResult{Schema: SuiteSchemaVersion, RunID: NewRunID(), Title: results[0].Title, File: results[0].File,
			Sources: slices.Clone(sources)},
		index: map[string]*SuiteCheck{}, mergedFrom: map[string]string{}, runFrom: map[string]string{},
	}
	for i, r := range results {
		if err := g.add(r, sources[i]); err != nil {
			return nil, err
		}
	}
	m := g.m
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
	m.Suite = strings.Join(g.names, " + ")
	m.MissingShards = missing
	if !m.Started.IsZero() {
		m.Duration = g.end.Sub(m.Started)
	}
	return m, nil
}

// merger is a merge under way: the result so far and what it has taken.
type merger struct {
	m          *SuiteResult
	names      []string
	end        time.Time
	index      map[string]*SuiteCheck // a check's key -> its merged check
	mergedFrom map[string]string      // run id -> the file it came from
	runFrom    map[string]string      // a run's identity -> the file it came from
}

// add merges r, read from source.
func (g *merger) add(r *SuiteResult, source string) error {
	switch {
	case r.Shard != nil && len(r.ownChecks()) == 0:
		// A shard with no checks of its own (more shards than
		// checks) is a part of its set all the same.
	case len(r.Checks) == 0:
		return fmt.Errorf("%s: the suite result has no checks; it passed nothing, so it is not merged", source)
	case !r.ran():
		return fmt.Errorf("%s: no check of the suite result ran (%d checks, none with a run); it passed nothing, so it is not merged", source, len(r.Checks))
	}
	if err := g.addSuiteRuns(r, source); err != nil {
		return err
	}
	g.addHeader(r, source)
	fallbackHost := strings.TrimSuffix(filepath.Base(source), filepath.Ext(source))
	for _, c := range r.Checks {
		if err := g.addCheck(c, source, fallbackHost); err != nil {
			return err
		}
	}
	return nil
}

// addSuiteRuns takes the suite runs r holds, refusing one already taken.
func (g *merger) addSuiteRuns(r *SuiteResult, source string) error {
	for _, ref := range r.runs() {
		if prev, dup := g.mergedFrom[ref.RunID]; dup {
			what := fmt.Sprintf("%s and %s hold", prev, source)
			if prev == source {
				what = source + " holds twice"
			}
			return fmt.Errorf("%s the same suite run (run id %s, %s): merging it again would count its runs twice", what, ref.RunID, ref.describe())
		}
		g.mergedFrom[ref.RunID] = source
		if ref.File == "" {
			ref.File = source
		}
		ref.Hosts = slices.Clone(ref.Hosts)
		ref.Options.Variants = slices.Clone(ref.Options.Variants)
		g.m.MergedRuns = append(g.m.MergedRuns, ref)
	}
	return nil
}

// addHeader takes what r says of itself: its name, title, file, times,
// hosts, failure, interruption and notes, the last three prefixed with
// its file.
func (g *merger) addHeader(r *SuiteResult, source string) {
	m := g.m
	if !slices.Contains(g.names, r.Suite) {
		g.names = append(g.names, r.Suite)
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
		if e := r.Started.Add(r.Duration); e.After(g.end) {
			g.end = e
		}
	}
	// A run that miotool itself failed is an ERROR merged too, and a
	// merge of an interrupted run is incomplete too.
	m.Failure = joinWhy(m.Failure, source, r.Failure)
	m.Interrupted = joinWhy(m.Interrupted, source, r.Interrupted)
	for _, n := range r.Notes {
		m.Notes = append(m.Notes, source+": "+n)
	}
	for _, h := range r.Hosts {
		if !slices.Contains(m.Hosts, h) {
			m.Hosts = append(m.Hosts, h)
		}
	}
}

// joinWhy is so far with "source: why" after it, so far alone when why is
// empty.
func joinWhy(soFar, source, why string) string {
	if why == "" {
		return soFar
	}
	why = source + ": " + why
	if soFar != "" {
		why = soFar + "; " + why
	}
	return why
}

// addCheck takes c's runs into the merged check of the same key,
// refusing a run already taken; a run without a host takes fallbackHost.
func (g *merger) addCheck(c *SuiteCheck, source, fallbackHost string) error {
	m := g.m
	key := c.key()
	mc, ok := g.index[key]
	if !ok {
		mc = &SuiteCheck{Name: c.Name, Command: c.Command, Variant: c.Variant, Env: slices.Clone(c.Env), Expect: c.Expect, Skip: c.Skip, Shard: c.Shard}
		g.index[key] = mc
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
		if prev, dup := g.runFrom[id]; dup {
			what, twice := fmt.Sprintf("%s and %s both hold", prev, source), ""
			if prev == source {
				what, twice = source+" holds", " twice"
			}
			return fmt.Errorf("%s run %d of %s on %s (order %d, started %s)%s: merging it would count the same run twice",
				what, run.Iteration, c.Test(), run.Host, run.Order, run.Started.Format(time.RFC3339Nano), twice)
		}
		g.runFrom[id] = source
		mc.Runs = append(mc.Runs, run)
	}
	return nil
}
