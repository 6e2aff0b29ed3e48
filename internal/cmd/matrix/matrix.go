// Package matrix is what capture and replay share: the #12121 scenario's
// problems and counts, and the verdict of a matrix of runs (combinations of
// reclaim policy, capture mode and variant, each possibly repeated) against
// the outcomes the capture rules expect.
package matrix

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"miotool/configs"
	"miotool/internal/cli"
	"miotool/internal/conv"
	"miotool/internal/finder"
	"miotool/internal/hip"
	"miotool/internal/report"
	"miotool/internal/scenario"
	capturescen "miotool/internal/scenario/capture"
	"miotool/internal/streams"
)

// Run is one run of one combination, as the matrix verdict that
// capture and replay share sees it.
type Run struct {
	Policy   streams.Policy
	Mode     string // "" where the mode is not an axis
	Key      string // the combination
	Expected scenario.Outcome
	Measured scenario.Outcome
	End      hip.Code
	Detail   string
}

// Group is every run of one combination, in first-seen order.
type Group struct {
	Runs []Run
}

// GroupRuns groups runs by combination, in first-seen order.
func GroupRuns(runs []Run) []*Group {
	var order []*Group
	by := map[string]*Group{}
	for _, r := range runs {
		g := by[r.Key]
		if g == nil {
			g = &Group{}
			by[r.Key] = g
			order = append(order, g)
		}
		g.Runs = append(g.Runs, r)
	}
	return order
}

// Measured is "FAIL" for one run, "FAIL (20/20)" for a steady repeat, and
// the split otherwise ("PASS 18/20, FAIL 2/20").
func (g *Group) Measured() string {
	counts := map[scenario.Outcome]int{}
	var seen []scenario.Outcome
	for _, r := range g.Runs {
		if counts[r.Measured] == 0 {
			seen = append(seen, r.Measured)
		}
		counts[r.Measured]++
	}
	n := len(g.Runs)
	if len(seen) == 1 {
		if n == 1 {
			return string(seen[0])
		}
		return fmt.Sprintf("%s (%d/%d)", seen[0], n, n)
	}
	var parts []string
	for _, o := range seen {
		parts = append(parts, fmt.Sprintf("%s %d/%d", o, counts[o], n))
	}
	return strings.Join(parts, ", ")
}

// Agrees reports whether every run measured the expected outcome; a run
// an interruption stopped measured nothing, and does not disagree.
func (g *Group) Agrees() bool {
	for _, r := range g.Runs {
		if r.Disagrees() {
			return false
		}
	}
	return true
}

// Disagrees reports a finished run that measured another outcome than
// the expected one.
func (r Run) Disagrees() bool {
	return r.Measured != r.Expected && r.Measured != scenario.Interrupted
}

// EndCodes lists the end-capture codes seen, with counts when repeated.
func (g *Group) EndCodes(d hip.Dialect) string {
	counts := map[hip.Code]int{}
	var seen []hip.Code
	for _, r := range g.Runs {
		if r.Measured == scenario.Interrupted {
			continue // it may not have reached the end of its capture
		}
		if counts[r.End] == 0 {
			seen = append(seen, r.End)
		}
		counts[r.End]++
	}
	if len(seen) == 0 {
		return "-"
	}
	var parts []string
	for _, c := range seen {
		s := CodeCell(c, d)
		if len(g.Runs) > 1 {
			s += fmt.Sprintf(" x%d", counts[c])
		}
		parts = append(parts, s)
	}
	return strings.Join(parts, ", ")
}

// EndCell is the end-capture cell: EndCodes for people, and for machines
// the code, where the runs ended with one code only.
func (g *Group) EndCell(d hip.Dialect) report.Cell {
	cell := report.TextCell(g.EndCodes(d))
	var code *hip.Code
	for _, r := range g.Runs {
		if r.Measured == scenario.Interrupted {
			continue
		}
		if code != nil && *code != r.End {
			return cell
		}
		end := r.End
		code = &end
	}
	if code != nil {
		cell.Value = fmt.Sprint(int(*code))
	}
	return cell
}

// Detail is the first disagreeing run's detail, else the first finished
// run's, else the first run's.
func (g *Group) Detail() string {
	for _, r := range g.Runs {
		if r.Disagrees() {
			return r.Detail
		}
	}
	for _, r := range g.Runs {
		if r.Measured != scenario.Interrupted {
			return r.Detail
		}
	}
	return g.Runs[0].Detail
}

// FinishedRuns counts the runs an interruption did not stop.
func FinishedRuns(runs []Run) int {
	n := 0
	for _, r := range runs {
		if r.Measured != scenario.Interrupted {
			n++
		}
	}
	return n
}

// CodeCell is a runtime code with its name in d and its number, as every
// table writes one.
func CodeCell(c hip.Code, d hip.Dialect) string { return report.CodeCell(c.Name(d), int(c)).Text }

// Interruption says that a signal stopped a run of cases: what it was
// ("interrupted by SIGINT") and how many cases were planned.
type Interruption struct {
	Reason  string
	Planned int
}

