// Package childproc runs programs as fresh child processes and says how
// each ended. It is the one place miotool starts a program: trace's
// traced program, stress-threads' runs, a suite's checks and repeat's
// runs all go through Run or Many.
//
// A child runs in a process group of its own. A watchdog kills the group
// when it runs too long; when the child ends, the group is killed and,
// on Linux, so is every descendant that left it (a new group or session
// of its own): miotool is their subreaper, so they come back to it as
// orphans, and each carries its child's token in its environment. On
// Linux the child also dies with miotool: the kernel kills it when the
// thread that started it dies (Pdeathsig), and a small watcher started
// before it kills its group and every process with its token when
// miotool dies without saying the child has ended. The end of each
// captured output stream is kept within a bound; a stream the caller
// passes through is given to the child as it is.
package childproc

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"syscall"
	"time"
)

// DefaultKeep is how much of each output stream is kept when Spec.Keep is
// zero: the last 4 MiB, enough for a result line and a Go crash report.
const DefaultKeep = 4 << 20

// DefaultPipeGrace is how long output may still arrive after the child has
// exited when Spec.PipeGrace is zero.
const DefaultPipeGrace = 2 * time.Second

// DefaultInterruptGrace is how long an interrupted child has to exit after
// the Spec.Interrupt signal before its group is killed, when
// Spec.InterruptGrace is zero.
const DefaultInterruptGrace = 5 * time.Second

// Spec is a child process to run.
type Spec struct {
	Path string
	// Arg0, when set, is the child's argv[0] (Path otherwise): a program
	// found in $PATH keeps the name it was given.
	Arg0 string
	Args []string
	// Env is the child's environment; nil means this process's. Run adds
	// the child's token (TokenEnv) to it.
	Env []string
	Dir string
	// Stdin is the child's standard input: nil is the null device; an
	// *os.File is given to the child as it is (a terminal stays one); any
	// other reader is copied to it through a pipe.
	Stdin io.Reader
	// Stdout and Stderr, when nil, are captured: their ends are kept in
	// the Result. An *os.File is given to the child as it is, so that it
	// sees what it would see without this process: a terminal is a
	// terminal, and a pipe whose reader has gone gives it SIGPIPE/EPIPE.
	// Any other writer gets a copy through a pipe; one that fails closes
	// the pipe, with the same effect for the child.
	Stdout, Stderr io.Writer
	// Foreground gives the child the terminal while it runs, as a shell
	// gives it, when its standard input is a terminal whose foreground
	// group is this process's: its group in the foreground, so that it can
	// read the terminal and Ctrl-C reaches it. The terminal comes back to
	// this process's group when the child has ended.
	Foreground bool
	// Timeout is the watchdog: a child still running after it is killed,
	// with its process group. Zero means no watchdog.
	Timeout time.Duration
	// Interrupt, when set, is asked for the signal to send the child's
	// group when ctx ends (for a command interrupted by SIGTERM, SIGTERM);
	// the group is killed InterruptGrace later if the child is still
	// running. Nil, or a zero or SIGKILL answer: the group is killed at
	// once.
	Interrupt func() syscall.Signal
	// InterruptGrace is how long the child has after the Interrupt signal
	// (DefaultInterruptGrace when zero).
	InterruptGrace time.Duration
	// Keep bounds what is kept of each captured output stream: its last
	// Keep bytes (DefaultKeep when zero).
	Keep int
	// PipeGrace bounds, once the child has exited and its process group
	// has been killed, the wait for what it left outside its group to end
	// and for the output pipes to close: a descendant that cannot be
	// found may still hold them (DefaultPipeGrace when zero). The output
	// read by then is the result's.
	PipeGrace time.Duration
	// Leftover, when set, is a folder the watcher removes when this
	// process dies before the child has ended (an events socket's).
	Leftover string
	// NoWatcher leaves out the watcher of this process's death: the
	// child's own death signal (Pdeathsig) is then all that ends it with
	// this process, and what it started outlives it. For tests that hold
	// the death signal alone.
	NoWatcher bool
	// Started, when set, is told the child's process id (also its process
	// group's) once it runs.
	Started func(pid int)
	// Skip, set by the spec function of Many, starts no child for this
	// index and reports nothing for it: a caller that has seen enough (a
	// run that could not open the device) starts no more, while the runs
	// already going finish.
	Skip bool
}

