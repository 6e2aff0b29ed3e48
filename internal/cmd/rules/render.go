package rules

import (
	"fmt"
	"strings"
	"time"

	"miotool/internal/hip"
	"miotool/internal/report"
	"miotool/internal/rules"
)

// legend explains the table's names; it is the first note of a result.
const legend = "A: the capturing stream; B: a non-blocking stream busy with a spin kernel; " +
	"evA: an event recorded inside the capture; evB: an event recorded on B after the spin, outside any capture; " +
	"p: a 1 MiB buffer allocated before the capture; h: 1 MiB of pinned host memory allocated before it; " +
	"m: 1 MiB of host pages (registered before it, to be unregistered); mod: a module loaded before it; " +
	"legacy: the legacy default stream (A blocking: A was created without the non-blocking flag); " +
	"x{}: the acting thread switched itself to mode x around the call"

// maxListed caps how many cells a summary line names.
const maxListed = 3

// fill adds a probe run to r: the table of cells, notes, counters and the
// verdict. probeErr is rules.Probe's error; interrupted, when set, is the
// interruption that stopped it ("interrupted by SIGINT"). exp may be nil
// (nothing to compare). The verdict:
//   - INTERRUPTED when a signal stopped the probe: the cells measured so
//     far are shown, and what they compared;
//   - ERROR when the probe stopped, a set-up call failed or a cell could
//     not be timed;
//   - FAIL when a compared cell differs from exp;
//   - PASS when every compared cell matches, for the cells compared only:
//     the headline and the table's title say "compared C of N", and the
//     status counts the cells compared ("Passed (200/200 cells
//     compared): 43 of 243 cells measured have no expectation") whenever
//     exp covers fewer than the N measured; a full comparison counts its
//     cells as sub-tests ("Passed (243/243)");
//   - SKIP (exit 4) when nothing was compared, without --expect or with a
//     file that covers none of the measured cells. A measurement is not a
//     check: PASS would tell a CI that the rules were verified, FAIL that
//     they were wrong, and neither happened. SKIP is what a CI shows as
//     neither (JUnit <skipped>), and exit 4 stops "rules && ..." from
//     reading it as verified; the cells are all there, and --write-expect
//     still writes them.
func fill(r *report.Result, m *rules.Measurement, exp *rules.Expectation, tl rules.Tally, probeErr error, interrupted string, end time.Time) {
	cleanup := cellTable(r, m.Dialect, exp, tl)
	cellNotes(r, m, exp, tl, cleanup)
	cellCounts(r, exp, tl)
	judge(r, exp, tl, probeErr, interrupted, end)
}

// cellTable adds the table of cells, flagged where a cell could not be
// measured or differs, and returns the clean-up calls that failed.
func cellTable(r *report.Result, d hip.Dialect, exp *rules.Expectation, tl rules.Tally) (cleanup []string) {
	title := fmt.Sprintf("Capture rules (%s)", d)
	if exp != nil {
		title += fmt.Sprintf(": compared %d of %d cells measured with %s", tl.Compared, tl.Measured, exp.Name)
	} else {
		title += fmt.Sprintf(": %d cells measured, none compared", tl.Measured)
	}
	t := r.AddTable(title, "action", "capture mode", "acting thread", "action returns", "end capture")
	if exp != nil {
		t.FlagColumn = "compared with " + exp.Name
	}
	for _, c := range tl.Cells {
		k := c.Key
		cells := []report.Cell{report.TextCell(k.Action.Label(d)), report.TextCell(k.Capture.String()), report.TextCell(k.ThreadLabel()),
			codeCell(c.Returns, d), codeCell(c.End, d)}
		flag := ""
		switch c.Status {
		case rules.CellSetupFailed:
			cells[3], cells[4] = report.TextCell("set-up failed"), report.TextCell("-")
			flag = "set-up failed: " + c.SetupErr.Error()
		case rules.CellNotTimed:
			flag = fmt.Sprintf("not timed: B may have finished before the action (spin %v)", c.Spin)
		case rules.CellDiffers:
			flag = fmt.Sprintf("differs: expected %s / %s", codeCell(c.Want.Returns, d).Text, codeCell(c.Want.End, d).Text)
		case rules.CellNoExpectation:
			flag = "not compared: no expectation"
		}
		for _, f := range c.Cleanup {
			cleanup = append(cleanup, k.String()+": "+f)
		}
		t.AddCells(flag, cells...)
	}
	return cleanup
}

// cellNotes says what the table's names mean, what it was compared with,
// and the first of each kind of trouble.
func cellNotes(r *report.Result, m *rules.Measurement, exp *rules.Expectation, tl rules.Tally, cleanup []string) {
	d := m.Dialect
	r.Note("%s", legend)
	r.Note("spin kernel on B: %v per cell (doubled for a cell whose action might have come too late)", m.Spin)
	if exp != nil {
		r.Note("expectations: %s (dialect %s; %s; %s)", exp.Name, exp.Dialect, orDash(exp.Device), orDash(exp.Source))
		if exp.Dialect != d {
			r.Note("the expectation file is for dialect %s but the device speaks %s", exp.Dialect, d)
		}
		for _, x := range tl.Differences {
			r.Note("differs: %s", x.Describe(d))
		}
		if len(tl.Missing) > 0 {
			r.Note("%d measured cells have no expectation in %s and were not compared, e.g. %s", len(tl.Missing), exp.Name, tl.Missing[0])
		}
	}
	for i, c := range tl.Cells {
		if c.Status == rules.CellSetupFailed && i < maxListed {
			r.Note("set-up failed: %s: %v", c.Key, c.SetupErr)
		}
	}
	if len(cleanup) > 0 {
		shown := cleanup[:min(len(cleanup), maxListed)]
		r.Note("%d clean-up calls failed, e.g. %s", len(cleanup), strings.Join(shown, "; "))
	}
}