// Finish sets the verdict and the facts the checklist status is composed
// of (report.Result.ChecklistStatus) of a set of groups.
// Stopped by an interruption (stop set), the verdict is INTERRUPTED and
// says how many runs finished, were interrupted and were not run, and
// what the finished ones showed so far.
func Finish(r *report.Result, groups []*Group, stop *Interruption, end time.Time) {
	if stop != nil {
		finishInterrupted(r, groups, stop, end)
		return
	}
	if len(groups) == 0 {
		r.Finish(report.Error, "no case ran", end)
		return
	}
	var inconclusive, disagree []string
	failsBy := map[streams.Policy][]string{}
	passes := map[streams.Policy]bool{}
	for _, g := range groups {
		for _, run := range g.Runs {
			switch {
			case run.Measured == scenario.Inconclusive:
				inconclusive = append(inconclusive, run.Key)
			case run.Measured != run.Expected:
				disagree = append(disagree, fmt.Sprintf("%s measured %s, expected %s", run.Key, run.Measured, run.Expected))
			}
			if run.Measured == scenario.Fail {
				failsBy[run.Policy] = append(failsBy[run.Policy], run.Mode)
			} else if run.Measured == scenario.Pass {
				passes[run.Policy] = true
			}
		}
	}
	r.Detail = matrixStatus(failsBy, passes)
	if len(groups) > 1 {
		// A matrix counts its combinations as a binary counts its
		// sub-tests: how many behaved as expected, of how many ran.
		agree := 0
		for _, g := range groups {
			if g.Agrees() {
				agree++
			}
		}
		r.Cases = report.Cases{Passed: agree, Total: len(groups)}
	}
	switch {
	case len(inconclusive) > 0:
		r.Finish(report.Error, "the scenario's precondition did not hold (no abandoned naive evaluation) in: "+strings.Join(uniqueNonEmpty(inconclusive), ", "), end)
	case len(groups) == 1:
		g := groups[0]
		r.Detail = ""
		n, passed := len(g.Runs), 0
		for _, run := range g.Runs {
			if run.Measured == scenario.Pass {
				passed++
			}
		}
		switch {
		case passed == n && n == 1:
			r.Finish(report.Pass, "passed", end)
		case passed == n:
			r.Cases = report.Cases{Passed: n, Total: n, Unit: "runs"}
			r.Finish(report.Pass, fmt.Sprintf("passed in %d of %d runs", n, n), end)
		case n == 1:
			r.Finish(report.Fail, g.Detail(), end)
		default:
			r.Cases = report.Cases{Passed: passed, Total: n, Unit: "runs"}
			r.Finish(report.Fail, fmt.Sprintf("failed in %d of %d runs: %s", n-passed, n, g.Detail()), end)
		}
	case len(disagree) > 0:
		r.Finish(report.Fail, "differs from the expectation: "+strings.Join(disagree, "; "), end)
	default:
		runs := 0
		for _, g := range groups {
			runs += len(g.Runs)
		}
		r.Finish(report.Pass, fmt.Sprintf("all %d runs of %d combinations as expected: %s", runs, len(groups), r.Detail), end)
	}
}

// finishInterrupted is the verdict of a run of cases a signal stopped:
// INTERRUPTED, with the runs that finished, the one stopped and those
// never reached counted, and what the finished runs showed so far. Only
// the finished runs count toward the checklist status's failures and
// passes, so nothing is claimed of a run that did not end.
func finishInterrupted(r *report.Result, groups []*Group, stop *Interruption, end time.Time) {
	finished, stopped := 0, 0
	var inconclusive, disagree []string
	for _, g := range groups {
		for _, run := range g.Runs {
			switch {
			case run.Measured == scenario.Interrupted:
				stopped++
				continue
			case run.Measured == scenario.Inconclusive:
				inconclusive = append(inconclusive, run.Key)
			case run.Measured != run.Expected:
				disagree = append(disagree, fmt.Sprintf("%s measured %s, expected %s", run.Key, run.Measured, run.Expected))
			}
			finished++
		}
	}
	notRun := max(0, stop.Planned-finished-stopped)
	r.Count("interrupted", int64(stopped))
	r.Count("not run", int64(notRun))
	soFar := ""
	switch {
	case finished == 0:
	case len(inconclusive) > 0:
		soFar = "the precondition did not hold (no abandoned naive evaluation) in: " + strings.Join(uniqueNonEmpty(inconclusive), ", ")
	case len(disagree) > 0:
		soFar = "differs from the expectation: " + strings.Join(disagree, "; ")
	default:
		soFar = "every finished run as expected"
	}
	r.Interrupt(stop.Reason, report.Progress{Finished: finished, Planned: stop.Planned, Unit: "runs"}, stopped, soFar, end)
}