// Output is what was kept of one captured output stream.
type Output struct {
	// Data is the end of the stream; when its start was cut, Data begins
	// at a line boundary.
	Data []byte
	// Cut counts the bytes not kept, from the start of the stream.
	Cut int64
}

// Last is at most the last n bytes of the output, starting at a line
// boundary whenever anything before them was not kept.
func (o Output) Last(n int) string {
	d := o.Data
	if len(d) <= n {
		return string(d)
	}
	if d[len(d)-n-1] == '\n' {
		return string(d[len(d)-n:])
	}
	return string(afterFirstLine(d[len(d)-n:]))
}

// LineEnd says where the child left its standard output: whether what is
// written there next starts a line of its own.
type LineEnd int

const (
	// LineStart: nothing was written, or the last byte is a newline. Read
	// back from a regular file (the byte before where the next write
	// goes), or seen by the copy of a captured or copied stream.
	LineStart LineEnd = iota
	// LineOpen: the last byte is not a newline.
	LineOpen
	// LineUnseen: a pipe, socket or device the child had as it is: what
	// it wrote there cannot be read back without a copy in between.
	LineUnseen
	// LineTerminal: a terminal the child had as it is; the cursor's
	// column cannot be read back either.
	LineTerminal
)

func (e LineEnd) String() string {
	switch e {
	case LineStart:
		return "at a line's start"
	case LineOpen:
		return "in an open line"
	case LineUnseen:
		return "unseen"
	case LineTerminal:
		return "on a terminal"
	}
	return fmt.Sprintf("LineEnd(%d)", int(e))
}

// Known says whether the line's end was read back: LineStart or LineOpen.
func (e LineEnd) Known() bool { return e == LineStart || e == LineOpen }

// Result is how a child ended and what it printed.
type Result struct {
	// PID is the child's process id, also its process group's.
	PID int
	// State is the child's exit state.
	State *os.ProcessState
	// Stdout and Stderr are the ends of the captured streams (empty for a
	// stream passed through).
	Stdout, Stderr Output
	// StdoutEnd is where the child left its standard output.
	StdoutEnd LineEnd
	// TimedOut: the watchdog killed it. Canceled: the context ended and
	// it was stopped, with Forwarded first (0: killed at once).
	TimedOut, Canceled bool
	Forwarded          syscall.Signal
	// Escaped counts the descendants outside the child's process group
	// (a group or session of their own) that were still running when it
	// ended, and were ended then.
	Escaped int
	// PipeHeld: after the child had exited and what it left had been
	// ended, something still held an output pipe past the grace; the
	// output may lack its end.
	PipeHeld bool
	// Wall is the time from start to exit.
	Wall time.Duration
}

// Signal is the signal that ended the child, if one did.
func (r Result) Signal() (syscall.Signal, bool) {
	if r.State == nil {
		return 0, false
	}
	if ws, ok := r.State.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return ws.Signal(), true
	}
	return 0, false
}

// ExitCode is the child's exit status, or -1 when a signal ended it.
func (r Result) ExitCode() int {
	if r.State == nil {
		return -1
	}
	return r.State.ExitCode()
}

// ExitText says how the child ended: "exit status 2" or "killed by signal
// SIGSEGV (segmentation fault)".
func (r Result) ExitText() string {
	if sig, ok := r.Signal(); ok {
		return fmt.Sprintf("killed by signal %s (%v)", SignalName(sig), sig)
	}
	return fmt.Sprintf("exit status %d", r.ExitCode())
}

// StartError is a child that could not be started: the program is not
// there or cannot be executed, or the context had ended (ErrNotStarted).
type StartError struct {
	Path string
	Err  error
}

func (e *StartError) Error() string { return "starting " + e.Path + ": " + e.Err.Error() }
func (e *StartError) Unwrap() error { return e.Err }

// ErrNotStarted is why no child starts once the context has ended.
var ErrNotStarted = errors.New("not started: the run was interrupted")

