package stress

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"miotool/internal/aiheur/cache"
	"miotool/internal/childproc"
	"miotool/internal/words"
)

// What a stress run's child process says and how its parent reads its
// end: the run line (the run's RunResult), the detection lines the caches'
// first records make as they happen, and the classifier that turns an
// exit, its output and the Go runtime's crash report into a RunOutcome.

// ChildEnv is how a parent tells a process it starts that it is one of
// its runs: "<parent pid>:<token>", the token new for every parent. It
// is miotool's own hand-off, not configuration (no flag, config key or
// MIOTOOL_* variable reaches it), and a process refuses it unless its
// parent is that pid, so that neither a user's shell nor a process the
// run starts can inherit the child mode. The run echoes the token in its
// result line, and the parent reads only lines that carry it.
const ChildEnv = "_MIOTOOL_STRESS_RUN"

// NewChildToken is a parent's token: 128 random bits in hex.
func NewChildToken() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b) // crypto/rand.Read never fails on Linux
	return hex.EncodeToString(b)
}

// ChildEnvValue is ChildEnv's value for a run of this process.
func ChildEnvValue(token string) string { return fmt.Sprintf("%d:%s", os.Getpid(), token) }

// ParseChildEnv reads ChildEnv's value in a process whose parent is ppid
// and returns the parent's token; an error says why the value is not this
// process's to use.
func ParseChildEnv(value string, ppid int) (string, error) {
	pid, token, ok := strings.Cut(value, ":")
	n, err := strconv.Atoi(pid)
	switch {
	case !ok || err != nil || len(token) != 32 || strings.Trim(token, "0123456789abcdef") != "":
		return "", fmt.Errorf("%s=%q is not a value miotool sets (it is miotool's own hand-off to the runs stress-threads starts); unset it", ChildEnv, value)
	case n != ppid:
		return "", fmt.Errorf("%s is set, but not by this process's parent (pid %d, not %d): it is miotool's own hand-off to the runs stress-threads starts; unset it", ChildEnv, ppid, n)
	}
	return token, nil
}

// errForeignRun is a result line that does not carry the parent's token.
var errForeignRun = errors.New("its result line does not carry this run's token")

// RunLinePrefix starts the line a child process prints its RunResult on.
const RunLinePrefix = "miotool-stress-run: "

// WriteRunLine prints r as a child's run line.
func WriteRunLine(w io.Writer, r *RunResult) error {
	data, err := json.Marshal(r)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(w, "%s%s\n", RunLinePrefix, data)
	return err
}

// ParseRunLine finds a child's run line in its standard output.
func ParseRunLine(stdout []byte) (*RunResult, bool) {
	for _, line := range strings.Split(string(stdout), "\n") {
		body, ok := strings.CutPrefix(strings.TrimSpace(line), RunLinePrefix)
		if !ok {
			continue
		}
		var r RunResult
		if json.Unmarshal([]byte(body), &r) == nil {
			return &r, true
		}
	}
	return nil, false
}

// DeviceLinePrefix starts the line a run prints as soon as it has opened
// the device, before the workload: a run that crashes still says where it
// ran, and the parent, which never opens the device itself, learns it.
const DeviceLinePrefix = "miotool-stress-device: "

// RunDevice is a run's device line: the backend and device it opened, in
// the words of a result's header, the library target's notes, and how long
// the open took.
type RunDevice struct {
	Token         string   `json:"token,omitempty"`
	Backend       string   `json:"backend"`
	BackendReason string   `json:"backend_reason"`
	Name          string   `json:"name"`
	Arch          string   `json:"arch"`
	Description   string   `json:"description"`
	Notes         []string `json:"notes,omitempty"`
	OpenMs        float64  `json:"open_ms"`
}

// WriteDeviceLine prints d as a run's device line.
func WriteDeviceLine(w io.Writer, d RunDevice) error {
	data, err := json.Marshal(d)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(w, "%s%s\n", DeviceLinePrefix, data)
	return err
}

// parseDeviceLine finds a run's device line in its standard output.
func parseDeviceLine(stdout []byte) *RunDevice {
	for _, line := range strings.Split(string(stdout), "\n") {
		body, ok := strings.CutPrefix(strings.TrimSpace(line), DeviceLinePrefix)
		if !ok {
			continue
		}
		var d RunDevice
		if json.Unmarshal([]byte(body), &d) == nil {
			return &d
		}
	}
	return nil
}

// UnopenedLinePrefix starts the line a run prints when it could not open
// the device (or the library target): the result the command would have
// written (a SKIP or an ERROR, as JSON), for the parent to write as its
// own. This package keeps it as bytes; the command reads it.
const UnopenedLinePrefix = "miotool-stress-unopened: "

// WriteUnopenedLine prints a run's unopened result, already encoded as
// one line of JSON.
func WriteUnopenedLine(w io.Writer, result []byte) error {
	_, err := fmt.Fprintf(w, "%s%s\n", UnopenedLinePrefix, result)
	return err
}

