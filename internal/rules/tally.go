package rules

import "miotool/internal/hip"

// CellStatus is what became of one measured cell.
type CellStatus int

const (
	// CellNotCompared is a measurement with no expectation file to compare it with.
	CellNotCompared CellStatus = iota
	// CellMatched is a measurement equal to its expectation.
	CellMatched
	// CellDiffers is a measurement that differs from its expectation.
	CellDiffers
	// CellNoExpectation is a measurement the expectation file has no cell for.
	CellNoExpectation
	// CellSetupFailed is a cell whose set-up failed: nothing was measured.
	CellSetupFailed
	// CellNotTimed is a cell whose action may have come after B's spin.
	CellNotTimed
)

// Cell is one measured cell and what the comparison made of it.
type Cell struct {
	Outcome
	Status CellStatus
	// Want is the expectation a matched or differing cell was held against.
	Want Expected
}

// Tally is a probe run counted and, when an expectation is given, held
// against it.
type Tally struct {
	// Cells are the measured cells in the order they were measured.
	Cells []Cell
	// Measured counts the cells measured; Planned those the run was to
	// measure (never fewer than Measured).
	Measured, Planned int
	// Refused counts the valid cells whose action returned an error (a
	// query's NOT_READY is an answer, not a refusal); Invalidated those
	// whose capture did not end with SUCCESS.
	Refused, Invalidated int
	// SetupFailed and NotTimed count the cells that are not measurements;
	// Retried those measured more than once.
	SetupFailed, NotTimed, Retried int
	// Comparison is the comparison with the expectation given, and zero
	// without one.
	Comparison
}

// Matched counts the compared cells equal to their expectation.
func (t Tally) Matched() int { return t.Compared - len(t.Differences) }

// Summarize counts m's cells and compares them with exp, which may be nil
// (nothing to compare).
func Summarize(m *Measurement, exp *Expectation) Tally {
	t := Tally{Measured: len(m.Outcomes), Planned: max(m.Planned, len(m.Outcomes))}
	differs := map[CellKey]Difference{}
	missing := map[CellKey]bool{}
	if exp != nil {
		t.Comparison = Compare(m, exp)
		for _, x := range t.Differences {
			differs[x.Key] = x
		}
		for _, k := range t.Missing {
			missing[k] = true
		}
	}
	for _, o := range m.Outcomes {
		c := Cell{Outcome: o}
		switch {
		case o.SetupErr != nil:
			t.SetupFailed++
			c.Status = CellSetupFailed
		case o.Late:
			t.NotTimed++
			c.Status = CellNotTimed
		default:
			if o.Returns != hip.Success && o.Returns != hip.ErrNotReady {
				t.Refused++
			}
			if o.End != hip.Success {
				t.Invalidated++
			}
			if x, ok := differs[o.Key]; ok {
				c.Status, c.Want = CellDiffers, x.Want
			} else if missing[o.Key] {
				c.Status = CellNoExpectation
			} else if exp != nil {
				c.Status, c.Want = CellMatched, exp.Cells[o.Key]
			}
		}
		if o.Attempts > 1 {
			t.Retried++
		}
		t.Cells = append(t.Cells, c)
	}
	return t
}
