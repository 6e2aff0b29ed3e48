package rules

import (
	"fmt"
	"strings"
	"time"

	"miotool/internal/hip"
	"miotool/internal/report"
)

// Legend explains the table's names; it is the first note of a result.
const Legend = "A: the capturing stream; B: a non-blocking stream busy with a spin kernel; " +
	"evA: an event recorded inside the capture; evB: an event recorded on B after the spin, outside any capture; " +
	"p: a 1 MiB buffer allocated before the capture; x{}: the acting thread switched itself to mode x around the call"

// maxListed caps how many cells a summary line names.
const maxListed = 3

// Fill adds a probe run to r: the table of cells, notes, counters and the
// verdict. probeErr is Probe's error. exp may be nil (nothing to compare).
// The verdict is ERROR when the probe stopped, a set-up call failed or a
// cell could not be timed; FAIL when a cell differs from exp; else PASS.
func Fill(r *report.Result, m *Measurement, probeErr error, exp *Expectation, end time.Time) Comparison {
	d := m.Dialect
	t := r.AddTable(fmt.Sprintf("Capture rules (%s)", d), "action", "capture mode", "acting thread", "action returns", "end-capture returns")
	var cmp Comparison
	differs := map[CellKey]Difference{}
	if exp != nil {
		cmp = Compare(m, exp)
		for _, x := range cmp.Differences {
			differs[x.Key] = x
		}
		t.FlagColumn = "compared with " + exp.Name
	}

	var setupErrs, late, refused, invalidated, retried int
	var cleanup []string
	for _, o := range m.Outcomes {
		k := o.Key
		cells := []string{k.Action.Label(d), k.Capture.String(), k.ThreadLabel(), CodeText(o.Returns, d), CodeText(o.End, d)}
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
				flag = fmt.Sprintf("differs: expected %s / %s", CodeText(x.Want.Returns, d), CodeText(x.Want.End, d))
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

	r.Note("%s", Legend)
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
			r.Note("%d measured cells have no expectation in %s, e.g. %s", len(cmp.Missing), exp.Name, cmp.Missing[0])
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

	r.Count("cells", int64(len(m.Outcomes)))
	r.Count("refused", int64(refused))
	r.Count("capture not ended cleanly", int64(invalidated))
	r.Count("set-up errors", int64(setupErrs))
	r.Count("not timed", int64(late))
	r.Count("retried", int64(retried))
	if exp != nil {
		r.Count("compared", int64(cmp.Compared))
		r.Count("differences", int64(len(cmp.Differences)))
		r.Count("no expectation", int64(len(cmp.Missing)))
	}

	measured := fmt.Sprintf("%d cells measured", len(m.Outcomes))
	switch {
	case probeErr != nil:
		r.Finish(report.Error, fmt.Sprintf("the probe stopped after %d cells: %v", len(m.Outcomes), probeErr), end)
	case setupErrs > 0:
		r.Finish(report.Error, fmt.Sprintf("%s; set-up failed in %d: %s", measured, setupErrs, firstKeys(m, func(o Outcome) bool { return o.SetupErr != nil })), end)
	case late > 0:
		r.Finish(report.Error, fmt.Sprintf("%s; %d could not be timed (B finished too soon; raise --spin): %s", measured, late, firstKeys(m, func(o Outcome) bool { return o.Late })), end)
	case len(cmp.Differences) > 0:
		keys := make([]string, 0, maxListed)
		for _, x := range cmp.Differences[:min(len(cmp.Differences), maxListed)] {
			keys = append(keys, x.Key.String())
		}
		more := ""
		if len(cmp.Differences) > maxListed {
			more = ", ..."
		}
		r.Finish(report.Fail, fmt.Sprintf("%s; %d differ from %s: %s%s", measured, len(cmp.Differences), exp.Name, strings.Join(keys, ", "), more), end)
	case exp != nil:
		r.Finish(report.Pass, fmt.Sprintf("%s; all %d compared match %s", measured, cmp.Compared, exp.Name), end)
	default:
		r.Finish(report.Pass, measured+"; no expectations given (--expect)", end)
	}
	return cmp
}

func firstKeys(m *Measurement, pick func(Outcome) bool) string {
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
