package report

import (
	"context"
	"os"

	"github.com/spf13/cobra"

	"miotool/internal/cli"
	"miotool/internal/report"
)

// ReportMergeOptions are the inputs of `miotool report merge`.
type ReportMergeOptions struct {
	IO     *cli.IOStreams
	Global cli.GlobalOptions
	Files  []string
}

func newCmdReportMerge(f *cli.Factory, runF func(*ReportMergeOptions) error) *cobra.Command {
	opts := &ReportMergeOptions{IO: f.IOStreams}
	cmd := &cobra.Command{
		Use:   "merge RESULT.json...",
		Short: "Merge the suite results of several hosts into one Testing Checklist",
		Long: `merge reads suite results written by "miotool report --suite ... --format
json" (schema miotool/suite/v3; v2 and v1 files are read too), typically one per
host of a fleet, and single checks' results ("miotool capture --format json"),
each a suite of one check on its host, and prints one table: a check that ran on several hosts is one row
whose Devices cell lists every device, with the host after a device name that
more than one host has ("NVIDIA H200 (sm_90) on node07"), and whose status
counts the runs of all hosts. --format json writes the merged result in the same schema, so merged
results can be merged again.

Exit status: 0 when every check met its expectation on every host, 1 when one
did not, 2 when a file cannot be read or is not a suite result, when a result
ran nothing (no checks, or none with a run: it passed nothing), or when a suite
run appears twice (the same file given twice, or a run already inside a merged
result), which would count its runs twice.`,
		Example: `  # One table from a Slurm job array's results (scripts/slurm-suite.sh)
  miotool report merge results/*.json --format markdown

  # And a JUnit file for CI
  miotool report merge node1.json node2.json --junit fleet.xml`,
		Args: cobra.MinimumNArgs(1),
		ValidArgsFunction: func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
			return []string{"json"}, cobra.ShellCompDirectiveFilterFileExt
		},
		RunE: cli.RunE(f, opts, runF),
	}
	cli.MarkInputArgs(cmd)
	return cmd
}

// Complete reads the global options and the files to merge.
func (o *ReportMergeOptions) Complete(f *cli.Factory, _ *cobra.Command, files []string) error {
	o.Global = f.Global
	o.Files = files
	return nil
}

// Validate has nothing to check before the files are read.
func (o *ReportMergeOptions) Validate() error { return nil }

// Run merges the files into one suite result.
func (o *ReportMergeOptions) Run(context.Context) (*cli.Outcome, error) {
	results := make([]*report.SuiteResult, 0, len(o.Files))
	for _, path := range o.Files {
		data, err := os.Open(path)
		if err != nil {
			return nil, cli.UsageErrorf("merge: %v", err)
		}
		r, err := report.ReadSuiteJSON(data)
		data.Close()
		if err != nil {
			return nil, cli.UsageErrorf("merge: %s: %v", path, err)
		}
		results = append(results, r)
	}
	merged, err := report.MergeSuites(results, o.Files)
	if err != nil {
		return nil, cli.UsageErrorf("merge: %v", err)
	}
	return cli.Suite(merged), nil
}
