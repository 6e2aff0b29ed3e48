// Command miotool reproduces, checks and reports GPU library failures
// around find, stream capture, graph replay and threads.
package main

import (
	"miotool/internal/buildinfo"
	"os"

	"github.com/spf13/cobra"

	"miotool/internal/cli"
)

// Set at link time: go build -ldflags "-X main.version=1.2.0 -X main.commit=$(git rev-parse HEAD)".
// When empty, the version control information Go records in the binary is used.
var (
	version string
	commit  string
)

func main() {
	f := cli.NewFactory(cli.System(), buildinfo.Resolve(version, commit))
	os.Exit(cli.Main(f, os.Args[1:], newRootCmd))
}

// newRootCmd is the command tree.
func newRootCmd(f *cli.Factory) *cobra.Command {
	root := cli.NewRootCmd(f)
	root.AddCommand(
		NewCmdVersion(f, nil),
		NewCmdDoctor(f, nil),
		NewCmdRules(f, nil),
		NewCmdFind(f, nil),
		NewCmdCapture(f, nil),
		NewCmdReplay(f, nil),
		NewCmdStress(f, nil),
		NewCmdHeuristic(f, nil),
		NewCmdReport(f, nil), NewCmdCompletion(f), NewCmdGenMan(f),
	)
	cli.FinishTree(f, root)
	return root
}
