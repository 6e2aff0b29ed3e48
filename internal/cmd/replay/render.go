package replay

import (
	"fmt"
	"sort"
	"time"

	"miotool/internal/cmd/matrix"
	"miotool/internal/hip"
	"miotool/internal/report"
	"miotool/internal/scenario"
	capturescen "miotool/internal/scenario/capture"
	"miotool/internal/streams"
)

// fillCases writes the replay cases into r, with capture's matrix verdict.
func fillCases(r *report.Result, cases []capturescen.ReplayCase, d hip.Dialect, stop *matrix.Interruption, end time.Time) {
	t := r.AddTable("replay-only workload: is the abandoned evaluation's scratch released?", "reclaim", "expected", "measured", "end capture", "pinned after find", "pinned at deadline", "released after (median)", "replays", "detail")
	t.FlagColumn = "differs from expected"
	runs := make([]matrix.Run, len(cases))
	for i, c := range cases {
		runs[i] = matrix.Run{Policy: c.Policy, Key: string(c.Policy), Expected: c.Expected, Measured: c.Measured, End: c.EndCapture, Detail: c.Detail}
	}
	groups := matrix.GroupRuns(runs)
	byPolicy := map[streams.Policy][]capturescen.ReplayCase{}
	for _, c := range cases {
		byPolicy[c.Policy] = append(byPolicy[c.Policy], c)
	}
	for _, g := range groups {
		cs := byPolicy[g.Runs[0].Policy]
		first := cs[0]
		var released []time.Duration
		okN, ranN := 0, 0
		for _, c := range cs {
			if c.ReleasedAfter > 0 {
				released = append(released, c.ReleasedAfter)
			}
			if c.EndCapture == hip.Success && c.Measured != scenario.Interrupted {
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
		reps := "-"
		for _, c := range cs {
			if c.Measured != scenario.Interrupted {
				reps = fmt.Sprintf("%d per run", c.Replays)
				break
			}
		}
		if ranN > 0 {
			if okN == ranN {
				reps += ", output correct"
			} else {
				reps += fmt.Sprintf(", output WRONG in %d of %d", ranN-okN, ranN)
			}
		}
		cells := []string{string(first.Policy), string(first.Expected), g.Measured(), g.EndCodes(d),
			fmt.Sprint(first.PinnedAfterFind), fmt.Sprint(cs[len(cs)-1].PinnedAtEnd), rel, reps, g.Detail()}
		if g.Agrees() {
			t.AddRow(cells...)
		} else {
			t.AddFlaggedRow("!", cells...)
		}
	}
	r.Count("runs", int64(matrix.FinishedRuns(runs)))
	matrix.Finish(r, groups, stop, end)
}
