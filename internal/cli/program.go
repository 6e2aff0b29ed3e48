package cli

import (
	"fmt"

	"github.com/spf13/cobra"

	"miotool/internal/report"
)

// ProgramAfterDash checks a command that runs the user's program (trace,
// repeat): the program and its arguments follow --, and nothing else
// does. verb names what the command does to it ("trace"); usage is how the
// command is typed.
func ProgramAfterDash(verb, usage string) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		dash := cmd.ArgsLenAtDash()
		switch {
		case dash < 0 && len(args) == 0:
			return fmt.Errorf("no program to %s: %s", verb, usage)
		case dash < 0:
			return fmt.Errorf("put -- before the program: miotool %s [flags] -- %s", verb, report.JoinCommandLine(args))
		case dash > 0:
			return fmt.Errorf("%q before --: the program and its arguments go after --, miotool's flags before it (%s)", args[0], usage)
		case len(args) == 0:
			return fmt.Errorf("no program after --: %s", usage)
		}
		return nil
	}
}

// ProgramFlagError is the flag error of a command that runs the user's
// program: a flag miotool does not know is most often the program's,
// given without -- before it.
func ProgramFlagError(usage string) func(*cobra.Command, error) error {
	return func(c *cobra.Command, err error) error {
		return &ExitError{Code: ExitUsage, Err: fmt.Errorf("%v (the program's own flags go after --: %s)", err, usage), Hint: UsageHint(c)}
	}
}