// matrixStatus is a checklist detail such as "Fails with --reclaim=lazy
// (global, thread-local), passes with --reclaim=guarded, --reclaim=worker".
func matrixStatus(failsBy map[streams.Policy][]string, passes map[streams.Policy]bool) string {
	var fails, oks []string
	for _, p := range streams.Policies {
		if ms, ok := failsBy[p]; ok {
			s := cli.ReclaimFlag(p)
			if modes := uniqueNonEmpty(ms); len(modes) > 0 {
				s += " (" + strings.Join(modes, ", ") + ")"
			}
			fails = append(fails, s)
		} else if passes[p] {
			oks = append(oks, cli.ReclaimFlag(p))
		}
	}
	var parts []string
	if len(fails) > 0 {
		parts = append(parts, "Fails with "+strings.Join(fails, ", "))
	}
	if len(oks) > 0 {
		w := "passes with "
		if len(parts) == 0 {
			w = "Passes with "
		}
		parts = append(parts, w+strings.Join(oks, ", "))
	}
	return strings.Join(parts, ", ")
}

func uniqueNonEmpty(ss []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, s := range ss {
		if s != "" && !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	sort.Strings(out)
	return out
}

// Bounds of the counts capture and replay take. Each bound is far past
// any use, so that a count that cannot finish in reason (or that a typo
// made) is refused up front rather than run for hours.
// --samples is bounded by cli.MaxSamples, as find's.
const (
	// MaxRepeat: ten thousand runs of a case put a failure rate of one in
	// a few thousand within reach; a case takes a fraction of a second on
	// a GPU and about a second on the simulator, so more belongs in
	// several invocations merged with 'miotool report merge'.
	MaxRepeat = 10000
	// MaxRuns bounds the runs of one invocation, repeats times
	// combinations: each run's facts are kept for the result (a few
	// hundred bytes each).
	MaxRuns = 100000
)

// ValidateCounts checks --samples and --repeat against their bounds, and
// the runs they make with combinations cases each.
func ValidateCounts(samples, repeat, combinations int) error {
	if err := cli.ValidateSamples(samples); err != nil {
		return err
	}
	switch {
	case repeat < 1:
		return cli.UsageErrorf("--repeat %d: want 1 to %d", repeat, MaxRepeat)
	case repeat > MaxRepeat:
		return cli.UsageErrorf("--repeat %d: at most %d (merge the results of several runs with 'miotool report merge')", repeat, MaxRepeat)
	case repeat*combinations > MaxRuns:
		return cli.UsageErrorf("--repeat %d of %d combinations is %d runs: at most %d in one invocation", repeat, combinations, repeat*combinations, MaxRuns)
	}
	return nil
}

// ScenarioProblems resolves the find problem and the captured one, for
// capture and replay, and refuses (exit 2) a pair whose find and capture
// need more device memory than the device has, before anything is
// allocated.
func ScenarioProblems(s *cli.Scenario, pf *cli.ProblemFlags, props hip.Props) (capturescen.Options, string, error) {
	fp, name, err := pf.Resolve(props.Backend)
	if err != nil {
		return capturescen.Options{}, "", err
	}
	cp, err := configs.Problem("", "capture-small")
	if err != nil {
		return capturescen.Options{}, "", err
	}
	label := fp.String()
	if name != "" {
		label = name + " (" + label + ")"
	}
	if err := fits(fp, cp.Problem, s.Env.NaiveTimeoutPercent, props.TotalMemory); err != nil {
		return capturescen.Options{}, "", cli.UsageErrorf("find problem %s: %v", label, err)
	}
	return capturescen.Options{
		FindProblem:     fp,
		CaptureProblem:  cp.Problem,
		NaiveTimeoutPct: s.Env.NaiveTimeoutPercent,
		MaxDraining:     streams.MaxDrainingFor(s.Env.HWQueues),
		Log:             s.Verbosef,
	}, label, nil
}

// fits reports an error wrapping finder.ErrTooLarge when the scenario's
// find of fp and the tensors of the captured cp, which it holds at once,
// need more than total bytes (0: a device that does not say).
func fits(fp, cp conv.Problem, naiveTimeoutPct int, total uint64) error {
	need, err := finder.Need(fp, finder.Options{NaiveTimeoutPct: naiveTimeoutPct})
	if err != nil {
		return err
	}
	if err := need.Fits(total); err != nil {
		return err
	}
	captured, err := finder.Need(cp, finder.Options{NaiveTimeoutPct: 0})
	if err != nil {
		return err
	}
	both := finder.MemoryNeed{Input: need.Input + captured.Input, Weights: need.Weights + captured.Weights,
		Output: need.Output + captured.Output, Workspace: need.Workspace + captured.Workspace, NaiveScratch: need.NaiveScratch}
	if err := both.Fits(total); err != nil {
		return fmt.Errorf("with the captured convolution: %w", err)
	}
	return nil
}

// Stopped sorts out how a run of cases ended: an interruption (a
// signal), with planned cases in all, gives the Interruption to render
// and no error; any other error is returned as it is.
func Stopped(ctx context.Context, err error, planned int) (*Interruption, error) {
	if cli.Interrupted(ctx) == nil {
		return nil, err
	}
	if err != nil && !errors.Is(err, capturescen.ErrInterrupted) && !errors.Is(err, context.Canceled) {
		return nil, err
	}
	return &Interruption{Reason: cli.InterruptedReason(ctx).Error(), Planned: planned}, nil
}