// parseUnopenedLine finds the unopened line in a run's standard output.
func parseUnopenedLine(stdout []byte) json.RawMessage {
	for _, line := range strings.Split(string(stdout), "\n") {
		if body, ok := strings.CutPrefix(strings.TrimSpace(line), UnopenedLinePrefix); ok && json.Valid([]byte(body)) {
			return json.RawMessage(body)
		}
	}
	return nil
}

// DetectionLinePrefix starts the line a run prints the first cache record
// of each kind on, as the record is made: a run that crashes right after
// still leaves it in its output.
const DetectionLinePrefix = "miotool-stress-detection: "

// WriteDetectionLine prints r as a detection line, in one write so that it
// is never interleaved with another line.
func WriteDetectionLine(w io.Writer, r cache.Record) error {
	data, err := json.Marshal(r)
	if err != nil {
		return err
	}
	_, err = w.Write([]byte(DetectionLinePrefix + string(data) + "\n"))
	return err
}

// lineWriter writes whole lines to w, one at a time, from any goroutine;
// with no w it drops them.
type lineWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lineWriter) Write(p []byte) (int, error) {
	if l.w == nil {
		return len(p), nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// ParseDetectionLines reads the detection lines in a run's standard
// output: each kind's count is the number of its lines, its first the
// first line.
func ParseDetectionLines(stdout []byte) cache.Detections {
	var d cache.Detections
	for _, line := range strings.Split(string(stdout), "\n") {
		body, ok := strings.CutPrefix(strings.TrimSpace(line), DetectionLinePrefix)
		if !ok {
			continue
		}
		var r cache.Record
		if json.Unmarshal([]byte(body), &r) != nil {
			continue
		}
		t := tallyOf(&d, r.Kind)
		if t == nil {
			continue
		}
		t.Count++
		if t.First == nil {
			t.First = &r
		}
	}
	return d
}

// tallyOf is d's tally of kind k, nil for an unknown kind.
func tallyOf(d *cache.Detections, k cache.Kind) *cache.Tally {
	switch k {
	case cache.KindRace:
		return &d.Races
	case cache.KindDestroyed:
		return &d.Destroyed
	case cache.KindUseAfterFree:
		return &d.UseAfterFree
	}
	return nil
}

// UnionDetections is what a run detected, from its lines and from its
// result's final detections (a crashed or hung run has only the lines):
// each kind's larger count, and the first record either has.
func UnionDetections(lines, final cache.Detections) cache.Detections {
	u := final
	for _, k := range cache.Kinds {
		l, f := tallyOf(&lines, k), tallyOf(&u, k)
		f.Count = max(f.Count, l.Count)
		if f.First == nil {
			f.First = l.First
		}
	}
	return u
}

// RunKind is how a run ended.
type RunKind string

// Run outcomes.
const (
	RunPassed RunKind = "passed"
	// RunCrashed: killed by a signal, or the Go runtime's fatal error (a
	// fault on unmapped memory, a corrupted map) or an unrecovered panic.
	RunCrashed RunKind = "crashed"
	// RunWrong: the child finished and its output failed the check.
	RunWrong RunKind = "wrong result"
	// RunHung: the watchdog killed it.
	RunHung RunKind = "hung"
	// RunError: the child failed without crashing (it could not open the
	// device, load the model, ...): a failure of the tool, not a finding.
	RunError RunKind = "error"
	// RunInterrupted: killed because this process was interrupted (Ctrl-C,
	// SIGTERM); no outcome, never a crash.
	RunInterrupted RunKind = "interrupted"
)

// RunOutcome is one child process's end.
type RunOutcome struct {
	Index int // 0-based, in start order
	Kind  RunKind
	// Crash names a crash: the signal ("SIGSEGV") when one is known, else
	// the runtime's words ("fatal error: concurrent map writes", "panic").
	Crash string
	// Exit is the exit status, or -1 when a signal ended the process.
	Exit int
	Wall time.Duration
	// Run is the child's result line, when it printed one.
	Run *RunResult
	// Detail is one line: the crash's first line, or the error.
	Detail string
	// Excerpt, for a crash, is the runtime's report in one line: its first
	// lines and where the crashing goroutine was (miotool's frames).
	Excerpt string
	// StderrTail is the end of the child's standard error.
	StderrTail string
	// Detections are the caches' records: the run's detection lines and,
	// when it finished, its result's, together.
	Detections cache.Detections
	// Unopened, for a run that could not open the device or the library,
	// is the result it printed (UnopenedLinePrefix), as JSON.
	Unopened json.RawMessage
	// Device is the run's device line, when it printed one.
	Device *RunDevice
}

var (
	goSignalLine = regexp.MustCompile(`\[signal (SIG[A-Z0-9]+)`)
	goFatalLine  = regexp.MustCompile(`(?m)^fatal error: (.*)$`)
	goPanicLine  = regexp.MustCompile(`(?m)^panic: (.*)$`)
)

// Classify decides how a child ended from its exit state and output.
// A hang is what the watchdog killed. A crash is a process killed by a
// signal, or one whose standard error holds the Go runtime's own report:
// "fatal error: ..." (an unexpected fault address is a SIGSEGV the runtime
// caught; a corrupted map is "concurrent map writes") or an unrecovered
// "panic: ...". It is named by the signal when the report gives one. A
// child that printed its result line passed or got a wrong result; any
// other exit is an error of the tool.
//
// The detections are the union of the detection lines and the result
// line's, whatever the end.
func Classify(state *os.ProcessState, stdout, stderr []byte, timedOut bool) RunOutcome {
	out := classify(state, stdout, stderr, timedOut)
	var final cache.Detections
	if out.Run != nil {
		final = out.Run.Detections
	} else if run, ok := ParseRunLine(stdout); ok {
		final = run.Detections
	}
	out.Detections = UnionDetections(ParseDetectionLines(stdout), final)
	out.Device = parseDeviceLine(stdout)
	return out
}

func classify(state *os.ProcessState, stdout, stderr []byte, timedOut bool) RunOutcome {
	out := RunOutcome{Exit: -1, StderrTail: words.LastLines(string(stderr), 12)}
	if state != nil {
		out.Exit = state.ExitCode()
	}
	if timedOut {
		out.Kind = RunHung
		return out
	}
	text := string(stderr)
	fatal := goFatalLine.FindStringSubmatch(text)
	panicked := goPanicLine.FindStringSubmatch(text)
	if fatal != nil || panicked != nil {
		out.Kind = RunCrashed
		switch {
		case fatal != nil:
			out.Detail = "fatal error: " + strings.TrimSpace(fatal[1])
		default:
			out.Detail = "panic: " + strings.TrimSpace(panicked[1])
		}
		out.Excerpt = crashExcerpt(text)
		switch sig := goSignalLine.FindStringSubmatch(text); {
		case sig != nil:
			out.Crash = sig[1]
		case fatal != nil:
			out.Crash = out.Detail
		default:
			out.Crash = "panic"
		}
		return out
	}
	if state != nil {
		if ws, ok := state.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			out.Kind = RunCrashed
			out.Crash = childproc.SignalName(ws.Signal())
			out.Detail = "killed by " + out.Crash
			return out
		}
	}
	if run, ok := ParseRunLine(stdout); ok {
		out.Run = run
		if run.OK() {
			out.Kind = RunPassed
			return out
		}
		out.Kind = RunWrong
		out.Detail = fmt.Sprintf("%d of %d thread-trials wrong", run.Wrong, run.Trials*run.Threads)
		if run.WrongDetail != "" {
			out.Detail += "; first: " + run.WrongDetail
		}
		return out
	}
	out.Kind = RunError
	out.Unopened = parseUnopenedLine(stdout)
	out.Detail = fmt.Sprintf("exited with status %d without a result", out.Exit)
	if last := words.LastLines(text, 1); last != "" {
		out.Detail += ": " + last
	}
	return out
}

// crashExcerpt condenses a Go crash report: its header lines (the fault
// address, "fatal error: ...", "[signal ...]") and the first few frames of
// the crashing goroutine outside the runtime, innermost first.
func crashExcerpt(stderr string) string {
	lines := strings.Split(stderr, "\n")
	start := -1
	for i, l := range lines {
		if strings.HasPrefix(l, "unexpected fault address") || strings.HasPrefix(l, "fatal error:") || strings.HasPrefix(l, "panic:") {
			start = i
			break
		}
	}
	if start < 0 {
		return ""
	}
	var head, frames []string
	inStack := false
	for _, l := range lines[start:] {
		switch {
		case !inStack && strings.HasPrefix(l, "goroutine "):
			inStack = true
		case !inStack:
			if t := strings.TrimSpace(l); t != "" {
				head = append(head, t)
			}
		case l == "":
			if len(frames) > 0 {
				return strings.Join(head, " | ") + " | at " + strings.Join(frames, " <- ")
			}
			inStack = false // a goroutine of the runtime's only; take the next one
		case !strings.HasPrefix(l, "\t") && !isRuntimeFrame(l) && !strings.HasPrefix(l, "created by") && len(frames) < 4:
			if i := strings.LastIndex(l, "("); i > 0 {
				l = l[:i]
			}
			frames = append(frames, l)
		}
	}
	if len(frames) > 0 {
		return strings.Join(head, " | ") + " | at " + strings.Join(frames, " <- ")
	}
	return strings.Join(head, " | ")
}

// isRuntimeFrame reports a stack frame of the Go runtime itself, which
// every crash shares (throw, sigpanic, the map's fatal).
func isRuntimeFrame(l string) bool {
	return strings.HasPrefix(l, "runtime.") || strings.HasPrefix(l, "internal/runtime/")
}
