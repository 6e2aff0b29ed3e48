package report

import (
	"fmt"
	"math"
	"time"
)

// Every number read from a result file is checked against what miotool
// can have written, so that a corrupt or hand-made file is refused,
// naming the field, rather than turned into a wrong table: 1e308 ms
// would otherwise wrap around to a negative duration, and a run whose
// verdict contradicts its exit status would be counted by its verdict.

// Bounds of what a result file may hold.
const (
	// maxDuration is the longest duration read: a year and a day, far
	// beyond any check or suite, and small enough that the sums of
	// thousands of them still fit a time.Duration.
	maxDuration = 366 * 24 * time.Hour
	// maxCount bounds counts of sub-tests, cells and runs, repetitions,
	// orders, workers and jobs.
	maxCount = 1_000_000_000
)

// readDuration is a duration_ms read from field, refused when it is
// negative, not finite or above maxDuration.
func readDuration(field string, ms float64) (time.Duration, error) {
	limit := float64(maxDuration / time.Millisecond)
	if math.IsNaN(ms) || ms < 0 || ms > limit {
		return 0, fmt.Errorf("%s: %g is out of range (0 to %.0f ms, %s)", field, ms, limit, "366 days")
	}
	return time.Duration(math.Round(ms * float64(time.Millisecond))), nil
}

// checkRange refuses n outside lo..hi, naming field.
func checkRange(field string, n, lo, hi int) error {
	if n < lo || n > hi {
		return fmt.Errorf("%s: %d is out of range (%d to %d)", field, n, lo, hi)
	}
	return nil
}

// checkCases refuses counts that cannot be: negative, more passed than
// there were, or beyond maxCount.
func checkCases(field string, c Cases) error {
	if err := checkRange(field+".total", c.Total, 0, maxCount); err != nil {
		return err
	}
	return checkRange(field+".passed", c.Passed, 0, c.Total)
}

// checkProgress refuses a progress that cannot be: more finished than
// planned, or negative.
func checkProgress(field string, p Progress) error {
	if err := checkRange(field+".planned", p.Planned, 0, maxCount); err != nil {
		return err
	}
	return checkRange(field+".finished", p.Finished, 0, p.Planned)
}

// VerdictOfExit is the verdict a process exiting with code stands for:
// 0 PASS, 1 FAIL, 4 SKIP, 128 and above (a signal) INTERRUPTED, any
// other ERROR (2 a usage error, 3 the tool's failure).
func VerdictOfExit(code int) Verdict {
	switch {
	case code == ExitPass:
		return Pass
	case code == ExitFail:
		return Fail
	case code == ExitSkipped:
		return Skip
	case code >= 128:
		return Interrupted
	}
	return Error
}

// checkResultExit refuses a result whose verdict contradicts the exit
// status it says its process ended with: a result never says PASS with
// another status than 0.
func checkResultExit(field string, v Verdict, code int) error {
	if err := checkRange(field, code, 0, 255); err != nil {
		return err
	}
	if VerdictOfExit(code) != v {
		return fmt.Errorf("%s: %d contradicts the verdict %s (exit status %d)", field, code, v, v.ExitCode())
	}
	return nil
}

// checkRunExit refuses a suite run whose verdict contradicts the exit
// status of its process: a PASS, FAIL or SKIP is what the child said with
// the status that says it (the suite turns any disagreement into an
// ERROR); an ERROR or an interrupted run may have any status, or -1 for
// a process a signal killed.
func checkRunExit(field string, v Verdict, code int) error {
	if err := checkRange(field, code, -1, 255); err != nil {
		return err
	}
	if (v == Pass || v == Fail || v == Skip) && code != v.ExitCode() {
		return fmt.Errorf("%s: %d contradicts the verdict %s (exit status %d)", field, code, v, v.ExitCode())
	}
	return nil
}
