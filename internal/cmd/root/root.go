// Package root is miotool's command tree: the root command and every
// command below it.
package root

import (
	"github.com/spf13/cobra"

	"miotool/internal/cli"
	"miotool/internal/cmd/capture"
	"miotool/internal/cmd/completion"
	"miotool/internal/cmd/doctor"
	"miotool/internal/cmd/find"
	"miotool/internal/cmd/genman"
	"miotool/internal/cmd/heuristic"
	"miotool/internal/cmd/repeat"
	"miotool/internal/cmd/replay"
	"miotool/internal/cmd/report"
	"miotool/internal/cmd/rules"
	"miotool/internal/cmd/stress"
	"miotool/internal/cmd/trace"
	"miotool/internal/cmd/version"
)

// New builds the command tree.
func New(f *cli.Factory) *cobra.Command {
	return cli.NewTree(f, commands(f)...)
}

// commands are the commands below the root, in the order help lists them
// (cobra sorts them by name): one line per command. Those that render a
// result get the output flags (--junit, --export-markdown, --export-json)
// from results.
func commands(f *cli.Factory) []*cobra.Command {
	results := func(cmd *cobra.Command) *cobra.Command { return cli.AddOutputFlags(f, cmd) }
	return []*cobra.Command{
		version.NewCmdVersion(f, nil),
		results(doctor.NewCmdDoctor(f, nil)),
		results(rules.NewCmdRules(f, nil)),
		results(find.NewCmdFind(f, nil)),
		results(capture.NewCmdCapture(f, nil)),
		results(replay.NewCmdReplay(f, nil)),
		results(stress.NewCmdStress(f, nil)),
		results(trace.NewCmdTrace(f, nil)),
		results(repeat.NewCmdRepeat(f, nil)),
		results(heuristic.NewCmdHeuristic(f, nil)),
		results(report.NewCmdReport(f, nil)),
		completion.NewCmdCompletion(f),
		genman.NewCmdGenMan(f),
	}
}