// Run starts the child and waits for it and for what it started. It
// returns an error only when the child could not be started (a
// *StartError) or its end could not be read; every way a started child
// ends is a Result.
func Run(ctx context.Context, s Spec) (Result, error) {
	keep := s.Keep
	if keep <= 0 {
		keep = DefaultKeep
	}
	grace := s.PipeGrace
	if grace <= 0 {
		grace = DefaultPipeGrace
	}
	if ctx.Err() != nil {
		return Result{}, &StartError{s.Path, ErrNotStarted}
	}
	std, err := openStreams(s, keep)
	if err != nil {
		return Result{}, err
	}
	token := newToken()
	cmd := exec.Command(s.Path, s.Args...)
	if s.Arg0 != "" {
		cmd.Args[0] = s.Arg0
	}
	cmd.Env, cmd.Dir = withToken(s.Env, token), s.Dir
	std.attach(cmd)
	cmd.SysProcAttr = sysProcAttr()
	tty, foreground := 0, false
	if s.Foreground {
		if tty, foreground = foregroundTTY(std.in.child); foreground {
			inForeground(cmd.SysProcAttr, tty)
		}
	}

	// Pdeathsig fires when the thread that started the child exits, not
	// the process: keep this goroutine on that thread until the child is
	// reaped, so the runtime never hands the thread to a goroutine that
	// ends it (one that locked it and returned) under a live child.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	becomeSubreaper()
	// The watcher runs before the child does, so that there is no moment
	// when the child, or anything it forked, would outlive this process.
	var w *watcher
	if !s.NoWatcher {
		w = startWatcher(token, s.Leftover)
	}
	if ctx.Err() != nil {
		w.release()
		std.abort()
		return Result{}, &StartError{s.Path, ErrNotStarted}
	}
	start := time.Now()
	if err := cmd.Start(); err != nil {
		w.release()
		std.abort()
		return Result{}, &StartError{s.Path, unwrapPathError(err)}
	}
	std.started()
	res := Result{PID: cmd.Process.Pid}
	if testHookBeforeWatch != nil {
		testHookBeforeWatch(res.PID)
	}
	w.watch(res.PID)
	if s.Started != nil {
		s.Started(res.PID)
	}
	waitErr := waitChild(ctx, s, cmd, &res)
	res.Wall = time.Since(start)
	// No descendant outlives the child. The group's id cannot have been
	// reused: while a descendant is in it the group exists, and an empty
	// group's kill finds no one.
	signalGroup(cmd.Process, syscall.SIGKILL)
	deadline := time.Now().Add(grace)
	res.Escaped = endLeftovers(res.PID, token, deadline)
	if foreground {
		restoreForeground(tty)
	}
	res.PipeHeld = std.finish(deadline)
	res.Stdout, res.Stderr, res.StdoutEnd = std.results()
	w.release()
	res.State = cmd.ProcessState
	var exitErr *exec.ExitError
	if res.State == nil || waitErr != nil && !errors.As(waitErr, &exitErr) {
		return res, fmt.Errorf("waiting for %s: %w", s.Path, waitErr)
	}
	return res, nil
}

// testHookBeforeWatch, set by a test, runs once the child has started and
// before the watcher is told its group: a process killed there must leave
// nothing running either.
var testHookBeforeWatch func(pid int)

// waitChild waits for the child under the watchdog and ctx, and returns
// what Wait returned.
func waitChild(ctx context.Context, s Spec, cmd *exec.Cmd, res *Result) error {
	waited := make(chan error, 1)
	go func() { waited <- cmd.Wait() }()
	var watchdog <-chan time.Time
	if s.Timeout > 0 {
		t := time.NewTimer(s.Timeout)
		defer t.Stop()
		watchdog = t.C
	}
	select {
	case err := <-waited:
		return err
	case <-watchdog:
		res.TimedOut = true
		signalGroup(cmd.Process, syscall.SIGKILL)
		return <-waited
	case <-ctx.Done():
	}
	res.Canceled = true
	sig := syscall.SIGKILL
	if s.Interrupt != nil {
		if asked := s.Interrupt(); asked != 0 {
			sig = asked
		}
	}
	if sig == syscall.SIGKILL {
		signalGroup(cmd.Process, syscall.SIGKILL)
		return <-waited
	}
	res.Forwarded = sig
	signalGroup(cmd.Process, sig)
	grace := s.InterruptGrace
	if grace <= 0 {
		grace = DefaultInterruptGrace
	}
	t := time.NewTimer(grace)
	defer t.Stop()
	select {
	case err := <-waited:
		return err
	case <-t.C:
		signalGroup(cmd.Process, syscall.SIGKILL)
		return <-waited
	}
}

// unwrapPathError is what exec says of a program it could not start,
// without the path it repeats: "no such file or directory".
func unwrapPathError(err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// SignalName is a signal's conventional name, e.g. "SIGSEGV".
func SignalName(sig syscall.Signal) string {
	if name, ok := signalNames[sig]; ok {
		return name
	}
	return fmt.Sprintf("signal %d", int(sig))
}
