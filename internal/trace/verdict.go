package trace

import (
	"fmt"
	"strings"
	"syscall"
	"time"

	"miotool/internal/childproc"
	"miotool/internal/words"
)

// Exit is how the traced program ended.
type Exit struct {
	// Code is its exit status; -1 when a signal ended it or it was never
	// reaped.
	Code int
	// Signal ended it (0: none).
	Signal syscall.Signal
	// TimedOut: the watchdog killed it.
	TimedOut bool
	Timeout  time.Duration
	// Interrupted: miotool was interrupted and stopped it, forwarding
	// Forwarded to its process group first.
	Interrupted bool
	Forwarded   syscall.Signal
	Wall        time.Duration
	// Stdout is where the program left miotool's standard output.
	Stdout StdoutEnd
}

// OK says whether the program exited by itself with status 0.
func (e Exit) OK() bool { return !e.TimedOut && !e.Interrupted && e.Signal == 0 && e.Code == 0 }

// Crashed says whether a signal it did not ask for ended it.
func (e Exit) Crashed() bool { return !e.TimedOut && !e.Interrupted && e.Signal != 0 }

// Describe says how it ended, to follow "the program": "exited with
// status 3", "was killed by signal SIGSEGV (segmentation fault)", "hung:
// the watchdog killed it after 10s", "was stopped by miotool (SIGINT)".
func (e Exit) Describe() string {
	switch {
	case e.TimedOut:
		return fmt.Sprintf("hung: the watchdog killed it after %v", e.Timeout)
	case e.Interrupted:
		s := "was stopped by miotool"
		if e.Forwarded != 0 {
			s += " (" + childproc.SignalName(e.Forwarded) + ")"
		}
		return s
	case e.Signal != 0:
		return fmt.Sprintf("was killed by signal %s (%v)", childproc.SignalName(e.Signal), e.Signal)
	}
	return fmt.Sprintf("exited with status %d", e.Code)
}

// Result is what a trace saw: how the program ended, the processes that
// loaded the observer, and every capture they made.
type Result struct {
	Program  string   // as given
	Path     string   // the executable that ran
	Args     []string // after the program
	Observer string   // the observer library used
	Exit     Exit
	// Processes that loaded the observer, in the order they did, and how
	// many more past Limits.Processes.
	Processes        []*Process
	ProcessesOmitted int
	Notes            []Note
	// Devices the captures began on, as each process's runtime named
	// them, in the order first seen.
	Devices  []Device
	Captures []*Capture
	// CapturesOmitted counts clean captures past Limits.Captures, only
	// counted.
	CapturesOmitted int
	Hazards         []Hazard
	// Events read, records that did not parse, and calls that fell in no
	// known capture.
	Events, Malformed, Stray int
	// Start is the monotonic time of the first event, that times are
	// shown relative to.
	Start int64
}

// CUPTIErrors are the observer's reports that it could not subscribe to
// CUDA's callbacks in some process.
func (r *Result) CUPTIErrors() []Note {
	var out []Note
	for _, n := range r.Notes {
		if n.Topic == "cupti" && n.Status != "ok" {
			out = append(out, n)
		}
	}
	return out
}

// CUPTIMissing is the first process's report that no libcupti could be
// loaded into it, so that its CUDA calls went unseen.
func (r *Result) CUPTIMissing() (Note, bool) {
	for _, n := range r.Notes {
		if n.Topic == "cupti" && n.Status == "missing" {
			return n, true
		}
	}
	return Note{}, false
}

// CUPTIInstall says where CUPTI comes from, for a program whose CUDA calls
// went unseen without it.
const CUPTIInstall = "install CUDA's CUPTI (apt-get install cuda-cupti-13-0 from NVIDIA's CUDA repository, " +
	"cuda-cupti-12-x for CUDA 12, or pip install nvidia-cuda-cupti) or put the folder that holds libcupti.so on LD_LIBRARY_PATH"

// CUDAObserved says whether some process subscribed to CUDA's callbacks.
func (r *Result) CUDAObserved() bool {
	for _, n := range r.Notes {
		if n.Topic == "cupti" && n.Status == "ok" {
			return true
		}
	}
	return false
}

// Ran counts the captures that began.
func (r *Result) Ran() int {
	n := r.CapturesOmitted
	for _, c := range r.Captures {
		if c.Ran() {
			n++
		}
	}
	return n
}

// Failing lists the captures that did not end well or had a call refused.
func (r *Result) Failing() []*Capture {
	var out []*Capture
	for _, c := range r.Captures {
		if !c.EndedWell() || len(c.Refused) > 0 || c.RefusedOmitted > 0 {
			out = append(out, c)
		}
	}
	return out
}

