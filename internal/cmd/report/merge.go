package report

import (
	"context"
	"errors"
	"fmt"
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
	// AllowMissingShards merges the shards there are of a split run some
	// of whose shards left no result; the result names the others.
	AllowMissingShards bool
}

// allowMissingShardsFlag takes what is there of a set of shards.
const allowMissingShardsFlag = "allow-missing-shards"

func newCmdReportMerge(f *cli.Factory, runF func(*ReportMergeOptions) error) *cobra.Command {
	opts := &ReportMergeOptions{IO: f.IOStreams}
	cmd := &cobra.Command{
		Use:   "merge RESULT.json...",
		Short: "Merge the suite results of several hosts into one Testing Checklist",
		Long: `merge reads suite results written by "miotool report --suite ... --format
json" (schema miotool/suite/v4; v3, v2 and v1 files are read too), typically one per
host of a fleet, and single checks' results ("miotool capture --format json"),
each a suite of one check on its host, and prints one table: a check that ran on several hosts is one row
whose Devices cell lists every device, with the host after a device name that
more than one host has ("NVIDIA H200 (sm_90) on node07"), and whose status
counts the runs of all hosts. --format json writes the merged result in the same schema, so merged
results can be merged again.

A run made on another backend or dialect than its check's command asks for
(--backend, --dialect: a --dialect cuda check merged from a HIP host) is not
compared: the check is an ERROR that says what ran where.

Shards of one split run (report --suite --shard) merge into the run of the whole
suite: each shard's result lists every check with the shard that runs it, and
the merge keeps the suite's order. Every shard must be there, each once: a set
with a shard given twice is refused, and so is one with a shard missing, naming
it, unless --allow-missing-shards takes what is there; the checklist then names
the missing shards in its header and summary, each of their checks is "Not run
(shard 2/4 missing)", and the merge is never PASS (ERROR, unless a check failed
or was interrupted).

Exit status: 0 when every check met its expectation on every host, 1 when one
did not, 3 when a check could not be compared or a file says miotool failed,
130 or 143 when an input was interrupted (the merge holds what finished, and
says which file), 2 when a file cannot be read or is not a suite result, when
a number in it is out of range or a run's verdict contradicts its exit code
(naming the file and the field), when a result ran nothing (no checks, or none
with a run: it passed nothing), when a suite run appears twice (the same file
given twice, or a run already inside a merged result), which would count its
runs twice, or when a shard is given twice, or is missing without
--allow-missing-shards.`,
		Example: `  # One table from a Slurm job array's results (scripts/slurm-suite.sh)
  miotool report merge results/*.json --format markdown

  # And a JUnit file for CI
  miotool report merge node1.json node2.json --junit fleet.xml

  # The shards of a CI matrix one of whose jobs left no result
  miotool report merge shard-1.json shard-2.json shard-4.json --allow-missing-shards`,
		Args: cobra.MinimumNArgs(1),
		ValidArgsFunction: func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
			return []string{"json"}, cobra.ShellCompDirectiveFilterFileExt
		},
		RunE: cli.RunE(f, opts, runF),
	}
	cmd.Flags().BoolVar(&opts.AllowMissingShards, allowMissingShardsFlag, false,
		"merge the shards there are of a split run some of whose shards are missing; the checklist names the missing ones")
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
	merged, err := report.MergeSuitesWith(results, o.Files, report.MergeOptions{TakeMissingShards: o.AllowMissingShards})
	var missing *report.MissingShardsError
	switch {
	case errors.As(err, &missing):
		return nil, cli.UsageErrorf("merge: %v with --%s", err, allowMissingShardsFlag)
	case err != nil:
		return nil, cli.UsageErrorf("merge: %v", err)
	}
	out := cli.Suite(merged)
	if merged.Verdict() == report.Interrupted {
		// The merge itself was not interrupted: say why it exits as a
		// run a signal stopped does.
		out = out.WithMessage(&cli.ExitError{Code: merged.ExitCode(),
			Err: fmt.Errorf("merge: an input was interrupted (%s): the merged result is INTERRUPTED and holds what finished", merged.Interrupted)})
	}
	return out, nil
}
