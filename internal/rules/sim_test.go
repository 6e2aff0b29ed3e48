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
// transcription of the measured and documented rules agree cell for cell.
func TestProbeOnSimulatorMatchesCommittedExpectations(t *testing.T) {
	root := moduleRoot(t)
	for _, tc := range []struct {
		dialect hip.Dialect
		file    string
	}{
		{hip.DialectCUDA, "configs/rules/h200-cuda.yaml"},
		{hip.DialectHIP, "configs/rules/hip.yaml"},
	} {
		t.Run(string(tc.dialect), func(t *testing.T) {
			exp, err := rules.ReadExpectation(filepath.Join(root, tc.file))
			if err != nil {
				t.Fatal(err)
			}
			if exp.Dialect != tc.dialect {
				t.Fatalf("%s is for dialect %s", tc.file, exp.Dialect)
			}
			if len(exp.Cells) != len(rules.Matrix()) {
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
			if len(cmp.Missing) > 0 || cmp.Compared != len(rules.Matrix()) {
				t.Errorf("compared %d cells, %d without expectation", cmp.Compared, len(cmp.Missing))
			}
		})
	}
}
