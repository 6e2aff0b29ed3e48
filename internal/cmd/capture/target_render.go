package capture

import (
	"fmt"
	"strings"
	"time"

	"miotool/internal/cmd/libtarget"
	"miotool/internal/cmd/matrix"
	"miotool/internal/hip"
	"miotool/internal/report"
	"miotool/internal/scenario"
	capturescen "miotool/internal/scenario/capture"
)

// fillTargetCases writes library capture cases into r: find's ranking
// (of the first case), one row per case, and the verdict: PASS when every
// case kept its capture valid with the right graph output, FAIL naming the
// cases that did not (the library has the bug), with a checklist status
// such as "Fails with --target=miopen (global, thread-local), passes
// (relaxed)".
func fillTargetCases(r *report.Result, cases []capturescen.TargetCase, d hip.Dialect, stop *matrix.Interruption, end time.Time) {
	if len(cases) == 0 && stop != nil {
		finishTargetInterrupted(r, cases, stop, end)
		return
	}
	if len(cases) == 0 {
		r.Finish(report.Error, "no case ran", end)
		return
	}
	first := cases[0]
	r.Note("library %s", first.Library)
	if len(first.Found) > 0 {
		ft := r.AddTable(fmt.Sprintf("%s find (first case)", first.Target), "rank", "algorithm", "time (ms)", "workspace", "note")
		rank := 0
		for _, a := range first.Found {
			rk, tm := "-", "-"
			if a.OK {
				rank++
				rk, tm = fmt.Sprint(rank), fmt.Sprintf("%.4f", a.TimeMs)
			}
			ft.AddRow(rk, a.Name, tm, fmt.Sprint(a.WorkspaceBytes), a.Note)
		}
	}
	t := r.AddTable(fmt.Sprintf("%s: capture of the forward convolution after find", first.Target),
		"mode", "variant", "algorithm", "expected", "measured", "end capture", "graph output", "detail")
	t.FlagColumn = "differs from expected"
	var failed, passed []string
	for _, c := range cases {
		out := "-"
		if c.EndCapture == hip.Success {
			out = "WRONG"
			if c.OutputOK {
				out = fmt.Sprintf("correct (max |err| %.3g)", c.MaxAbsErr)
			}
		}
		detail := c.Detail
		if c.FirstRefusal != "" {
			detail = scenario.JoinDetail("library call failed: "+c.FirstRefusal, detail)
		}
		cells := []report.Cell{report.TextCell(c.Mode.String()), report.TextCell(string(c.Variant)), report.TextCell(c.Chosen.String()),
			report.TextCell(string(c.Expected)), report.TextCell(string(c.Measured)), report.CodeCell(c.EndCapture.Name(d), int(c.EndCapture)),
			report.TextCell(out), report.TextCell(detail)}
		label := c.Mode.String()
		if len(uniqueVariants(cases)) > 1 {
			label += "/" + string(c.Variant)
		}
		if c.Agrees() {
			t.AddCells("", cells...)
			passed = append(passed, label)
		} else {
			t.AddCells("!", cells...)
			failed = append(failed, label)
		}
	}
	// The cases count as a matrix's combinations do: how many behaved as
	// expected, of how many ran.
	agree := 0
	for _, c := range cases {
		if c.Agrees() {
			agree++
		}
	}
	r.Cases = report.Cases{Passed: agree, Total: len(cases)}
	failed, passed = uniqueInOrder(failed), uniqueInOrder(passed)
	flag := libtarget.StatusFlag(first.Target)
	switch {
	case stop != nil:
		finishTargetInterrupted(r, cases, stop, end)
	case len(failed) == 0:
		r.Detail = "Passes with " + flag
		r.Finish(report.Pass, fmt.Sprintf("all %d cases kept the capture valid and the graph output right", len(cases)), end)
	default:
		r.Detail = fmt.Sprintf("Fails with %s (%s)", flag, strings.Join(failed, ", "))
		if len(passed) > 0 {
			r.Detail += fmt.Sprintf(", passes (%s)", strings.Join(passed, ", "))
		}
		// Cases that failed for the same reason share one entry, so a
		// library that fails everywhere alike says so once.
		var reasons []string
		labels := map[string][]string{}
		for _, c := range cases {
			if !c.Agrees() {
				reason := matrix.CodeCell(c.EndCapture, d) + " " + firstNonEmpty(c.FirstRefusal, c.Detail)
				if _, seen := labels[reason]; !seen {
					reasons = append(reasons, reason)
				}
				labels[reason] = append(labels[reason], fmt.Sprintf("%s/%s", c.Mode, c.Variant))
			}
		}
		why := make([]string, len(reasons))
		for i, reason := range reasons {
			why[i] = strings.Join(labels[reason], ", ") + ": " + reason
		}
		r.Finish(report.Fail, strings.Join(why, "; "), end)
	}
}

func uniqueVariants(cases []capturescen.TargetCase) []scenario.Variant {
	seen := map[scenario.Variant]bool{}
	var out []scenario.Variant
	for _, c := range cases {
		if !seen[c.Variant] {
			seen[c.Variant] = true
			out = append(out, c.Variant)
		}
	}
	return out
}

func uniqueInOrder(ss []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, s := range ss {
		if !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	return out
}

func firstNonEmpty(ss ...string) string {
	for _, s := range ss {
		if s != "" {
			return s
		}
	}
	return ""
}

// finishTargetInterrupted is the verdict of library cases a signal
// stopped between two cases: INTERRUPTED, with the finished cases and
// those not run counted, and what the finished ones showed so far.
func finishTargetInterrupted(r *report.Result, cases []capturescen.TargetCase, stop *matrix.Interruption, end time.Time) {
	disagree := 0
	for _, c := range cases {
		if !c.Agrees() {
			disagree++
		}
	}
	notRun := max(0, stop.Planned-len(cases))
	r.Count("interrupted", 0)
	r.Count("not run", int64(notRun))
	soFar := ""
	switch {
	case len(cases) == 0:
	case disagree > 0:
		soFar = fmt.Sprintf("%d of %d differ from the expectation", disagree, len(cases))
	default:
		soFar = "every finished case as expected"
	}
	r.Interrupt(stop.Reason, report.Progress{Finished: len(cases), Planned: stop.Planned, Unit: "cases"}, 0, soFar, end)
}
