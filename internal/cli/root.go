package cli

import (
	"errors"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"miotool/internal/buildinfo"
	"miotool/internal/hip"
	"miotool/internal/report"
)

// NewRootCmd builds the root command with the global flags and the
// configuration step; cmd/miotool adds the subcommands.
func NewRootCmd(f *Factory) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "miotool <command> [flags]",
		Short: "Reproduce, check and report GPU library failures around find, stream capture, graph replay and threads",
		Long: `miotool reproduces, checks and reports the failures that live between a GPU
deep-learning library's find step, stream capture into graphs, graph replay and
concurrent use from many threads. It runs on an NVIDIA GPU (CUDA driver API), an
AMD GPU (HIP) or, where no GPU runtime loads, on a simulated device.

Exit status: 0 every check passed; 1 a check failed; 2 usage or configuration
error; 3 the tool itself failed (standard output that could not be written
included); 4 skipped (the requested device or library is not there); 130
interrupted by SIGINT (Ctrl-C), 143 by SIGTERM: what finished is reported, with
the verdict INTERRUPTED; 131 quit by SIGQUIT (Ctrl-\), at once, with no result.

Commands that print a result also write it to the files --junit,
--export-markdown and --export-json name, before standard output.

Flags may also come from MIOTOOL_* environment variables (MIOTOOL_FORMAT=json,
MIOTOOL_RULES_DIALECT=hip) or from a YAML config file (--config, else
./miotool.yaml, else <user config dir>/miotool/miotool.yaml), in that order of
precedence after the command line.`,
		Example: `  # Which backend and device would run, and why
  miotool doctor

  # Measure the stream-capture rules and compare them with the H200 reference
  miotool rules --expect configs/rules/h200-cuda.yaml

  # A PR testing table
  miotool capture --mode=all --reclaim=all --format markdown`,
		SilenceErrors: true,
		SilenceUsage:  true,
		PersistentPreRunE: func(cmd *cobra.Command, args []string) error {
			if cmd.Name() == "help" {
				return nil // help must work even with a broken config file
			}
			if err := f.loadConfig(cmd); err != nil {
				return err
			}
			if f.Global.Device < 0 {
				return f.WithValueOrigins(UsageErrorf("--device %d: want a device ordinal, 0 or more", f.Global.Device))
			}
			return f.WithValueOrigins(f.checkFiles(cmd, args))
		},
	}
	// --version, as well as the version command; both print the version.
	// Defined here, since cobra's own would take -v, which is
	// MIOpenDriver's horizontal stride.
	cmd.Version = f.Build.Version
	cmd.Flags().Bool("version", false, "print miotool's version, commit and Go version")
	cmd.SetVersionTemplate(fmt.Sprintf("miotool %s (commit %s, %s %s)\n", f.Build.Version, commitText(f.Build), f.Build.GoVersion, f.Build.Platform))
	cmd.SetHelpCommand(newHelpCmd())
	cmd.CompletionOptions.DisableDefaultCmd = true
	// Main adds suggestions to the one-line error itself.
	cmd.DisableSuggestions = true
	cmd.SuggestionsMinimumDistance = 2
	cmd.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		return &ExitError{Code: ExitUsage, Err: explainShortV(c, err), Hint: UsageHint(c)}
	})

	fl := cmd.PersistentFlags()
	fl.SortFlags = false
	fl.Var(NewEnumValue(&f.Global.Backend, hip.BackendAuto, hip.BackendAuto, hip.BackendSim, hip.BackendCUDA, hip.BackendHIP), "backend",
		"runtime to use: auto (the first GPU runtime that loads, else the simulator), sim, cuda or hip")
	fl.IntVar(&f.Global.Device, "device", 0, "device ordinal")
	fl.Var(NewEnumValue(&f.Global.Format, report.Text, report.Formats...), "format", "output format: text, markdown or json")
	fl.StringVar(&f.Global.ConfigFile, "config", "", "config file (default ./miotool.yaml, else <user config dir>/miotool/miotool.yaml)")
	// No -v: on the commands that take a convolution problem -v is
	// MIOpenDriver's horizontal stride, and a short flag has one meaning.
	fl.BoolVar(&f.Global.Verbose, "verbose", false, "print what the tool decides (config file, backend) on stderr")
	fl.BoolVar(&f.Global.NoProgress, "no-progress", false, "do not show progress on stderr")
	return cmd
}

