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
	// Graphs is what the trace saw of graphs instantiated and launched.
	Graphs GraphUse
	// Executable is what the program's file said before it ran (read
	// where the runner could).
	Executable ProgramFile
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

// Empty lists the captures that ended with success into an empty graph.
func (r *Result) Empty() []*Capture {
	var out []*Capture
	for _, c := range r.Captures {
		if c.End.Empty() {
			out = append(out, c)
		}
	}
	return out
}

// Outside counts the calls that enqueued work outside some capture while
// it was active, and returns the earliest with its capture.
func (r *Result) Outside() (n int, first *Call, at *Capture) {
	for _, c := range r.Captures {
		n += len(c.Outside) + c.OutsideOmitted
		for _, call := range c.Outside {
			if first == nil || call.Time < first.Time {
				first, at = call, c
			}
		}
	}
	return n, first, at
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
	// NothingToCheck: the observer was in the program, which exited 0 and
	// began no capture.
	NothingToCheck Verdict = "SKIP"
	// CouldNotObserve: the program exited 0 and the observer could not see
	// its runtime calls (it never loaded, CUDA's callbacks could not be
	// subscribed to, the program is itself a trace): the trace cannot say
	// whether a capture broke.
	CouldNotObserve Verdict = "ERROR"
	// Interrupted: miotool, or SIGINT on the program's terminal, stopped
	// the program.
	Interrupted Verdict = "INTERRUPTED"
)

// Judgement is a trace's verdict and the one line that says why.
type Judgement struct {
	Verdict Verdict
	// Summary is the one line; where --strict findings alone failed the
	// trace it names the flag and counts them.
	Summary string
	// StrictFailed says that findings alone failed the trace, as the
	// strict judgement asked: hazards, or work enqueued outside a capture.
	StrictFailed bool
	// HazardsFailed is never set: StrictFailed says it, and the summary
	// already names the flag.
	HazardsFailed bool
	// Culprit is the first culprit and Capture the capture it broke (or
	// the first failing capture when no call was refused); Hazard the
	// first hazard; Outside the first call that enqueued work outside a
	// capture, during OutsideCapture. Each may be nil.
	Culprit        *Call
	Capture        *Capture
	Hazard         *Hazard
	Outside        *Call
	OutsideCapture *Capture
}

// Headline is the verdict and the summary, e.g. "FAIL - cuCtxSynchronize
// from thread 512 (...) invalidated the global-mode capture begun by
// thread 485 on stream 0x356a1150; end capture 901".
func (j Judgement) Headline() string { return string(j.Verdict) + " - " + j.Summary }

// Judge decides a trace, from facts alone.
//   - INTERRUPTED when miotool was interrupted or SIGINT ended the program
//     (Ctrl-C on its terminal), with what was seen.
//   - FAIL when a capture did not end well or a call was refused during
//     one, naming the first culprit.
//   - With no capture begun: FAIL when the program failed (both facts
//     said), ERROR when the trace could not observe the program (and
//     why), SKIP ("nothing to check") only when the observer was in the
//     program, which exited 0.
//   - FAIL under strict when a hazard was found or work was enqueued
//     outside a capture; FAIL when the program did not exit by itself
//     with status 0 after captures that all ended well.
//   - PASS otherwise: at least one capture ran, every capture ended with
//     success, nothing was refused, the program exited 0; the summary
//     adds what strict would have failed.
func Judge(r *Result, strict bool) Judgement {
	j := Judgement{}
	if len(r.Hazards) > 0 {
		j.Hazard = &r.Hazards[0]
	}
	_, j.Outside, j.OutsideCapture = r.Outside()
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
		j.Summary = interruptedSummary(r, j)
	case j.Capture != nil:
		j.Verdict = Fail
		j.Summary = failureSummary(r, j.Culprit, j.Capture)
	case r.Ran() == 0:
		j.Verdict, j.Summary = nothingBegan(r)
	case strict && (j.Hazard != nil || j.Outside != nil):
		j.Verdict = Fail
		j.StrictFailed = true
		j.Summary = strictSummary(r, j)
	case !r.Exit.OK():
		j.Verdict = Fail
		j.Summary = fmt.Sprintf("every capture ended well (%d), but the program %s", r.Ran(), r.Exit.Describe())
	default:
		j.Verdict = Pass
		j.Summary = passSummary(r, j)
	}
	return j
}

func interruptedSummary(r *Result, j Judgement) string {
	seen := fmt.Sprintf("%d %s seen", r.Ran(), words.Plural(r.Ran(), "capture", "captures"))
	switch {
	case j.Capture != nil:
		seen += "; " + failureSummary(r, j.Culprit, j.Capture)
	case r.Ran() > 0:
		seen += ", none failed so far"
	}
	return "interrupted: the program " + r.Exit.Describe() + "; " + seen
}

// nothingBegan judges a trace that saw no capture begin. The program's own
// failure is never hidden as nothing to check, and a program the trace
// could not observe is never said to have begun no capture.
func nothingBegan(r *Result) (Verdict, string) {
	unobserved := r.Unobserved()
	switch {
	case unobserved != "" && !r.Exit.OK():
		return Fail, "the program " + r.Exit.Describe() + "; " + unobserved
	case unobserved != "":
		return CouldNotObserve, unobserved
	case !r.Exit.OK():
		return Fail, "the program " + r.Exit.Describe() + ", and began no capture" + graphsWithoutCapture(r)
	}
	if r.Graphs.Uncaptured > 0 {
		return NothingToCheck, "no capture began" + graphsWithoutCapture(r) + ": nothing to judge"
	}
	return NothingToCheck, "no capture began: nothing to check"
}