// cellCounts adds the tally as the result's counters.
func cellCounts(r *report.Result, exp *rules.Expectation, tl rules.Tally) {
	r.Count("cells", int64(tl.Measured))
	r.Count("refused", int64(tl.Refused))
	r.Count("capture not ended cleanly", int64(tl.Invalidated))
	r.Count("set-up errors", int64(tl.SetupFailed))
	r.Count("not timed", int64(tl.NotTimed))
	r.Count("retried", int64(tl.Retried))
	r.Count("compared", int64(tl.Compared))
	if exp != nil {
		r.Count("differences", int64(len(tl.Differences)))
		r.Count("no expectation", int64(len(tl.Missing)))
	}
}

// judge decides the verdict (see fill) and finishes r.
func judge(r *report.Result, exp *rules.Expectation, tl rules.Tally, probeErr error, interrupted string, end time.Time) {
	measured := tl.Measured
	// compared says what the comparison covered, for every headline.
	compared := fmt.Sprintf("%d cells measured, none compared", measured)
	if exp != nil {
		compared = fmt.Sprintf("%d cells measured; compared %d of %d with %s", measured, tl.Compared, measured, exp.Name)
	}
	switch {
	case interrupted != "":
		r.Progress = report.Progress{Finished: measured, Planned: tl.Planned, Unit: "cells"}
		r.Finish(report.Interrupted, interruptedSummary(exp, tl, interrupted), end)
	case probeErr != nil:
		r.Finish(report.Error, fmt.Sprintf("the probe stopped after %d cells: %v", measured, probeErr), end)
	case tl.SetupFailed > 0:
		r.Finish(report.Error, fmt.Sprintf("%d cells measured; set-up failed in %d: %s", measured, tl.SetupFailed, firstKeys(tl, rules.CellSetupFailed)), end)
	case tl.NotTimed > 0:
		r.Finish(report.Error, fmt.Sprintf("%d cells measured; %d could not be timed (B finished too soon; raise --spin): %s", measured, tl.NotTimed, firstKeys(tl, rules.CellNotTimed)), end)
	case len(tl.Differences) > 0:
		r.Cases = report.Cases{Passed: tl.Matched(), Total: tl.Compared}
		r.Finish(report.Fail, fmt.Sprintf("%s; %d differ: %s", compared, len(tl.Differences), differingKeys(tl)), end)
	case tl.Compared == 0:
		why := "no expectations given (--expect)"
		if exp != nil {
			why = exp.Name + " has no expectation for any of them"
		}
		r.Finish(report.Skip, fmt.Sprintf("%d cells measured, compared none: %s", measured, why), end)
	case tl.Compared < measured:
		r.Cases = report.Cases{Passed: tl.Compared, Total: tl.Compared, Unit: "cells compared"}
		r.Detail = fmt.Sprintf("%d of %d cells measured have no expectation", measured-tl.Compared, measured)
		r.Finish(report.Pass, fmt.Sprintf("%s; all %d match; the other %d have no expectation there and were not compared", compared, tl.Compared, measured-tl.Compared), end)
	default:
		r.Cases = report.Cases{Passed: tl.Compared, Total: tl.Compared}
		r.Finish(report.Pass, fmt.Sprintf("%s; all match", compared), end)
	}
}

// interruptedSummary says how far an interrupted probe got and what it
// compared so far.
func interruptedSummary(exp *rules.Expectation, tl rules.Tally, interrupted string) string {
	what := fmt.Sprintf("%s after %d of %d cells; none compared", interrupted, tl.Measured, tl.Planned)
	if exp != nil {
		what = fmt.Sprintf("%s after %d of %d cells; compared %d of the %d with %s", interrupted, tl.Measured, tl.Planned, tl.Compared, tl.Measured, exp.Name)
	}
	if len(tl.Differences) > 0 {
		what += fmt.Sprintf(", %d differ so far", len(tl.Differences))
	} else if tl.Compared > 0 {
		what += ", all match so far"
	}
	return what
}

// differingKeys names the first cells that differ, and "..." for more.
func differingKeys(tl rules.Tally) string {
	keys := make([]string, 0, maxListed)
	for _, x := range tl.Differences[:min(len(tl.Differences), maxListed)] {
		keys = append(keys, x.Key.String())
	}
	more := ""
	if len(tl.Differences) > maxListed {
		more = ", ..."
	}
	return strings.Join(keys, ", ") + more
}

// firstKeys names the first cells of the given status, and "..." for more.
func firstKeys(tl rules.Tally, status rules.CellStatus) string {
	var keys []string
	n := 0
	for _, c := range tl.Cells {
		if c.Status == status {
			n++
			if len(keys) < maxListed {
				keys = append(keys, c.Key.String())
			}
		}
	}
	if n > maxListed {
		keys = append(keys, "...")
	}
	return strings.Join(keys, ", ")
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// codeCell is what a call returned, as every table writes a runtime's
// status: its short name and its code, "STREAM_CAPTURE_INVALIDATED (901)";
// the JSON records hold the code.
func codeCell(c hip.Code, d hip.Dialect) report.Cell { return report.CodeCell(c.Short(d), int(c)) }
