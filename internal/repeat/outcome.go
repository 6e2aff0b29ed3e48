package repeat

import (
	"syscall"
	"time"

	"miotool/internal/childproc"
)

// Kind is how a run ended.
type Kind string

// The kinds of run. RunPassed, RunFailed, RunCrashed and RunHung ran to
// an end and count in the statistics; RunInterrupted and RunNotStarted did
// not, and count in none.
const (
	RunPassed  Kind = "passed"  // exit status 0
	RunFailed  Kind = "failed"  // another exit status
	RunCrashed Kind = "crashed" // a signal ended it
	RunHung    Kind = "hung"    // still running at the timeout; killed
	// RunInterrupted: killed when the repeat itself was interrupted.
	RunInterrupted Kind = "interrupted"
	// RunNotStarted: the process could not be started.
	RunNotStarted Kind = "not started"
)

// Finished reports whether a run of this kind ran to an end of its own
// (or to the timeout) and so counts in the statistics.
func (k Kind) Finished() bool {
	return k == RunPassed || k == RunFailed || k == RunCrashed || k == RunHung
}

// Outcome is how one run ended.
type Outcome struct {
	Kind Kind
	// Exit is the exit status of a failed run.
	Exit int
	// Signal ended a crashed run; CoreDumped says whether it left a core.
	Signal     syscall.Signal
	CoreDumped bool
	// PID is the run's process id (0 when it did not start).
	PID  int
	Wall time.Duration
	// Err is why a run did not start.
	Err error
}

// Classify is the outcome of a child that childproc ran: err is its start
// failure. The interruption comes first (a run killed because the repeat
// was stopped shows nothing about the program), then the timeout (the
// watchdog's SIGKILL is not a crash), then the signal, then the status.
func Classify(res childproc.Result, err error) Outcome {
	o := Outcome{PID: res.PID, Wall: res.Wall, Err: err}
	switch {
	case res.Canceled:
		o.Kind = RunInterrupted
	case res.TimedOut:
		o.Kind = RunHung
	case res.State == nil:
		// Not started, or started and lost: nothing says how it ended.
		o.Kind = RunNotStarted
	default:
		if sig, ok := res.Signal(); ok {
			o.Kind, o.Signal = RunCrashed, sig
			if ws, ok := res.State.Sys().(syscall.WaitStatus); ok {
				o.CoreDumped = ws.CoreDump()
			}
		} else if code := res.ExitCode(); code != 0 {
			o.Kind, o.Exit = RunFailed, code
		} else {
			o.Kind = RunPassed
		}
	}
	return o
}
