package capture

import (
	"fmt"
	"time"

	"miotool/internal/cmd/matrix"
	"miotool/internal/hip"
	"miotool/internal/report"
	"miotool/internal/scenario"
	capturescen "miotool/internal/scenario/capture"
	"miotool/internal/streams"
)

// fillCases writes the capture cases into r, one row per combination
// (repeated runs counted in the row). One combination: its own verdict.
// Several: PASS when every run measured the expected outcome (the bug
// reproduces where the rules say it must and the fix holds elsewhere), with
// a checklist status that says which policies fail.
func fillCases(r *report.Result, cases []capturescen.Case, d hip.Dialect, stop *matrix.Interruption, end time.Time) {
	t := r.AddTable("capture after an abandoned naive evaluation", "reclaim", "mode", "variant", "expected", "measured", "end capture", "graph output", "detail")
	t.FlagColumn = "differs from expected"
	runs := make([]matrix.Run, len(cases))
	for i, c := range cases {
		runs[i] = matrix.Run{Policy: c.Policy, Mode: c.Mode.String(), Key: fmt.Sprintf("%s/%s/%s", c.Policy, c.Mode, c.Variant),
			Expected: c.Expected, Measured: c.Measured, End: c.EndCapture, Detail: c.Detail}
	}
	groups := matrix.GroupRuns(runs)
	byKey := map[string][]capturescen.Case{}
	for i, c := range cases {
		byKey[runs[i].Key] = append(byKey[runs[i].Key], c)
	}
	for _, g := range groups {
		cs := byKey[g.Runs[0].Key]
		first := cs[0]
		out := "-"
		okN, endedN := 0, 0
		for _, c := range cs {
			if c.EndCapture == hip.Success && c.Measured != scenario.Interrupted {
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
		cells := []string{string(first.Policy), first.Mode.String(), string(first.Variant), string(first.Expected), g.Measured(),
			g.EndCodes(d), out, g.Detail()}
		if g.Agrees() {
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
	r.Count("runs", int64(matrix.FinishedRuns(runs)))
	r.Count("runs whose find was repeated until naive overran and still ran", int64(retried))
	r.Count("abandoned", sum.Abandoned)
	r.Count("reclaimed by callback", sum.ReclaimedByCallback)
	r.Count("reclaimed by backstop", sum.ReclaimedByBackstop)
	r.Count("of which by the launch path", sum.ReclaimedByLaunch)
	matrix.Finish(r, groups, stop, end)
}
