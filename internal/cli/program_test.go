package cli

import (
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
