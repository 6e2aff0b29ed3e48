//go:build linux

package trace

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"syscall"

	"miotool/internal/childproc"
)

// runProgram runs the program on childproc's runner, which every program
// miotool starts shares: a process group of its own, the watchdog, the
// forwarded interrupt and then the group's kill, the terminal's
// foreground, death with miotool, and no descendant left running. Its
// standard streams are miotool's own, as they are, unless o names others.
func runProgram(ctx context.Context, o Options, path string, env []string) (Exit, error) {
	grace := o.Grace
	if grace <= 0 {
		grace = DefaultGrace
	}
	interrupt := func() syscall.Signal {
		if o.InterruptSignal != nil {
			if s := o.InterruptSignal(); s != 0 {
				return s
			}
		}
		return syscall.SIGINT
	}
	res, err := childproc.Run(ctx, childproc.Spec{
		Path: path, Arg0: o.Program, Args: o.Args, Env: env, Dir: o.Dir,
		Stdin:  orFile(o.Stdin, os.Stdin),
		Stdout: orWriter(o.Stdout, os.Stdout), Stderr: orWriter(o.Stderr, os.Stderr),
		Foreground: true,
		Timeout:    o.Timeout, Interrupt: interrupt, InterruptGrace: grace,
		PipeGrace: outputGrace, Leftover: o.leftover, NoWatcher: o.noGuard, Started: o.Started,
	})
	exit := Exit{Code: -1, Timeout: o.Timeout}
	var se *childproc.StartError
	switch {
	case errors.As(err, &se) && errors.Is(se.Err, childproc.ErrNotStarted):
		// miotool was interrupted before the program could start.
		exit.Interrupted = true
		return exit, nil
	case errors.As(err, &se):
		return Exit{}, &UsageError{fmt.Errorf("program %s: %v", o.Program, se.Err)}
	case err != nil:
		return Exit{}, err
	}
	exit.TimedOut, exit.Interrupted, exit.Forwarded, exit.Wall = res.TimedOut, res.Canceled, res.Forwarded, res.Wall
	exit.Stdout = stdoutEnd(res.StdoutEnd)
	if sig, ok := res.Signal(); ok {
		exit.Signal = sig
	} else {
		exit.Code = res.ExitCode()
	}
	return exit, nil
}

func orFile(r io.Reader, std *os.File) io.Reader {
	if r == nil {
		return std
	}
	return r
}

func orWriter(w io.Writer, std *os.File) io.Writer {
	if w == nil {
		return std
	}
	return w
}

func stdoutEnd(e childproc.LineEnd) StdoutEnd {
	switch e {
	case childproc.LineStart:
		return StdoutAtLineStart
	case childproc.LineOpen:
		return StdoutMidLine
	case childproc.LineTerminal:
		return StdoutTerminal
	}
	return StdoutPipe
}
