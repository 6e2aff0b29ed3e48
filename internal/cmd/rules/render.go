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
	"p: a 1 MiB buffer allocated before the capture; x{}: the acting thread switched itself to mode x around the call"

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
//     status "Passed for the C of N cells compared" whenever exp covers
//     fewer than the N measured; a full comparison counts its cells as
//     sub-tests ("Passed (243/243)");
//   - SKIP (exit 4) when nothing was compared, without --expect or with a
//     file that covers none of the measured cells. A measurement is not a
//     check: PASS would tell a CI that the rules were verified, FAIL that
//     they were wrong, and neither happened. SKIP is what a CI shows as
//     neither (JUnit <skipped>), and exit 4 stops "rules && ..." from
//     reading it as verified; the cells are all there, and --write-expect
//     still writes them.
func fill(r *report.Result, m *rules.Measurement, probeErr error, interrupted string, exp *rules.Expectation, end time.Time) rules.Comparison {
	d := m.Dialect
	var cmp rules.Comparison
	differs := map[rules.CellKey]rules.Difference{}
	if exp != nil {
		cmp = rules.Compare(m, exp)
		for _, x := range cmp.Differences {
			differs[x.Key] = x
		}
	}
	measured := len(m.Outcomes)
	title := fmt.Sprintf("Capture rules (%s)", d)
	if exp != nil {
		title += fmt.Sprintf(": compared %d of %d cells measured with %s", cmp.Compared, measured, exp.Name)
	} else {
		title += fmt.Sprintf(": %d cells measured, none compared", measured)
	}
	t := r.AddTable(title, "action", "capture mode", "acting thread", "action returns", "end-capture returns")
	if exp != nil {
		t.FlagColumn = "compared with " + exp.Name
	}
	missing := map[rules.CellKey]bool{}
	for _, k := range cmp.Missing {
		missing[k] = true
	}

	var setupErrs, late, refused, invalidated, retried int
	var cleanup []string
	for _, o := range m.Outcomes {
		k := o.Key
		cells := []string{k.Action.Label(d), k.Capture.String(), k.ThreadLabel(), rules.CodeText(o.Returns, d), rules.CodeText(o.End, d)}
		flag := ""
		switch {
		case o.SetupErr != nil:
			setupErrs++
			cells[3], cells[4] = "set-up failed", "-"
			flag = "set-up failed: " + o.SetupErr.Error()
		case o.Late:
			late++
			flag = fmt.Sprintf("not timed: B may have finished before the action (spin %v)", o.Spin)
		default:
			if o.Returns != hip.Success && o.Returns != hip.ErrNotReady {
				refused++
			}
			if o.End != hip.Success {
				invalidated++
			}
			if x, ok := differs[k]; ok {
				flag = fmt.Sprintf("differs: expected %s / %s", rules.CodeText(x.Want.Returns, d), rules.CodeText(x.Want.End, d))
			} else if missing[k] {
				flag = "not compared: no expectation"
			}
		}
		if o.Attempts > 1 {
			retried++
		}
		for _, c := range o.Cleanup {
			cleanup = append(cleanup, k.String()+": "+c)
		}
		t.AddFlaggedRow(flag, cells...)
	}

	r.Note("%s", legend)
	r.Note("spin kernel on B: %v per cell (doubled for a cell whose action might have come too late)", m.Spin)
	if exp != nil {
		r.Note("expectations: %s (dialect %s; %s; %s)", exp.Name, exp.Dialect, orDash(exp.Device), orDash(exp.Source))
		if exp.Dialect != d {
			r.Note("the expectation file is for dialect %s but the device speaks %s", exp.Dialect, d)
		}
		for _, x := range cmp.Differences {
			r.Note("differs: %s", x.Describe(d))
		}
		if len(cmp.Missing) > 0 {
			r.Note("%d measured cells have no expectation in %s and were not compared, e.g. %s", len(cmp.Missing), exp.Name, cmp.Missing[0])
		}
	}
	for i, o := range m.Outcomes {
		if o.SetupErr != nil && i < maxListed {
			r.Note("set-up failed: %s: %v", o.Key, o.SetupErr)
		}
	}
	if len(cleanup) > 0 {
		shown := cleanup[:min(len(cleanup), maxListed)]
		r.Note("%d clean-up calls failed, e.g. %s", len(cleanup), strings.Join(shown, "; "))
	}

	r.Count("cells", int64(measured))
	r.Count("refused", int64(refused))
	r.Count("capture not ended cleanly", int64(invalidated))
	r.Count("set-up errors", int64(setupErrs))
	r.Count("not timed", int64(late))
	r.Count("retried", int64(retried))
	r.Count("compared", int64(cmp.Compared))
	if exp != nil {
		r.Count("differences", int64(len(cmp.Differences)))
		r.Count("no expectation", int64(len(cmp.Missing)))
	}

	// compared says what the comparison covered, for every headline.
	compared := fmt.Sprintf("%d cells measured, none compared", measured)
	if exp != nil {
		compared = fmt.Sprintf("%d cells measured; compared %d of %d with %s", measured, cmp.Compared, measured, exp.Name)
	}
	planned := m.Planned
	if planned < measured {
		planned = measured
	}
	switch {
	case interrupted != "":
		what := fmt.Sprintf("%s after %d of %d cells; none compared", interrupted, measured, planned)
		if exp != nil {
			what = fmt.Sprintf("%s after %d of %d cells; compared %d of the %d with %s", interrupted, measured, planned, cmp.Compared, measured, exp.Name)
		}
		if len(cmp.Differences) > 0 {
			what += fmt.Sprintf(", %d differ so far", len(cmp.Differences))
		} else if cmp.Compared > 0 {
			what += ", all match so far"
		}
		r.Status = fmt.Sprintf("Interrupted after %d of %d cells", measured, planned)
		r.Finish(report.Interrupted, what, end)
	case probeErr != nil:
		r.Finish(report.Error, fmt.Sprintf("the probe stopped after %d cells: %v", measured, probeErr), end)
	case setupErrs > 0:
		r.Finish(report.Error, fmt.Sprintf("%d cells measured; set-up failed in %d: %s", measured, setupErrs, firstKeys(m, func(o rules.Outcome) bool { return o.SetupErr != nil })), end)
	case late > 0:
		r.Finish(report.Error, fmt.Sprintf("%d cells measured; %d could not be timed (B finished too soon; raise --spin): %s", measured, late, firstKeys(m, func(o rules.Outcome) bool { return o.Late })), end)
	case len(cmp.Differences) > 0:
		keys := make([]string, 0, maxListed)
		for _, x := range cmp.Differences[:min(len(cmp.Differences), maxListed)] {
			keys = append(keys, x.Key.String())
		}
		more := ""
		if len(cmp.Differences) > maxListed {
			more = ", ..."
		}
		r.Cases = report.Cases{Passed: cmp.Compared - len(cmp.Differences), Total: cmp.Compared}
		r.Finish(report.Fail, fmt.Sprintf("%s; %d differ: %s%s", compared, len(cmp.Differences), strings.Join(keys, ", "), more), end)
	case cmp.Compared == 0:
		why := "no expectations given (--expect)"
		if exp != nil {
			why = exp.Name + " has no expectation for any of them"
		}
		r.Status = fmt.Sprintf("Skipped: %d cells measured, none compared", measured)
		r.Finish(report.Skip, fmt.Sprintf("%d cells measured, compared none: %s", measured, why), end)
	case cmp.Compared < measured:
		r.Status = fmt.Sprintf("Passed for the %d of %d cells compared", cmp.Compared, measured)
		r.Finish(report.Pass, fmt.Sprintf("%s; all %d match; the other %d have no expectation there and were not compared", compared, cmp.Compared, measured-cmp.Compared), end)
	default:
		r.Cases = report.Cases{Passed: cmp.Compared, Total: cmp.Compared}
		r.Finish(report.Pass, fmt.Sprintf("%s; all match", compared), end)
	}
	return cmp
}

func firstKeys(m *rules.Measurement, pick func(rules.Outcome) bool) string {
	var keys []string
	n := 0
	for _, o := range m.Outcomes {
		if pick(o) {
			n++
			if len(keys) < maxListed {
				keys = append(keys, o.Key.String())
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