// FirstCulprit is the earliest refused call that preceded the end of a
// capture that did not end well (invalidated, failed, never ended), and
// the capture; a 901 only reports an earlier refusal and is no culprit.
// When no such capture had one, the earliest refused call of any capture;
// nil when there is none.
func (r *Result) FirstCulprit() (*Call, *Capture) {
	var best *Call
	var at *Capture
	pick := func(badOnly bool) {
		for _, cp := range r.Captures {
			if badOnly && cp.EndedWell() {
				continue
			}
			for _, call := range cp.Refused {
				if call.Consequence() || (badOnly && cp.End != nil && call.Time > cp.End.Time) {
					continue
				}
				if best == nil || call.Time < best.Time {
					best, at = call, cp
				}
			}
		}
	}
	pick(true)
	if best == nil {
		pick(false)
	}
	return best, at
}

// Verdict is a trace's outcome in one word.
type Verdict string

// Verdicts.
const (
	Pass Verdict = "PASS"
	Fail Verdict = "FAIL"
	// NothingToCheck: no capture began (or the observer never saw one).
	NothingToCheck Verdict = "SKIP"
	// Interrupted: miotool, or SIGINT on the program's terminal, stopped
	// the program.
	Interrupted Verdict = "INTERRUPTED"
)

// Judgement is a trace's verdict and the one line that says why.
type Judgement struct {
	Verdict Verdict
	Summary string
	// HazardsFailed says that the hazards alone failed the trace, as the
	// strict judgement asked.
	HazardsFailed bool
	// Culprit is the first culprit and Capture the capture it broke (or
	// the first failing capture when no call was refused); Hazard the
	// first hazard. Each may be nil.
	Culprit *Call
	Capture *Capture
	Hazard  *Hazard
}

// Headline is the verdict and the summary, e.g. "FAIL - cuCtxSynchronize
// from thread 512 (...) invalidated the global-mode capture begun by
// thread 485 on stream 0x356a1150; end capture 901".
func (j Judgement) Headline() string { return string(j.Verdict) + " - " + j.Summary }

// Judge decides a trace. FAIL when a capture did not end well or a call
// was refused during one, or (strict) a hazard was found, or the program
// did not exit by itself with status 0 after captures that all ended well;
// PASS only when at least one capture ran, every capture ended with
// success, nothing was refused and the program exited 0; SKIP ("nothing
// to check") when no capture began; INTERRUPTED when miotool was
// interrupted or SIGINT ended the program (Ctrl-C on its terminal).
func Judge(r *Result, strict bool) Judgement {
	j := Judgement{}
	if len(r.Hazards) > 0 {
		j.Hazard = &r.Hazards[0]
	}
	failing := r.Failing()
	if len(failing) > 0 {
		j.Culprit, j.Capture = r.FirstCulprit()
		if j.Capture == nil {
			j.Capture = failing[0]
		}
	}
	switch {
	case r.Exit.Interrupted || r.Exit.Signal == syscall.SIGINT:
		// A program that SIGINT ended was interrupted as much as one
		// miotool stopped: on a terminal, Ctrl-C reaches the program's
		// group, which has the foreground, and not miotool.
		j.Verdict = Interrupted
		seen := fmt.Sprintf("%d %s seen", r.Ran(), words.Plural(r.Ran(), "capture", "captures"))
		switch {
		case j.Capture != nil:
			seen += "; " + failureSummary(r, j.Culprit, j.Capture)
		case r.Ran() > 0:
			seen += ", none failed so far"
		}
		j.Summary = "interrupted: the program " + r.Exit.Describe() + "; " + seen
	case j.Capture != nil:
		j.Verdict = Fail
		j.Summary = failureSummary(r, j.Culprit, j.Capture)
	case r.Ran() == 0:
		j.Verdict = NothingToCheck
		j.Summary = "no capture began: nothing to check" + nothingReasons(r)
	case strict && j.Hazard != nil:
		j.Verdict = Fail
		j.HazardsFailed = true
		j.Summary = hazardSummary(r, *j.Hazard)
	case !r.Exit.OK():
		j.Verdict = Fail
		j.Summary = fmt.Sprintf("every capture ended well (%d), but the program %s", r.Ran(), r.Exit.Describe())
	default:
		j.Verdict = Pass
		j.Summary = fmt.Sprintf("%d %s ended with success, nothing refused", r.Ran(), words.Plural(r.Ran(), "capture", "captures"))
		if j.Hazard != nil {
			j.Summary += fmt.Sprintf("; %d latent %s, the first: %s", len(r.Hazards),
				words.Plural(len(r.Hazards), "hazard", "hazards"), hazardSummary(r, *j.Hazard))
		}
	}
	return j
}

