package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"syscall"

	"miotool/internal/report"
)

// Exit codes, as the root command's help and the README list them.
const (
	ExitOK          = report.ExitPass        // every check passed
	ExitCheckFailed = report.ExitFail        // a check failed
	ExitUsage       = report.ExitUsage       // usage or configuration error
	ExitToolFailure = report.ExitError       // the tool itself failed
	ExitSkipped     = report.ExitSkipped     // the requested device or library is not there
	ExitInterrupted = report.ExitInterrupted // SIGINT (Ctrl-C) stopped the run: 128+2
	ExitTerminated  = report.ExitTerminated  // SIGTERM stopped the run: 128+15
	ExitQuit        = 128 + 3                // SIGQUIT (Ctrl-\) quit at once
)

// Interruption is the cause of the context Main cancels when a signal
// arrives: which signal, so that the exit status can say it.
type Interruption struct {
	Signal os.Signal
}

func (i *Interruption) Error() string {
	switch i.Signal {
	case nil:
		return "interrupted"
	case os.Interrupt:
		return "interrupted by SIGINT"
	case syscall.SIGTERM:
		return "interrupted by SIGTERM"
	}
	return fmt.Sprintf("interrupted by %v", i.Signal)
}

// ExitCode is the shell's 128+signal: 130 for SIGINT, 143 for SIGTERM.
func (i *Interruption) ExitCode() int {
	if sig, ok := i.Signal.(syscall.Signal); ok {
		return 128 + int(sig)
	}
	return ExitInterrupted
}

// Interrupted is how a command ends that ctx's interruption stopped, after
// it has written what it had: the exit status of the signal (130 when ctx
// ended without one), and no further message, since the result says it.
// It is nil while ctx is live.
func Interrupted(ctx context.Context) error {
	if ctx.Err() == nil {
		return nil
	}
	code := ExitInterrupted
	var in *Interruption
	if errors.As(context.Cause(ctx), &in) {
		code = in.ExitCode()
	}
	return &ExitError{Code: code, Err: InterruptedReason(ctx), Silent: true}
}

// InterruptedReason is what stopped ctx, for a result: "interrupted by
// SIGINT", or "interrupted" when it was cancelled without a signal.
func InterruptedReason(ctx context.Context) error {
	var in *Interruption
	if errors.As(context.Cause(ctx), &in) {
		return in
	}
	return errors.New("interrupted")
}

// ExitError ends a command with a given exit code. Main prints Err as one
// line (unless Silent) and, for usage errors, a hint naming the help
// command.
type ExitError struct {
	Code int
	Err  error
	// Hint is a second line, e.g. "Run 'miotool rules --help' for usage.";
	// Main fills it for usage errors that lack one.
	Hint string
	// Silent means the message was already shown (for example inside a
	// rendered result), so Main prints nothing.
	Silent bool
}

func (e *ExitError) Error() string {
	if e.Err == nil {
		return fmt.Sprintf("exit status %d", e.Code)
	}
	return e.Err.Error()
}

func (e *ExitError) Unwrap() error { return e.Err }

// UsageErrorf is a usage or configuration error (exit 2).
func UsageErrorf(format string, args ...any) *ExitError {
	return &ExitError{Code: ExitUsage, Err: fmt.Errorf(format, args...)}
}

// UsageError wraps err as a usage error (exit 2); nil stays nil.
func UsageError(err error) error {
	if err == nil {
		return nil
	}
	var ee *ExitError
	if errors.As(err, &ee) {
		return err
	}
	return &ExitError{Code: ExitUsage, Err: err}
}

// ExitCodeOf is the exit code err stands for: 0 for nil, its own code for an
// *ExitError, 2 for cobra's "unknown command" (a usage error made before
// any of miotool's hooks run), and 3 (tool failure) for every other error.
// Main exits with it.
func ExitCodeOf(err error) int {
	if err == nil {
		return ExitOK
	}
	return exitErrorOf(err).Code
}

// exitErrorOf is the *ExitError that err stands for (see ExitCodeOf).
// Flag and argument errors are usage errors where they are made (the flag
// error hook, the commands' argument checks); an error that says nothing
// of its kind is the tool's own failure, never mistaken for bad input.
func exitErrorOf(err error) *ExitError {
	var ee *ExitError
	if errors.As(err, &ee) {
		return ee
	}
	if strings.HasPrefix(err.Error(), "unknown command ") {
		return &ExitError{Code: ExitUsage, Err: err}
	}
	return &ExitError{Code: ExitToolFailure, Err: err}
}

// Count is a count flag's name and value, for AtLeastOne.
type Count struct {
	Flag string
	N    int
}

// AtLeastOne is the usage error of the first count below 1, e.g.
// "--samples 0: want 1 or more"; nil when every count is 1 or more.
func AtLeastOne(counts ...Count) error {
	for _, c := range counts {
		if c.N < 1 {
			return UsageErrorf("%s %d: want 1 or more", c.Flag, c.N)
		}
	}
	return nil
}
