package stress

import (
	"context"
	"testing"
	"time"
)

// A run that says to stop (one that could not open the device: the next
// would not either) starts no more runs; the runs already going finish and
// are kept, in order.
func TestRunStressRunsStopStartsNoMore(t *testing.T) {
	for _, tt := range []struct {
		name       string
		runs, jobs int
		stopAfter  int // Stop says yes from this finished run on
		want       int // runs kept
	}{
		{"one at a time, stop at the first", 5, 1, 1, 1},
		{"one at a time, stop at the third", 5, 1, 3, 3},
		{"never", 4, 2, 0, 4},
	} {
		t.Run(tt.name, func(t *testing.T) {
			finished := 0
			runs, err := RunProcesses(context.Background(), fakeChild(t, "pass"), RunnerOptions{Runs: tt.runs, Jobs: tt.jobs, Timeout: time.Minute,
				Stop: func(RunOutcome) bool { finished++; return tt.stopAfter > 0 && finished >= tt.stopAfter }})
			if err != nil {
				t.Fatal(err)
			}
			if len(runs) != tt.want {
				t.Fatalf("%d runs kept, want %d: %+v", len(runs), tt.want, runs)
			}
			for i, r := range runs {
				if r.Index != i || r.Kind != RunPassed {
					t.Errorf("run %d: %+v", i, r)
				}
			}
		})
	}
}