// CaptureName is how a line names a capture: "the global-mode capture
// begun by thread 485 on stream 0x356a1150" (with the process where the
// trace saw several).
func CaptureName(r *Result, c *Capture) string {
	s := fmt.Sprintf("the %s-mode capture begun by thread %d", c.Mode, c.TID)
	if len(r.Processes)+r.ProcessesOmitted > 1 {
		s += fmt.Sprintf(" of process %d", c.PID)
	}
	return s + fmt.Sprintf(" on stream %#x", c.Stream)
}

// CallName is how a line names a call: "cuCtxSynchronize from thread 512
// (cudaDeviceSynchronize ← c10::cuda::device_synchronize)", the callers
// innermost first, ← read as "called from".
func CallName(c *Call) string {
	s := fmt.Sprintf("%s from thread %d", BaseName(c.Name), c.TID)
	if callers := CallerSummary(c.Callers, 2); callers != "" {
		s += " (" + callers + ")"
	}
	return s
}

// CallerSummary names the first n callers that have a name, innermost
// first, joined by " ← "; "" when none has one.
func CallerSummary(frames []Frame, n int) string {
	var names []string
	for _, f := range frames {
		if f.Symbol == "" {
			continue
		}
		if len(names) > 0 && names[len(names)-1] == f.Symbol {
			continue
		}
		names = append(names, f.Symbol)
		if len(names) == n {
			break
		}
	}
	return strings.Join(names, " ← ")
}

func failureSummary(r *Result, culprit *Call, c *Capture) string {
	name := CaptureName(r, c)
	switch {
	case !c.Ran():
		return fmt.Sprintf("%s on stream %#x from thread %d returned %d %s: the capture never began",
			BaseName(c.BeginName), c.Stream, c.TID, int(c.BeginResult), c.BeginResult.Short(c.API))
	case culprit != nil && c.Invalidated():
		return fmt.Sprintf("%s invalidated %s; end capture %d", CallName(culprit), name, int(c.End.Result))
	case culprit != nil && c.End == nil:
		return fmt.Sprintf("%s was refused (%d) during %s, which never ended: the program %s",
			CallName(culprit), int(culprit.Result), name, r.Exit.Describe())
	case culprit != nil && c.End.StreamGone:
		return fmt.Sprintf("%s was refused (%d) during %s, whose stream was destroyed before the capture ended",
			CallName(culprit), int(culprit.Result), name)
	case culprit != nil:
		return fmt.Sprintf("%s was refused (%d) during %s; end capture %d", CallName(culprit), int(culprit.Result),
			name, int(c.End.Result))
	case c.End == nil:
		return fmt.Sprintf("%s never ended: the program %s", name, r.Exit.Describe())
	case c.End.StreamGone:
		return fmt.Sprintf("the stream of %s was destroyed before the capture ended", strings.TrimPrefix(name, "the "))
	case c.Invalidated():
		return fmt.Sprintf("%s was invalidated (end capture 901) by a call the observer did not see", name)
	}
	return fmt.Sprintf("%s ended with %d %s", name, int(c.End.Result), c.End.Result.Short(c.API))
}

func hazardSummary(r *Result, h Hazard) string {
	return fmt.Sprintf("%s succeeded during %s only because %s; a global-mode capture with a global-mode caller refuses it: %s",
		CallName(h.Call), CaptureName(r, h.Capture), h.Because(), h.Rule())
}

// nothingReasons says why nothing could be seen, where the trace knows.
func nothingReasons(r *Result) string {
	var parts []string
	if len(r.Processes)+r.ProcessesOmitted == 0 {
		parts = append(parts, "the observer never loaded into the program (a statically linked program cannot be traced)")
	}
	if n, ok := r.CUPTIMissing(); ok {
		parts = append(parts, fmt.Sprintf("CUDA calls of process %d were not observed: %s; %s", n.PID,
			strings.TrimRight(n.Text, "; "), CUPTIInstall))
	} else {
		for _, n := range r.CUPTIErrors() {
			parts = append(parts, fmt.Sprintf("CUDA calls of process %d were not observed: %s", n.PID, n.Text))
			break
		}
	}
	if !r.Exit.OK() {
		parts = append(parts, "the program "+r.Exit.Describe())
	}
	if len(parts) == 0 {
		return ""
	}
	return "; " + strings.Join(parts, "; ")
}
