package rules_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"miotool/internal/hip"
	"miotool/internal/hip/sim"
	"miotool/internal/rules"
	"miotool/internal/testutil"
)

// moduleRoot is the directory holding go.mod.
func moduleRoot(t testing.TB) string {
	t.Helper()
	return testutil.ModuleRoot(t)
}

// The probe run against the simulator measures, in each dialect, exactly
// the committed expectation file: the simulator's rule tables and the
// transcription of the measured and documented rules agree cell for cell,
// for every cell the file holds.
func TestProbeOnSimulatorMatchesCommittedExpectations(t *testing.T) {
	root := moduleRoot(t)
	for _, tc := range []struct {
		dialect hip.Dialect
		file    string
		whole   bool // covers every cell of the matrix
	}{
		// Only what the H200 measured: not yet the host-memory,
		// module-unload and legacy-stream actions.
		{hip.DialectCUDA, "configs/rules/h200-cuda.yaml", false},
		{hip.DialectHIP, "configs/rules/hip.yaml", true},
	} {
		t.Run(string(tc.dialect), func(t *testing.T) {
			exp, err := rules.ReadExpectation(filepath.Join(root, tc.file))
			if err != nil {
				t.Fatal(err)
			}
			if exp.Dialect != tc.dialect {
				t.Fatalf("%s is for dialect %s", tc.file, exp.Dialect)
			}
			// A file may cover fewer actions than the matrix (the H200
			// has not measured the newest), but each action it covers
			// whole: a lost cell is a mistake, not a choice.
			perAction := map[rules.Action]int{}
			for k := range exp.Cells {
				perAction[k.Action]++
			}
			for a, n := range perAction {
				if want := len(rules.CellsFor(a)); n != want {
					t.Errorf("%s has %d of the %d cells of %s", tc.file, n, want, a)
				}
			}
			if tc.whole && len(exp.Cells) != len(rules.Matrix()) {
				t.Errorf("%s has %d cells, the matrix %d", tc.file, len(exp.Cells), len(rules.Matrix()))
			}
			d, err := sim.New(hip.OpenOptions{Dialect: tc.dialect})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = d.Close() })
			ctx, cancel := context.WithTimeout(context.Background(), 50*time.Second)
			defer cancel()
			m, err := rules.Probe(ctx, d, rules.Options{Spin: 10 * time.Millisecond})
			if err != nil {
				t.Fatal(err)
			}
			for _, o := range m.Outcomes {
				if !o.Valid() {
					t.Errorf("cell %s not measured: setup %v, late %v", o.Key, o.SetupErr, o.Late)
				}
				for _, c := range o.Cleanup {
					t.Errorf("cell %s clean-up: %s", o.Key, c)
				}
			}
			cmp := rules.Compare(m, exp)
			for _, x := range cmp.Differences {
				t.Errorf("differs: %s", x.Describe(tc.dialect))
			}
			if cmp.Compared != len(exp.Cells) || cmp.Compared+len(cmp.Missing) != len(rules.Matrix()) {
				t.Errorf("compared %d cells of the file's %d, %d without expectation", cmp.Compared, len(exp.Cells), len(cmp.Missing))
			}
		})
	}
}

// The simulator's rule tables and the matrix name the same actions: a new
// action needs both its rows and its probe.
func TestSimulatorActionsAreTheMatrixActions(t *testing.T) {
	if len(sim.Actions) != len(rules.Actions) {
		t.Fatalf("the simulator has %d actions, the matrix %d", len(sim.Actions), len(rules.Actions))
	}
	for i, a := range rules.Actions {
		if got := sim.Actions[i].String(); got != string(a) {
			t.Errorf("action %d: the simulator's is %s, the matrix's %s", i, got, a)
		}
	}
}

// The simulator says how it knows each CUDA row, and the committed file
// decides: a row of a cell the H200 measured is not marked inferred, and
// a row of a cell it has not measured (the file lacks it) is not marked
// measured. Folding a measurement into the file and changing the action's
// line of the simulator's table go together.
func TestSimulatorProvenanceFollowsTheH200File(t *testing.T) {
	exp, err := rules.ReadExpectation(filepath.Join(moduleRoot(t), "configs/rules/h200-cuda.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	tab := sim.Rules(hip.DialectCUDA)
	for _, k := range rules.Matrix() {
		a, err := sim.ParseAction(string(k.Action))
		if err != nil {
			t.Fatal(err)
		}
		r, ok := tab.Lookup(sim.Key{Action: a, ThreadMode: k.Mode, CaptureMode: k.Capture, SameThread: !k.Other})
		if !ok {
			t.Fatalf("the simulator has no CUDA row for %s", k)
		}
		want, measured := exp.Cells[k]
		switch {
		case measured && want.Basis == rules.BasisMeasured && r.Provenance == sim.ProvenanceInferred:
			t.Errorf("%s: measured on the H200 (line %d), but the simulator's row says %s", k, want.Line, r.Provenance)
		case !measured && r.Provenance == sim.ProvenanceMeasured:
			t.Errorf("%s: the simulator's row says measured, but %s has no such cell", k, exp.Name)
		}
	}
}
