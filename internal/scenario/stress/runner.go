package stress

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"time"

	"miotool/internal/aiheur/cache"
	"miotool/internal/childproc"
)

// DetectionPrefix starts the line a run prints the first cache record of
// each kind on, as the record is made: a run that crashes right after
// still leaves it in its output.
const DetectionPrefix = "miotool-stress-detection: "

// PrintDetection prints r as a detection line on standard output, in one
// write so that it is never interleaved with another line.
func PrintDetection(r cache.Record) {
	data, err := json.Marshal(r)
	if err != nil {
		return
	}
	_, _ = os.Stdout.Write([]byte(DetectionPrefix + string(data) + "\n"))
}

// ParseDetections reads the detection lines in a run's standard output:
// each kind's count is the number of its lines, its first the first line.
func ParseDetections(stdout []byte) cache.Detections {
	var d cache.Detections
	for _, line := range strings.Split(string(stdout), "\n") {
		body, ok := strings.CutPrefix(strings.TrimSpace(line), DetectionPrefix)
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

// ChildCommand is how a stress run's fresh process is started: Path with
// Args (miotool re-executing itself with a hidden flag, or a test binary
// standing in for it), and Env (nil: this process's environment).
type ChildCommand struct {
	Path string
	Args []string
	Env  []string
}

// RunnerOptions configure RunProcesses.
type RunnerOptions struct {
	// Runs is how many child processes to run, Jobs how many at a time.
	Runs, Jobs int
	// Timeout is the watchdog: a run still going after it is killed and
	// counted as a hang.
	Timeout time.Duration
	// Progress, when set, is told after every finished run.
	Progress func(done, total int)
	// Log, when set, gets one line per finished run.
	Log func(format string, args ...any)
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
}

// RunProcesses starts o.Runs children of cmd, o.Jobs at a time, each
// under the watchdog, and classifies how each ended. When ctx ends it
// kills the children still running and returns, with ctx's error, the
// runs it started, in start order: those that finished as they ended,
// those it killed as RunInterrupted. Runs never started are not there.
func RunProcesses(ctx context.Context, cmd ChildCommand, o RunnerOptions) ([]RunOutcome, error) {
	switch {
	case o.Runs < 1:
		return nil, fmt.Errorf("runs must be at least 1, got %d", o.Runs)
	case o.Jobs < 1:
		return nil, fmt.Errorf("jobs must be at least 1, got %d", o.Jobs)
	case o.Timeout <= 0:
		return nil, fmt.Errorf("the watchdog timeout must be positive, got %v", o.Timeout)
	case cmd.Path == "":
		return nil, errors.New("no child command to run")
	}
	outcomes := make([]RunOutcome, o.Runs)
	started := make([]bool, o.Runs)
	next := make(chan int)
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		finished int
		startErr error
	)
	for range min(o.Jobs, o.Runs) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				if ctx.Err() != nil {
					continue // not started: no outcome
				}
				out, err := runChild(ctx, cmd, o.Timeout)
				out.Index = i
				mu.Lock()
				started[i] = true
				if err != nil && startErr == nil {
					startErr = err
				}
				outcomes[i] = out
				finished++
				n := finished
				mu.Unlock()
				if o.Log != nil {
					o.Log("run %d: %s%s (%s)", i+1, out.Kind, crashSuffix(out), out.Wall.Round(time.Millisecond))
				}
				if o.Progress != nil {
					o.Progress(n, o.Runs)
				}
			}
		}()
	}
feed:
	for i := 0; i < o.Runs; i++ {
		mu.Lock()
		failed := startErr != nil
		mu.Unlock()
		if failed {
			break
		}
		select {
		case next <- i:
		case <-ctx.Done():
			break feed
		}
	}
	close(next)
	wg.Wait()
	if startErr != nil {
		return nil, startErr
	}
	if err := ctx.Err(); err != nil {
		var partial []RunOutcome
		for i, o := range outcomes {
			if started[i] {
				partial = append(partial, o)
			}
		}
		return partial, err
	}
	return outcomes, nil
}

func crashSuffix(o RunOutcome) string {
	if o.Crash != "" {
		return ": " + o.Crash
	}
	return ""
}

// runChild starts one child and waits for it, killing it (and whatever it
// started) when the watchdog or ctx fires. An error means the child could
// not be started at all.
func runChild(ctx context.Context, cmd ChildCommand, timeout time.Duration) (RunOutcome, error) {
	res, err := childproc.Run(ctx, childproc.Spec{Path: cmd.Path, Args: cmd.Args, Env: cmd.Env, Timeout: timeout})
	if err != nil {
		if res.PID == 0 {
			return RunOutcome{Kind: RunError, Exit: -1, Detail: err.Error()}, fmt.Errorf("starting the run's process: %w", err)
		}
		return RunOutcome{Kind: RunError, Exit: -1, Wall: res.Wall, Detail: err.Error()}, nil
	}
	stderr := res.Stderr.Data
	if res.Stderr.Cut > 0 {
		stderr = append([]byte(fmt.Sprintf("... (the first %d bytes not kept) ...\n", res.Stderr.Cut)), stderr...)
	}
	out := Classify(res.State, res.Stdout.Data, stderr, res.TimedOut)
	out.Wall = res.Wall
	switch {
	case res.TimedOut:
		out.Detail = fmt.Sprintf("still running after %v; killed by the watchdog", timeout)
	case res.Canceled:
		// Killed by this process on its interruption: not a crash.
		out.Kind, out.Crash, out.Excerpt = RunInterrupted, "", ""
		out.Detail = "killed when miotool was interrupted"
	}
	return out, nil
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
	} else if run, ok := ParseResult(stdout); ok {
		final = run.Detections
	}
	out.Detections = UnionDetections(ParseDetections(stdout), final)
	return out
}

func classify(state *os.ProcessState, stdout, stderr []byte, timedOut bool) RunOutcome {
	out := RunOutcome{Exit: -1, StderrTail: lastLines(string(stderr), 12)}
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
	if run, ok := ParseResult(stdout); ok {
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
	out.Detail = fmt.Sprintf("exited with status %d without a result", out.Exit)
	if last := lastLines(text, 1); last != "" {
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

// lastLines is the last n non-empty lines of s, joined by newlines.
func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	var keep []string
	for i := len(lines) - 1; i >= 0 && len(keep) < n; i-- {
		if l := strings.TrimSpace(lines[i]); l != "" {
			keep = append([]string{l}, keep...)
		}
	}
	return strings.Join(keep, "\n")
}
