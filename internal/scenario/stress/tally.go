package stress

// Tally counts the outcomes of a set of runs. A run is counted under its
// end (crashed, wrong result, hung, interrupted, error) and under each kind
// of cache record it made; Passed are the runs with none of these.
type Tally struct {
	Runs, Passed, Crashed, Wrong, Hung, Interrupted, Errors int
	// UseAfterFree, Destroyed and Raced count the runs that recorded at
	// least one use-after-free, destroyed published model, or race.
	UseAfterFree, Destroyed, Raced int
	// Crashes counts crashes by name (a signal, or the runtime's words).
	Crashes map[string]int
	// Replaced is how many completed runs had a model replaced while in
	// use (the race happened, and the process survived it).
	Replaced int
	// Completed is how many runs printed a result line.
	Completed int
}

// TallyOf counts runs. A run killed by the interruption counts as
// interrupted and nowhere else, whatever it had recorded before.
func TallyOf(runs []RunOutcome) Tally {
	t := Tally{Runs: len(runs), Crashes: map[string]int{}}
	for _, r := range runs {
		if r.Kind == RunInterrupted {
			t.Interrupted++
			continue
		}
		d := r.Detections
		if d.UseAfterFree.Count > 0 {
			t.UseAfterFree++
		}
		if d.Destroyed.Count > 0 {
			t.Destroyed++
		}
		if d.Races.Count > 0 {
			t.Raced++
		}
		switch r.Kind {
		case RunPassed:
			if !d.Any() {
				t.Passed++
			}
		case RunCrashed:
			t.Crashed++
			t.Crashes[r.Crash]++
		case RunWrong:
			t.Wrong++
		case RunHung:
			t.Hung++
		default:
			t.Errors++
		}
		if r.Run != nil {
			t.Completed++
			if r.Run.CacheStats.Replaced > 0 {
				t.Replaced++
			}
		}
	}
	return t
}

// Failed reports whether a run shows the defect: it crashed, hung, gave a
// wrong sum, or its caches recorded anything. An interrupted run shows
// nothing: it was stopped, not finished.
func (o RunOutcome) Failed() bool {
	if o.Kind == RunInterrupted {
		return false
	}
	return o.Kind == RunCrashed || o.Kind == RunHung || o.Kind == RunWrong || o.Detections.Any()
}
