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
// (cobra sorts them by name): one line per command.
func commands(f *cli.Factory) []*cobra.Command {
	return []*cobra.Command{
		version.NewCmdVersion(f, nil),
		doctor.NewCmdDoctor(f, nil),
		rules.NewCmdRules(f, nil),
		find.NewCmdFind(f, nil),
		capture.NewCmdCapture(f, nil),
		replay.NewCmdReplay(f, nil),
		stress.NewCmdStress(f, nil),
		trace.NewCmdTrace(f, nil),
		heuristic.NewCmdHeuristic(f, nil),
		report.NewCmdReport(f, nil),
		completion.NewCmdCompletion(f),
		genman.NewCmdGenMan(f),
	}
}
