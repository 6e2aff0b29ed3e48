//go:build linux

package trace

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"strconv"
	"sync"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/term"
)

// processAttr puts the program in a process group of its own, so that the
// group's kill reaches what it starts, and has the kernel kill it when the
// thread that started it dies: a program never outlives miotool.
func processAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}

// runProgram starts the program and waits for it: watchdog, interruption,
// group kill, terminal foreground.
func runProgram(ctx context.Context, o Options, path string, env []string) (Exit, error) {
	in, err := inputFor(o.Stdin)
	if err != nil {
		return Exit{}, err
	}
	out, err := outputFor(o.Stdout, os.Stdout)
	if err != nil {
		return Exit{}, err
	}
	errOut, err := outputFor(o.Stderr, os.Stderr)
	if err != nil {
		return Exit{}, err
	}
	streams := []*stdio{in, out, errOut}
	cmd := exec.Command(path, o.Args...)
	cmd.Args[0] = o.Program
	cmd.Env, cmd.Dir = env, o.Dir
	cmd.Stdin, cmd.Stdout, cmd.Stderr = in.child, out.child, errOut.child
	attr := processAttr()
	// A program on the terminal gets the terminal, as a shell gives it:
	// its group in the foreground, so it can read it and Ctrl-C reaches it.
	tty, fg := foregroundTTY(in.child)
	if fg {
		attr.Foreground, attr.Ctty = true, tty
	}
	cmd.SysProcAttr = attr

	// Pdeathsig fires when the thread that started the child exits: stay
	// on it until the child is reaped.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	start := time.Now()
	if err := cmd.Start(); err != nil {
		for _, s := range streams {
			s.afterStart()
			s.finish(false, nil)
		}
		return Exit{}, &UsageError{fmt.Errorf("program %s: %v", o.Program, unwrapExecError(err))}
	}
	for _, s := range streams {
		s.afterStart()
	}
	pid := cmd.Process.Pid
	if !o.noGuard {
		release := guardGroup(pid, o.leftover)
		defer release()
	}
	if o.Started != nil {
		o.Started(pid)
	}
	waited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(waited)
	}()
	var watchdog <-chan time.Time
	if o.Timeout > 0 {
		t := time.NewTimer(o.Timeout)
		defer t.Stop()
		watchdog = t.C
	}
	exit := Exit{Code: -1, Timeout: o.Timeout}
	select {
	case <-waited:
	case <-watchdog:
		exit.TimedOut = true
		killGroup(pid, syscall.SIGKILL)
		<-waited
	case <-ctx.Done():
		exit.Interrupted = true
		exit.Forwarded = syscall.SIGINT
		if o.InterruptSignal != nil {
			if s := o.InterruptSignal(); s != 0 {
				exit.Forwarded = s
			}
		}
		grace := o.Grace
		if grace <= 0 {
			grace = DefaultGrace
		}
		killGroup(pid, exit.Forwarded)
		t := time.NewTimer(grace)
		select {
		case <-waited:
		case <-t.C:
			killGroup(pid, syscall.SIGKILL)
			<-waited
		}
		t.Stop()
	}
	exit.Wall = time.Since(start)
	// No descendant outlives the program.
	killGroup(pid, syscall.SIGKILL)
	if fg {
		restoreForeground(tty)
	}
	if st := cmd.ProcessState; st != nil {
		if ws, ok := st.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			exit.Signal = ws.Signal()
		} else {
			exit.Code = st.ExitCode()
		}
	}
	grace := time.NewTimer(outputGrace)
	defer grace.Stop()
	in.finish(false, nil)
	out.finish(true, grace.C)
	errOut.finish(true, grace.C)
	return exit, nil
}

// guardScript waits for one line on its standard input: "done" when
// miotool has ended the program's group itself; nothing (end of input)
// when miotool died first, and then it kills the group and removes the
// folder miotool would have removed. It ignores the signals a terminal or
// a group kill would send it.
const guardScript = `trap '' INT TERM HUP QUIT
read -r word
[ "$word" = done ] && exit 0
kill -KILL "-$1" 2>/dev/null
[ -n "$2" ] && rm -rf -- "$2"
exit 0`

// guardGroup starts a watcher of this process for the program's group
// pgid: Pdeathsig kills the program when miotool dies, but not what the
// program started (a data loader's workers, a test's forked children),
// so a small shell outside the group holds the read end of a pipe that
// only this process writes to, and kills the group when the pipe closes
// without a word: this process was killed (SIGKILL) or crashed. It also
// removes leftover, the events socket's folder ("" for none). The
// returned function tells it the group is ended and reaps it. Where there
// is no /bin/sh the program's own Pdeathsig is all there is.
func guardGroup(pgid int, leftover string) (release func()) {
	pr, pw, err := os.Pipe()
	if err != nil {
		return func() {}
	}
	guard := exec.Command("/bin/sh", "-c", guardScript, "miotool-trace-guard", strconv.Itoa(pgid), leftover)
	guard.Stdin = pr
	guard.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	err = guard.Start()
	pr.Close()
	if err != nil {
		pw.Close()
		return func() {}
	}
	return func() {
		_, _ = pw.Write([]byte("done\n"))
		pw.Close()
		_ = guard.Wait()
	}
}

func unwrapExecError(err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

func killGroup(pid int, sig syscall.Signal) {
	if err := syscall.Kill(-pid, sig); err != nil {
		_ = syscall.Kill(pid, sig)
	}
}

// foregroundTTY says whether the program should get the terminal: its
// standard input is a terminal whose foreground group is ours.
func foregroundTTY(stdin *os.File) (int, bool) {
	fd := int(stdin.Fd())
	if !term.IsTerminal(fd) {
		return 0, false
	}
	pgrp, err := tcgetpgrp(fd)
	if err != nil || pgrp != syscall.Getpgrp() {
		return 0, false
	}
	return fd, true
}

func tcgetpgrp(fd int) (int, error) {
	var pgrp int32
	if _, _, e := syscall.Syscall(syscall.SYS_IOCTL, uintptr(fd), uintptr(syscall.TIOCGPGRP), uintptr(unsafe.Pointer(&pgrp))); e != 0 {
		return 0, e
	}
	return int(pgrp), nil
}

var foregroundMu sync.Mutex

// restoreForeground gives the terminal back to miotool's group. Setting
// it from a background group raises SIGTTOU, which is ignored meanwhile,
// as shells do.
func restoreForeground(fd int) {
	foregroundMu.Lock()
	defer foregroundMu.Unlock()
	signal.Ignore(syscall.SIGTTOU)
	defer signal.Reset(syscall.SIGTTOU)
	pgrp := int32(syscall.Getpgrp())
	_, _, _ = syscall.Syscall(syscall.SYS_IOCTL, uintptr(fd), uintptr(syscall.TIOCSPGRP), uintptr(unsafe.Pointer(&pgrp)))
}
