package cli

import (
	"fmt"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"miotool/configs"
)

// valueLister is a flag value that knows the values it accepts.
type valueLister interface{ Completions() []string }

// Completions lists the accepted values, for shell completion.
func (e *EnumValue[T]) Completions() []string { return Names(e.allowed) }

// Names turns an enum type's list into strings, e.g. streams.Policies.
func Names[T ~string](items []T) []string {
	out := make([]string, len(items))
	for i, it := range items {
		out[i] = string(it)
	}
	return out
}

// StringsOf turns a list of values that name themselves into strings, e.g.
// hip.CaptureModes.
func StringsOf[T fmt.Stringer](items []T) []string {
	out := make([]string, len(items))
	for i, it := range items {
		out[i] = it.String()
	}
	return out
}

// CompleteValues makes the shell complete flag's value from values.
func CompleteValues(cmd *cobra.Command, flag string, values []string) {
	mustRegister(cmd, flag, cobra.FixedCompletions(values, cobra.ShellCompDirectiveNoFileComp))
}

// CompleteList makes the shell complete a comma-separated list flag
// (--reclaim=lazy,worker): the word after the last comma completes from
// values, leaving out those already given.
func CompleteList(cmd *cobra.Command, flag string, values []string) {
	mustRegister(cmd, flag, func(_ *cobra.Command, _ []string, toComplete string) ([]string, cobra.ShellCompDirective) {
		prefix := ""
		given := []string(nil)
		if i := strings.LastIndexByte(toComplete, ','); i >= 0 {
			prefix = toComplete[:i+1]
			given = strings.Split(toComplete[:i], ",")
		}
		var out []string
		for _, v := range values {
			if !slices.Contains(given, v) {
				out = append(out, prefix+v)
			}
		}
		return out, cobra.ShellCompDirectiveNoFileComp
	})
}

// CompleteProblems makes the shell complete --problem with the names in
// the problems file that --problems names (the built-in one by default),
// each with its description.
func CompleteProblems(cmd *cobra.Command) {
	mustRegister(cmd, "problem", func(c *cobra.Command, _ []string, _ string) ([]string, cobra.ShellCompDirective) {
		file, _ := c.Flags().GetString("problems")
		problems, err := configs.Problems(file)
		if err != nil {
			return nil, cobra.ShellCompDirectiveError
		}
		out := make([]string, len(problems))
		for i, p := range problems {
			out[i] = p.Name
			if p.Description != "" {
				out[i] += "\t" + p.Description
			}
		}
		return out, cobra.ShellCompDirectiveNoFileComp
	})
}

// CompleteEnumFlags registers, for every flag in the tree under root whose
// value lists what it accepts (an EnumValue) and that has no completion of
// its own, a completion from that list: --backend, --format, --cache,
// --target, --dialect and the like.
func CompleteEnumFlags(root *cobra.Command) {
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		c.LocalFlags().VisitAll(func(fl *pflag.Flag) {
			lister, ok := fl.Value.(valueLister)
			if !ok {
				return
			}
			if _, has := c.GetFlagCompletionFunc(fl.Name); has {
				return
			}
			CompleteValues(c, fl.Name, lister.Completions())
		})
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(root)
}

// mustRegister registers a completion; the only failures are a flag that
// does not exist or one registered twice, both bugs in the command tree.
func mustRegister(cmd *cobra.Command, flag string, fn cobra.CompletionFunc) {
	if err := cmd.RegisterFlagCompletionFunc(flag, fn); err != nil {
		panic(fmt.Sprintf("%s: %v", cmd.CommandPath(), err))
	}
}
