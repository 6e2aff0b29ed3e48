package capture

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"miotool/internal/hip"
	"miotool/internal/report"
	"miotool/internal/scenario"
	"miotool/internal/streams"
)

// caseRun is one run of one combination, as the verdict logic sees it.
type caseRun struct {
	policy   streams.Policy
	mode     string // "" where the mode is not an axis
	key      string // the combination
	expected scenario.Outcome
	measured scenario.Outcome
	end      hip.Code
	detail   string
}

// group is every run of one combination, in first-seen order.
type group struct {
	runs []caseRun
}

func groupRuns(runs []caseRun) []*group {
	var order []*group
	by := map[string]*group{}
	for _, r := range runs {
		g := by[r.key]
		if g == nil {
			g = &group{}
			by[r.key] = g
			order = append(order, g)
		}
		g.runs = append(g.runs, r)
	}
	return order
}

// measured is "FAIL" for one run, "FAIL (20/20)" for a steady repeat, and
// the split otherwise ("PASS 18/20, FAIL 2/20").
func (g *group) measured() string {
	counts := map[scenario.Outcome]int{}
	var seen []scenario.Outcome
	for _, r := range g.runs {
		if counts[r.measured] == 0 {
			seen = append(seen, r.measured)
		}
		counts[r.measured]++
	}
	n := len(g.runs)
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

// agrees reports whether every run measured the expected outcome.
func (g *group) agrees() bool {
	for _, r := range g.runs {
		if r.measured != r.expected {
			return false
		}
	}
	return true
}

// endCodes lists the end-capture codes seen, with counts when repeated.
func (g *group) endCodes(d hip.Dialect) string {
	counts := map[hip.Code]int{}
	var seen []hip.Code
	for _, r := range g.runs {
		if counts[r.end] == 0 {
			seen = append(seen, r.end)
		}
		counts[r.end]++
	}
	var parts []string
	for _, c := range seen {
		s := codeCell(c, d)
		if len(g.runs) > 1 {
			s += fmt.Sprintf(" x%d", counts[c])
		}
		parts = append(parts, s)
	}
	return strings.Join(parts, ", ")
}

// detail is the first disagreeing run's detail, else the first run's.
func (g *group) detail() string {
	for _, r := range g.runs {
		if r.measured != r.expected {
			return r.detail
		}
	}
	return g.runs[0].detail
}

// Fill writes the capture cases into r, one row per combination
// (repeated runs counted in the row). One combination: its own verdict.
// Several: PASS when every run measured the expected outcome (the bug
// reproduces where the rules say it must and the fix holds elsewhere), with
// a checklist status that says which policies fail.
func Fill(r *report.Result, cases []Case, d hip.Dialect, w scenario.Words, end time.Time) {
	t := r.AddTable("capture after an abandoned naive evaluation", "reclaim", "mode", "variant", "expected", "measured", "end capture", "graph output", "detail")
	t.FlagColumn = "differs from expected"
	runs := make([]caseRun, len(cases))
	for i, c := range cases {
		runs[i] = caseRun{c.Policy, c.Mode.String(), fmt.Sprintf("%s/%s/%s", c.Policy, c.Mode, c.Variant), c.Expected, c.Measured, c.EndCapture, c.Detail}
	}
	groups := groupRuns(runs)
	byKey := map[string][]Case{}
	for i, c := range cases {
		byKey[runs[i].key] = append(byKey[runs[i].key], c)
	}
	for _, g := range groups {
		cs := byKey[g.runs[0].key]
		first := cs[0]
		out := "-"
		okN, endedN := 0, 0
		for _, c := range cs {
			if c.EndCapture == hip.Success {
				endedN++
				if c.OutputOK {
					okN++
				}
			}
		}
		if endedN > 0 {
			out = "correct"
			if okN < endedN {
				out = fmt.Sprintf("WRONG in %d of %d", endedN-okN, endedN)
			}
		}
		cells := []string{string(first.Policy), first.Mode.String(), string(first.Variant), string(first.Expected), g.measured(),
			g.endCodes(d), out, g.detail()}
		if g.agrees() {
			t.AddRow(cells...)
		} else {
			t.AddFlaggedRow("!", cells...)
		}
	}
	var sum streams.Counters
	for _, c := range cases {
		sum.Abandoned += c.Counters.Abandoned
		sum.ReclaimedByCallback += c.Counters.ReclaimedByCallback
		sum.ReclaimedByBackstop += c.Counters.ReclaimedByBackstop
		sum.ReclaimedByLaunch += c.Counters.ReclaimedByLaunch
	}
	retried := 0
	for _, c := range cases {
		if c.FindAttempts > 1 {
			retried++
		}
	}
	r.Count("runs", int64(len(cases)))
	r.Count("runs whose find was repeated until naive overran and still ran", int64(retried))
	r.Count("abandoned", sum.Abandoned)
	r.Count("reclaimed by callback", sum.ReclaimedByCallback)
	r.Count("reclaimed by backstop", sum.ReclaimedByBackstop)
	r.Count("of which by the launch path", sum.ReclaimedByLaunch)
	finishMatrix(r, groups, w, end)
}

// FillReplay writes the replay cases into r, with the same verdict rules.
func FillReplay(r *report.Result, cases []ReplayCase, d hip.Dialect, w scenario.Words, end time.Time) {
	t := r.AddTable("replay-only workload: is the abandoned evaluation's scratch released?", "reclaim", "expected", "measured", "end capture", "pinned after find", "pinned at deadline", "released after (median)", "replays", "detail")
	t.FlagColumn = "differs from expected"
	runs := make([]caseRun, len(cases))
	for i, c := range cases {
		runs[i] = caseRun{c.Policy, "", string(c.Policy), c.Expected, c.Measured, c.EndCapture, c.Detail}
	}
	groups := groupRuns(runs)
	byPolicy := map[streams.Policy][]ReplayCase{}
	for _, c := range cases {
		byPolicy[c.Policy] = append(byPolicy[c.Policy], c)
	}
	for _, g := range groups {
		cs := byPolicy[g.runs[0].policy]
		first := cs[0]
		var released []time.Duration
		okN, ranN := 0, 0
		for _, c := range cs {
			if c.ReleasedAfter > 0 {
				released = append(released, c.ReleasedAfter)
			}
			if c.EndCapture == hip.Success {
				ranN++
				if c.ReplaysOK {
					okN++
				}
			}
		}
		rel := "not released"
		if len(released) > 0 {
			sort.Slice(released, func(i, j int) bool { return released[i] < released[j] })
			rel = released[len(released)/2].Round(10 * time.Microsecond).String()
			if len(released) < len(cs) {
				rel += fmt.Sprintf(" (%d of %d runs)", len(released), len(cs))
			}
		}
		reps := fmt.Sprintf("%d per run", first.Replays)
		if ranN > 0 {
			if okN == ranN {
				reps += ", output correct"
			} else {
				reps += fmt.Sprintf(", output WRONG in %d of %d", ranN-okN, ranN)
			}
		}
		cells := []string{string(first.Policy), string(first.Expected), g.measured(), g.endCodes(d),
			fmt.Sprint(first.PinnedAfterFind), fmt.Sprint(cs[len(cs)-1].PinnedAtEnd), rel, reps, g.detail()}
		if g.agrees() {
			t.AddRow(cells...)
		} else {
			t.AddFlaggedRow("!", cells...)
		}
	}
	r.Count("runs", int64(len(cases)))
	finishMatrix(r, groups, w, end)
}

func codeCell(c hip.Code, d hip.Dialect) string {
	return fmt.Sprintf("%s (%d)", c.Name(d), int(c))
}

// finishMatrix sets the verdict and checklist status of a set of groups.
func finishMatrix(r *report.Result, groups []*group, w scenario.Words, end time.Time) {
	if len(groups) == 0 {
		r.Finish(report.Error, "no case ran", end)
		return
	}
	var inconclusive, disagree []string
	failsBy := map[streams.Policy][]string{}
	passes := map[streams.Policy]bool{}
	for _, g := range groups {
		for _, run := range g.runs {
			switch {
			case run.measured == scenario.Inconclusive:
				inconclusive = append(inconclusive, run.key)
			case run.measured != run.expected:
				disagree = append(disagree, fmt.Sprintf("%s measured %s, expected %s", run.key, run.measured, run.expected))
			}
			if run.measured == scenario.Fail {
				failsBy[run.policy] = append(failsBy[run.policy], run.mode)
			} else if run.measured == scenario.Pass {
				passes[run.policy] = true
			}
		}
	}
	r.Status = matrixStatus(failsBy, passes, w)
	switch {
	case len(inconclusive) > 0:
		r.Finish(report.Error, "the scenario's precondition did not hold (no abandoned naive evaluation) in: "+strings.Join(uniqueNonEmpty(inconclusive), ", "), end)
	case len(groups) == 1:
		g := groups[0]
		r.Status = ""
		n, passed := len(g.runs), 0
		for _, run := range g.runs {
			if run.measured == scenario.Pass {
				passed++
			}
		}
		switch {
		case passed == n && n == 1:
			r.Finish(report.Pass, "passed", end)
		case passed == n:
			r.Status = fmt.Sprintf("Passed (%d/%d)", n, n)
			r.Finish(report.Pass, fmt.Sprintf("passed in %d of %d runs", n, n), end)
		case n == 1:
			r.Finish(report.Fail, g.detail(), end)
		default:
			r.Status = fmt.Sprintf("Failed (%d/%d)", n-passed, n)
			r.Finish(report.Fail, fmt.Sprintf("failed in %d of %d runs: %s", n-passed, n, g.detail()), end)
		}
	case len(disagree) > 0:
		r.Finish(report.Fail, "differs from the expectation: "+strings.Join(disagree, "; "), end)
	default:
		runs := 0
		for _, g := range groups {
			runs += len(g.runs)
		}
		r.Finish(report.Pass, fmt.Sprintf("all %d runs of %d combinations as expected: %s", runs, len(groups), r.Status), end)
	}
}

// matrixStatus is a checklist status such as "Fails with L (global,
// thread-local), passes with G, W", where L, G and W are the lazy, guarded
// and worker policies as w spells them.
func matrixStatus(failsBy map[streams.Policy][]string, passes map[streams.Policy]bool, w scenario.Words) string {
	var fails, oks []string
	for _, p := range streams.Policies {
		if ms, ok := failsBy[p]; ok {
			s := w.Reclaim(p)
			if modes := uniqueNonEmpty(ms); len(modes) > 0 {
				s += " (" + strings.Join(modes, ", ") + ")"
			}
			fails = append(fails, s)
		} else if passes[p] {
			oks = append(oks, w.Reclaim(p))
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
