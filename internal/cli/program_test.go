package cli

import (
	"errors"
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

func TestProgramAfterDash(t *testing.T) {
	const usage = "miotool trace [flags] -- PROGRAM [ARGS...]"
	for _, c := range []struct {
		name, want string
		args       []string
	}{
		{"the program after --", "", []string{"--", "python3", "train.py"}},
		{"nothing at all", "no program to trace", nil},
		{"no --", "put -- before the program: miotool trace [flags] -- python3 train.py", []string{"python3", "train.py"}},
		{"a word before --", `"python3" before --`, []string{"python3", "--", "train.py"}},
		{"nothing after --", "no program after --", []string{"--"}},
	} {
		var got error
		cmd := &cobra.Command{Use: "trace", Args: ProgramAfterDash("trace", usage), RunE: func(*cobra.Command, []string) error { return nil }}
		cmd.SetArgs(c.args)
		cmd.SetOut(&strings.Builder{})
		cmd.SetErr(&strings.Builder{})
		got = cmd.Execute()
		switch {
		case c.want == "" && got != nil:
			t.Errorf("%s: %v, want none", c.name, got)
		case c.want != "" && (got == nil || !strings.Contains(got.Error(), c.want)):
			t.Errorf("%s: %v, want an error saying %q", c.name, got, c.want)
		}
	}
}

func TestProgramFlagError(t *testing.T) {
	const usage = "miotool repeat [flags] -- PROGRAM [ARGS...]"
	cmd := &cobra.Command{Use: "repeat", Args: ProgramAfterDash("repeat", usage), RunE: func(*cobra.Command, []string) error { return nil }}
	cmd.SetFlagErrorFunc(ProgramFlagError(usage))
	cmd.SetArgs([]string{"--iters", "3", "--", "prog"})
	cmd.SetOut(&strings.Builder{})
	cmd.SetErr(&strings.Builder{})
	err := cmd.Execute()
	var exit *ExitError
	if !errors.As(err, &exit) || exit.Code != ExitUsage || !strings.Contains(exit.Err.Error(), "the program's own flags go after --: "+usage) ||
		exit.Hint != "Run 'repeat --help' for usage." {
		t.Errorf("an unknown flag gave %#v, want a usage error (exit %d) that says the program's flags go after --", err, ExitUsage)
	}
}