// graphsWithoutCapture says how many graphs built without capture were
// launched, where there were any: "; 2 graphs built without capture were
// launched".
func graphsWithoutCapture(r *Result) string {
	n := r.Graphs.Uncaptured
	if n == 0 {
		return ""
	}
	more := ""
	if r.Graphs.Partial {
		more = "at least "
	}
	return fmt.Sprintf("; %s%d %s built without capture %s launched", more, n, words.Plural(n, "graph", "graphs"),
		words.Plural(n, "was", "were"))
}

// strictCounts is the strict judgement's findings: "(--strict: 1 hazard,
// 2 calls outside a capture)".
func strictCounts(r *Result) string {
	var parts []string
	if n := len(r.Hazards); n > 0 {
		parts = append(parts, words.Count(n, "hazard", "hazards"))
	}
	if n, _, _ := r.Outside(); n > 0 {
		parts = append(parts, words.Count(n, "call", "calls")+" outside a capture")
	}
	return "(--strict: " + strings.Join(parts, ", ") + ")"
}

// strictSummary names the first finding that failed a strict trace: work
// that escaped a capture before a hazard, since its graph lacks the work
// today.
func strictSummary(r *Result, j Judgement) string {
	if j.Outside != nil {
		return outsideSummary(r, j.Outside, j.OutsideCapture) + " " + strictCounts(r)
	}
	return hazardSummary(r, *j.Hazard) + " " + strictCounts(r)
}

// passSummary counts the captures and adds what a strict trace would fail
// and the empty graphs.
func passSummary(r *Result, j Judgement) string {
	s := fmt.Sprintf("%d %s ended with success, nothing refused", r.Ran(), words.Plural(r.Ran(), "capture", "captures"))
	if n, _, _ := r.Outside(); n > 0 {
		s += fmt.Sprintf("; %d %s enqueued work outside a capture, the first: %s", n, words.Plural(n, "call", "calls"),
			outsideSummary(r, j.Outside, j.OutsideCapture))
	}
	if n := len(r.Hazards); n > 0 {
		s += fmt.Sprintf("; %d latent %s", n, words.Plural(n, "hazard", "hazards"))
		if j.Outside == nil {
			s += ", the first: " + hazardSummary(r, *j.Hazard)
		}
	}
	if n := len(r.Empty()); n > 0 {
		s += fmt.Sprintf("; %d %s captured no work (an empty graph)", n, words.Plural(n, "capture", "captures"))
	}
	return s
}

func failureSummary(r *Result, culprit *Call, c *Capture) string {
	name := CaptureName(r, c)
	switch {
	case !c.Ran():
		return fmt.Sprintf("%s on stream %#x from %s returned %d %s: the capture never began",
			BaseName(c.BeginName), c.Stream, threadLabel(r, c.PID, c.TID, c.BeginThreadName, c.BeginPython),
			int(c.BeginResult), c.BeginResult.Short(c.API))
	case culprit != nil:
		return culpritSummary(r, culprit, c)
	case c.End == nil:
		return fmt.Sprintf("%s never ended: the program %s", name, r.Exit.Describe())
	case c.End.StreamGone:
		return fmt.Sprintf("the stream of %s was destroyed before the capture ended", strings.TrimPrefix(name, "the "))
	case c.Invalidated():
		return fmt.Sprintf("%s was invalidated (end capture 901) by a call the observer did not see", name)
	}
	return fmt.Sprintf("%s ended with %d %s", name, int(c.End.Result), c.End.Result.Short(c.API))
}

// culpritSummary says what the first culprit did to the capture it broke.
func culpritSummary(r *Result, culprit *Call, c *Capture) string {
	call, name := CallName(r, culprit), CaptureName(r, c)
	switch {
	case c.Invalidated():
		return fmt.Sprintf("%s invalidated %s; end capture %d", call, name, int(c.End.Result))
	case c.End == nil:
		return fmt.Sprintf("%s was refused (%d) during %s, which never ended: the program %s",
			call, int(culprit.Result), name, r.Exit.Describe())
	case c.End.StreamGone:
		return fmt.Sprintf("%s was refused (%d) during %s, whose stream was destroyed before the capture ended",
			call, int(culprit.Result), name)
	}
	return fmt.Sprintf("%s was refused (%d) during %s; end capture %d", call, int(culprit.Result), name, int(c.End.Result))
}

func hazardSummary(r *Result, h Hazard) string {
	return fmt.Sprintf("%s succeeded during %s only because %s; a global-mode capture refuses it: %s",
		CallName(r, h.Call), CaptureName(r, h.Capture), h.Because(), h.Rule())
}

// outsideSummary says which call enqueued work outside which capture.
func outsideSummary(r *Result, call *Call, c *Capture) string {
	return fmt.Sprintf("%s enqueued work into stream %#x, which was not capturing, during %s: the graph does not hold it",
		CallName(r, call), call.Stream, CaptureName(r, c))
}
