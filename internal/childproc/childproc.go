// Package childproc runs a program as a fresh child process and says how it
// ended: a watchdog kills it when it runs too long, the whole process group
// is killed when it ends so no descendant outlives it, on Linux the child
// dies with this process, and the end of its output is kept within a bound.
package childproc

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"sync"
	"syscall"
	"time"
)

// DefaultKeep is how much of each output stream is kept when Spec.Keep is
// zero: the last 4 MiB, enough for a result line and a Go crash report.
const DefaultKeep = 4 << 20

// DefaultPipeGrace is how long output may still arrive after the child has
// exited when Spec.PipeGrace is zero.
const DefaultPipeGrace = 2 * time.Second

// Spec is a child process to run.
type Spec struct {
	Path string
	Args []string
	// Env is the child's environment; nil means this process's.
	Env []string
	Dir string
	// Timeout is the watchdog: a child still running after it is killed,
	// with its process group. Zero means no watchdog.
	Timeout time.Duration
	// Keep bounds what is kept of each output stream: its last Keep bytes
	// (DefaultKeep when zero).
	Keep int
	// PipeGrace bounds the wait for the output pipes to close once the
	// child has exited and its process group has been killed: a
	// descendant that left the group may still hold them (DefaultPipeGrace
	// when zero). The output read by then is the result's.
	PipeGrace time.Duration
	// Started, when set, is told the child's process id (also its process
	// group's) once it runs.
	Started func(pid int)
}

// Output is what was kept of one output stream.
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

// Result is how a child ended and what it printed.
type Result struct {
	// PID is the child's process id, also its process group's.
	PID int
	// State is the child's exit state.
	State          *os.ProcessState
	Stdout, Stderr Output
	// TimedOut: the watchdog killed it. Canceled: the context ended and
	// it was killed.
	TimedOut, Canceled bool
	// PipeHeld: after the child had exited and its process group had been
	// killed, something outside the group still held an output pipe past
	// the grace; the output may lack its end.
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

// Run starts the child and waits for it. It returns an error only when the
// child could not be started; every way a started child ends is a Result.
func Run(ctx context.Context, s Spec) (Result, error) {
	keep := s.Keep
	if keep <= 0 {
		keep = DefaultKeep
	}
	grace := s.PipeGrace
	if grace <= 0 {
		grace = DefaultPipeGrace
	}
	// The pipes are this package's own rather than exec's, so that Wait
	// returns when the child exits, and the group can be killed before
	// anything waits for the pipes to close.
	outR, outW, err := os.Pipe()
	if err != nil {
		return Result{}, err
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		closeAll(outR, outW)
		return Result{}, err
	}
	cmd := exec.Command(s.Path, s.Args...)
	cmd.Env, cmd.Dir = s.Env, s.Dir
	cmd.Stdout, cmd.Stderr = outW, errW
	cmd.SysProcAttr = sysProcAttr()

	// Pdeathsig fires when the thread that started the child exits, not
	// the process: keep this goroutine on that thread until the child is
	// reaped, so the runtime never retires the thread under a live child.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	start := time.Now()
	if err := cmd.Start(); err != nil {
		closeAll(outR, outW, errR, errW)
		return Result{}, fmt.Errorf("starting %s: %w", s.Path, err)
	}
	closeAll(outW, errW) // the child has its own copies
	res := Result{PID: cmd.Process.Pid}
	if s.Started != nil {
		s.Started(res.PID)
	}
	stdout, stderr := &tail{keep: keep}, &tail{keep: keep}
	drained := make(chan struct{})
	var readers sync.WaitGroup
	readers.Add(2)
	go func() { defer readers.Done(); _, _ = io.Copy(stdout, outR) }()
	go func() { defer readers.Done(); _, _ = io.Copy(stderr, errR) }()
	go func() { readers.Wait(); close(drained) }()

	waited := make(chan error, 1)
	go func() { waited <- cmd.Wait() }()
	var watchdog <-chan time.Time
	if s.Timeout > 0 {
		t := time.NewTimer(s.Timeout)
		defer t.Stop()
		watchdog = t.C
	}
	var waitErr error
	select {
	case waitErr = <-waited:
	case <-watchdog:
		res.TimedOut = true
		killGroup(cmd.Process)
		waitErr = <-waited
	case <-ctx.Done():
		res.Canceled = true
		killGroup(cmd.Process)
		waitErr = <-waited
	}
	res.Wall = time.Since(start)
	// No descendant outlives the child. The group's id cannot have been
	// reused: while a descendant is in it the group exists, and an empty
	// group's kill finds no one.
	killGroup(cmd.Process)

	graceTimer := time.NewTimer(grace)
	defer graceTimer.Stop()
	select {
	case <-drained:
	case <-graceTimer.C:
		res.PipeHeld = true
		closeAll(outR, errR) // ends the readers' blocked reads
		<-drained
	}
	closeAll(outR, errR)
	res.State = cmd.ProcessState
	res.Stdout, res.Stderr = stdout.output(), stderr.output()
	var exitErr *exec.ExitError
	if res.State == nil || waitErr != nil && !errors.As(waitErr, &exitErr) {
		return res, fmt.Errorf("waiting for %s: %w", s.Path, waitErr)
	}
	return res, nil
}

func closeAll(fs ...*os.File) {
	for _, f := range fs {
		_ = f.Close()
	}
}

// tail keeps the last keep bytes written to it.
type tail struct {
	mu    sync.Mutex
	keep  int
	buf   []byte
	start int // buf[start:] is kept
	cut   int64
}

func (t *tail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := len(p)
	if len(p) >= t.keep {
		t.cut += int64(len(t.buf)-t.start) + int64(len(p)-t.keep)
		t.buf, t.start = append(t.buf[:0], p[len(p)-t.keep:]...), 0
		return n, nil
	}
	t.buf = append(t.buf, p...)
	if over := len(t.buf) - t.start - t.keep; over > 0 {
		t.start += over
		t.cut += int64(over)
	}
	// Move the kept bytes down once the dropped ones outweigh them, so a
	// long stream costs amortized constant time per byte.
	if t.start > t.keep {
		t.buf, t.start = append(t.buf[:0], t.buf[t.start:]...), 0
	}
	return n, nil
}

func (t *tail) output() Output {
	t.mu.Lock()
	defer t.mu.Unlock()
	d := append([]byte(nil), t.buf[t.start:]...)
	if t.cut > 0 {
		d = afterFirstLine(d)
	}
	return Output{Data: d, Cut: t.cut + int64(len(t.buf)-t.start-len(d))}
}

// afterFirstLine drops d's first, partial, line when d has another.
func afterFirstLine(d []byte) []byte {
	for i, c := range d {
		if c == '\n' && i+1 < len(d) {
			return d[i+1:]
		}
	}
	return d
}

// SignalName is a signal's conventional name, e.g. "SIGSEGV".
func SignalName(sig syscall.Signal) string {
	if name, ok := signalNames[sig]; ok {
		return name
	}
	return fmt.Sprintf("signal %d", int(sig))
}