// NewTree is the root command with cmds below it, readied by FinishTree:
// miotool's command tree, or in tests a part of it.
func NewTree(f *Factory, cmds ...*cobra.Command) *cobra.Command {
	root := NewRootCmd(f)
	root.AddCommand(cmds...)
	FinishTree(f, root)
	return root
}

// FinishTree readies the command tree under root once every command is
// added: flag values complete from what they accept (CompleteEnumFlags),
// and a usage error about a flag set in a config file or a MIOTOOL_*
// variable says where the value came from (Factory.WithValueOrigins).
func FinishTree(f *Factory, root *cobra.Command) {
	CompleteEnumFlags(root)
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		if run := c.RunE; run != nil {
			c.RunE = func(cmd *cobra.Command, args []string) error { return f.WithValueOrigins(run(cmd, args)) }
		}
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(root)
}

// explainShortV adds to pflag's error about -v what -v is: MIOpenDriver's
// horizontal stride on the commands that take a convolution problem, and
// on no other command; verbose output is --verbose. Users of older miotool
// builds, where -v was --verbose, learn the new spelling from it.
func explainShortV(c *cobra.Command, err error) error {
	msg := err.Error()
	if !strings.Contains(msg, "'v' in -") && !strings.Contains(msg, `"-v, --`) {
		return err
	}
	if stride := c.Flags().ShorthandLookup("v"); stride != nil {
		return fmt.Errorf("%w (on %s, -v is MIOpenDriver's horizontal stride --%s and takes a number; verbose output is --verbose)",
			err, c.Name(), stride.Name)
	}
	return fmt.Errorf("%w (verbose output is --verbose; -v is MIOpenDriver's horizontal stride on the commands that take a convolution problem)", err)
}

// UsageHint is the line printed under a usage error.
func UsageHint(cmd *cobra.Command) string {
	return fmt.Sprintf("Run '%s --help' for usage.", cmd.CommandPath())
}

// commitText is the commit, marked when the tree had local changes.
func commitText(b buildinfo.Info) string {
	if b.Modified {
		return b.Commit + ", modified"
	}
	return b.Commit
}

// newHelpCmd is cobra's help command, except that a topic that names no
// command is a usage error (exit 2) with a suggestion, not the root's help
// and exit 0: a script that asks for help on a misspelt command should
// know it got none.
func newHelpCmd() *cobra.Command {
	return &cobra.Command{
		Use:     "help [command]",
		Short:   "Help about any command",
		Long:    `Help shows the help of any command: miotool help [command].`,
		Example: "  miotool help rules\n  miotool help report merge",
		ValidArgsFunction: func(c *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
			cmd, _, err := c.Root().Find(args)
			if err != nil {
				return nil, cobra.ShellCompDirectiveNoFileComp
			}
			if cmd == nil {
				cmd = c.Root()
			}
			var out []cobra.Completion
			for _, sub := range cmd.Commands() {
				if sub.IsAvailableCommand() && strings.HasPrefix(sub.Name(), toComplete) {
					out = append(out, cobra.CompletionWithDesc(sub.Name(), sub.Short))
				}
			}
			return out, cobra.ShellCompDirectiveNoFileComp
		},
		RunE: func(c *cobra.Command, args []string) error {
			root := c.Root()
			cmd, rest, err := root.Find(args)
			if err != nil || cmd == nil || len(rest) > 0 {
				topic := strings.Join(args, " ")
				msg := fmt.Sprintf("unknown help topic %q", topic)
				parent := root
				if cmd != nil && err == nil {
					parent = cmd
				}
				if len(rest) > 0 || err != nil {
					word := args[len(args)-len(rest):]
					if len(word) == 0 {
						word = args
					}
					if parent.SuggestionsMinimumDistance <= 0 {
						parent.SuggestionsMinimumDistance = root.SuggestionsMinimumDistance
					}
					if s := parent.SuggestionsFor(word[0]); len(s) > 0 {
						msg += fmt.Sprintf(" (did you mean %q?)", strings.TrimSpace(strings.TrimPrefix(parent.CommandPath()+" "+s[0], root.Name()+" ")))
					}
				}
				return &ExitError{Code: ExitUsage, Err: errors.New(msg), Hint: fmt.Sprintf("Run '%s --help' for the commands.", root.CommandPath())}
			}
			cmd.InitDefaultHelpFlag()
			cmd.InitDefaultVersionFlag()
			return cmd.Help()
		},
	}
}
