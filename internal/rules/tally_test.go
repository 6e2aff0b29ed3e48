package rules_test

import (
	"errors"
	"testing"

	"miotool/internal/hip"
	"miotool/internal/rules"
)

// Summarize gives each cell its status and counts what a result reports:
// the refusals and invalidations of valid cells only, the cells that are
// no measurement, the retries and the comparison.
func TestSummarizeCountsAndComparesEachCell(t *testing.T) {
	keys := rules.CellsFor(rules.Malloc)[:6]
	m := &rules.Measurement{Dialect: hip.DialectCUDA, Planned: 8, Outcomes: []rules.Outcome{
		{Key: keys[0], Returns: hip.Success, End: hip.Success, Attempts: 1},
		{Key: keys[1], Returns: hip.ErrStreamCaptureUnsupported, End: hip.ErrStreamCaptureInvalidated, Attempts: 1},
		{Key: keys[2], Returns: hip.ErrNotReady, End: hip.Success, Attempts: 2},
		{Key: keys[3], Returns: hip.ErrStreamCaptureUnsupported, End: hip.Success, Attempts: 1},
		{Key: keys[4], SetupErr: errors.New("creating stream B"), Returns: hip.ErrStreamCaptureUnsupported, Attempts: 1},
		{Key: keys[5], Late: true, Returns: hip.ErrStreamCaptureUnsupported, Attempts: 3},
	}}
	exp := &rules.Expectation{Name: "e.yaml", Dialect: hip.DialectCUDA, Cells: map[rules.CellKey]rules.Expected{
		keys[0]: {Returns: hip.Success, End: hip.Success},
		keys[1]: {Returns: hip.Success, End: hip.Success}, // differs
		keys[2]: {Returns: hip.ErrNotReady, End: hip.Success},
		// keys[3] has none
		keys[4]: {Returns: hip.Success, End: hip.Success}, // not a measurement: not compared
	}}
	for _, tt := range []struct {
		name                                    string
		exp                                     *rules.Expectation
		status                                  []rules.CellStatus
		compared, matched, differences, missing int
	}{
		{"with an expectation", exp,
			[]rules.CellStatus{rules.CellMatched, rules.CellDiffers, rules.CellMatched, rules.CellNoExpectation, rules.CellSetupFailed, rules.CellNotTimed},
			3, 2, 1, 1},
		{"without one", nil,
			[]rules.CellStatus{rules.CellNotCompared, rules.CellNotCompared, rules.CellNotCompared, rules.CellNotCompared, rules.CellSetupFailed, rules.CellNotTimed},
			0, 0, 0, 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			tl := rules.Summarize(m, tt.exp)
			if len(tl.Cells) != len(tt.status) {
				t.Fatalf("%d cells, want %d", len(tl.Cells), len(tt.status))
			}
			for i, c := range tl.Cells {
				if c.Key != keys[i] || c.Status != tt.status[i] {
					t.Errorf("cell %d: %s status %d, want %s status %d", i, c.Key, c.Status, keys[i], tt.status[i])
				}
			}
			if tl.Measured != 6 || tl.Planned != 8 || tl.Refused != 2 || tl.Invalidated != 1 || tl.SetupFailed != 1 || tl.NotTimed != 1 || tl.Retried != 2 {
				t.Errorf("counts %+v", tl)
			}
			if tl.Compared != tt.compared || tl.Matched() != tt.matched || len(tl.Differences) != tt.differences || len(tl.Missing) != tt.missing {
				t.Errorf("compared %d matched %d differences %d missing %d; want %d %d %d %d",
					tl.Compared, tl.Matched(), len(tl.Differences), len(tl.Missing), tt.compared, tt.matched, tt.differences, tt.missing)
			}
			if tt.exp != nil && tl.Cells[1].Want != exp.Cells[keys[1]] {
				t.Errorf("differing cell's expectation %+v", tl.Cells[1].Want)
			}
		})
	}
	// A run stopped early plans at least what it measured.
	if tl := rules.Summarize(&rules.Measurement{Outcomes: m.Outcomes}, nil); tl.Planned != 6 {
		t.Errorf("planned %d, want 6", tl.Planned)
	}
}
