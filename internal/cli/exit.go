package cli

import (
	"errors"
	"fmt"

	"miotool/internal/report"
)

// Exit codes, as the root command's help and the README list them.
const (
	ExitOK          = report.ExitPass    // every check passed
	ExitCheckFailed = report.ExitFail    // a check failed
	ExitUsage       = report.ExitUsage   // usage or configuration error
	ExitToolFailure = report.ExitError   // the tool itself failed
	ExitSkipped     = report.ExitSkipped // the requested device or library is not there
)

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

// ToolError marks err as a failure of the tool itself (exit 3) unless it
// already carries an exit code; nil stays nil. Run functions' errors pass
// through it, so that a plain error is never mistaken for a usage error.
func ToolError(err error) error {
	if err == nil {
		return nil
	}
	var ee *ExitError
	if errors.As(err, &ee) {
		return err
	}
	return &ExitError{Code: ExitToolFailure, Err: err}
}

// ExitCodeOf is the exit code err stands for: 0 for nil, its own code for an
// *ExitError, and 3 (tool failure) otherwise.
func ExitCodeOf(err error) int {
	if err == nil {
		return ExitOK
	}
	var ee *ExitError
	if errors.As(err, &ee) {
		return ee.Code
	}
	return ExitToolFailure
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
