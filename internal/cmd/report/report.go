// Package report is `miotool report --suite` and `miotool report merge`:
// their options, flags and exits.
package report

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/spf13/cobra"

	"miotool/internal/buildinfo"
	"miotool/internal/cli"
	"miotool/internal/report"
	"miotool/internal/suite"
)

// ReportOptions are the inputs of `miotool report --suite`.
type ReportOptions struct {
	IO          *cli.IOStreams
	Global      cli.GlobalOptions
	Build       buildinfo.Info
	ConfigUsed  string
	Now         func() time.Time
	Executable  func() (string, error)
	Hostname    func() (string, error)
	NumCPU      func() int
	Environ     func() []string
	ProgressBar func(label string) *cli.ProgressBar

	SuiteFile string
	Repeat    int
	Shuffle   bool
	// Seed orders --shuffle; 0 draws a seed, which the result records.
	Seed    uint64
	CPULoad int
	Env     []string
	Timeout time.Duration
	Host    string
	suiteFlags

	variants []suite.Variant
}

// NewCmdReport builds `miotool report` and its `merge` subcommand; runF,
// when set, replaces the run function of `report --suite`.
func NewCmdReport(f *cli.Factory, runF func(*ReportOptions) error) *cobra.Command {
	opts := &ReportOptions{
		IO: f.IOStreams, Build: f.Build, Now: f.Now,
		Executable: os.Executable, Hostname: os.Hostname, NumCPU: f.NumCPU, Environ: os.Environ, ProgressBar: f.ProgressBar,
	}
	cmd := &cobra.Command{
		Use:   "report --suite FILE",
		Short: "Run a suite of checks and print a PR Testing Checklist; merge the suites of several hosts",
		Long: `report --suite runs a suite file: named miotool checks, each a command line
with the verdict it is expected to give, e.g. "capture --mode=global
--reclaim=lazy" expected to FAIL and the same with --reclaim=worker expected to
PASS. Each run of a check is its own miotool process (this binary, with the
check's arguments and --format json), so a crash or a hang is an ERROR of that
check, not the end of the suite.

The output is the Testing Checklist of a pull request (Test | Command |
Devices | Status), every row naming the devices it ran on, with one wording per
outcome: "Passed (24/24)", "Fails as expected (20/20 runs failed)", "Failed
(1/20 runs failed; expected PASS)", "Error (1/1 run errored; expected PASS):
<why>", "Interrupted (2 of 20 runs finished): <why>", "Not run (<why>)", and
after a colon what the check found ("Passed (24/24): Fails with
--reclaim=lazy (global), passes with --reclaim=worker"). A count without a unit
is the sub-tests of one run; runs are counted as runs. --format json writes the
miotool/suite/v4
document that "report merge" reads; --junit FILE also writes JUnit XML for CI
systems, --export-markdown FILE and --export-json FILE the Markdown and the
JSON, beside the --format view on standard output.

--repeat runs every check N times; --shuffle runs each pass in a random order
drawn from --seed (0, the default, draws a seed, which the result records);
--cpu-load keeps N busy workers (at most 4 per core) running beside the
checks; each --env KEY=VALUE runs the whole suite once more with that
environment (KEY=VALUE,KEY2=VALUE2 sets several).
--backend and --device, when given, are passed on to every check that does not
choose its own.

Exit status: 0 when every check gave its expected verdict, 1 when one did not,
2 for a bad suite file or flag (the output files are checked before the suite
runs: each can be written, none is the suite or config file), 4
when no check ran (every one skipped, or the suite has none): nothing passed.

Suite file (YAML):

    suite: pr12265
    title: Naive-evaluation streams reclaimed outside graph captures
    workdir: ../..          # where checks run, relative to this file
    timeout: 5m             # per run (default 10m)
    env: {MIOPEN_NAIVE_TIMEOUT: "300"}
    checks:
      - name: capture-global-lazy
        command: miotool capture --mode=global --reclaim=lazy
        expect: FAIL        # PASS, FAIL or SKIP
      - name: stress-unlocked
        command: miotool stress-threads --cache=unlocked --runs 20
        expect: FAIL
        timeout: 20m
        skip: needs a GPU   # listed as "Not run (needs a GPU)"`,
		Example: `  # The Testing Checklist of PR #12265 as Markdown
  miotool report --suite configs/suites/pr12265.yaml --format markdown

  # Twenty shuffled passes with both CPU cores busy, and again with 3 hardware queues
  miotool report --suite configs/suites/pr12265.yaml --repeat 20 --shuffle --seed 7 \
      --cpu-load 2 --env GPU_MAX_HW_QUEUES=3

  # On each node of a fleet, then one table
  miotool report --suite configs/suites/pr12265.yaml --format json > "$(hostname).json"
  miotool report merge node*.json --format markdown

  # Shard 2 of 4 (a CI matrix's second job), balanced by the last merged result
  miotool report --suite configs/suites/pr12265.yaml --shard 2/4 --durations last.json \
      --format json > shard-2.json

  # The host's four GPUs side by side, each check pinned to one
  miotool report --suite configs/suites/rocm27477.yaml --devices 0,1,2,3

  # JUnit for CI beside the text table
  miotool report --suite configs/suites/rocm27477.yaml --junit rocm27477.xml`,
		Args: cobra.NoArgs,
		RunE: cli.RunE(f, opts, runF),
	}
	fl := cmd.Flags()
	fl.SortFlags = false
	fl.StringVar(&opts.SuiteFile, "suite", "", "the suite file to run (see configs/suites/)")
	fl.IntVar(&opts.Repeat, "repeat", 1, "runs of every check")
	fl.BoolVar(&opts.Shuffle, "shuffle", false, "run each pass over the checks in a random order (see --seed)")
	fl.Uint64Var(&opts.Seed, "seed", 0, "seed of --shuffle's order; 0 draws one, which the result records")
	fl.IntVar(&opts.CPULoad, "cpu-load", 0, "keep N busy CPU workers running beside the checks (at most 4 per core)")
	fl.StringArrayVar(&opts.Env, "env", nil, "run the suite again with KEY=VALUE set (repeatable; KEY=VALUE,KEY2=VALUE2 sets several)")
	fl.DurationVar(&opts.Timeout, "timeout", 0, "bound on each run of a check, in place of the suite file's (default: the file's, else 10m)")
	fl.StringVar(&opts.Host, "host", "", "host name recorded in the result (default: this machine's)")
	addSuiteFlags(cmd, &opts.suiteFlags)
	_ = cmd.MarkFlagFilename("suite", "yaml", "yml")
	cli.MarkInputFile(cmd, "suite")
	cmd.AddCommand(newCmdReportMerge(f, nil))
	return cmd
}

// Complete reads the global options and the --env variants.
func (o *ReportOptions) Complete(f *cli.Factory, cmd *cobra.Command, _ []string) error {
	o.Global = f.Global
	o.ConfigUsed = f.ConfigUsed
	o.spellings = SuiteSpellings(cmd.Root())
	variants, err := suite.ParseVariants(o.Env)
	if err != nil {
		return cli.UsageErrorf("--env %v", err)
	}
	o.variants = variants
	return o.completeSuiteFlags(f.LookupEnv)
}

// Validate checks, before the suite runs, that the suite file is named, and
// the counts and durations. The files the output flags name were checked
// before (they can be written, none is the suite file).
func (o *ReportOptions) Validate() error {
	switch {
	case o.SuiteFile == "":
		return cli.UsageErrorf("report: give a suite file with --suite FILE, or merge results with `miotool report merge`")
	case o.Repeat < 1:
		return cli.UsageErrorf("--repeat %d: want 1 or more", o.Repeat)
	case cli.CheckCPULoad(o.CPULoad, o.NumCPU()) != nil:
		return cli.CheckCPULoad(o.CPULoad, o.NumCPU())
	case o.Timeout < 0:
		return cli.UsageErrorf("--timeout %v: want a positive duration such as 5m", o.Timeout)
	case o.Seed != 0 && !o.Shuffle:
		return cli.UsageErrorf("--seed %d: the seed orders --shuffle; add --shuffle", o.Seed)
	}
	if err := o.validateShardFlags(); err != nil {
		return err
	}
	return o.validateSuiteFlags()
}

// Run runs the suite and returns its result, judged check by check. An
// interruption leaves the result INTERRUPTED with the runs made before.
func (o *ReportOptions) Run(ctx context.Context) (*cli.Outcome, error) {
	file, err := o.loadSuite()
	if err != nil {
		return nil, err
	}
	weights, err := o.durations()
	if err != nil {
		return nil, err
	}
	exe, err := o.Executable()
	if err != nil {
		return nil, fmt.Errorf("finding the miotool binary to run checks with: %w", err)
	}
	host := o.Host
	if host == "" {
		if host, err = o.Hostname(); err != nil {
			host = ""
		}
	}
	seed := o.Seed
	if o.Shuffle && seed == 0 {
		seed = uint64(o.Now().UnixNano())
	}
	passOn := o.passedOn()
	bar := o.ProgressBar("suite " + file.Name)
	runner := &suite.Runner{
		Command:    []string{exe},
		Args:       func(c suite.Check) []string { return checkArgs(c.Args, passOn) },
		ResultArgs: cli.ResultArgs(),
		ResultFlag: cli.ResultFileFlag,
		Environ:    o.Environ(),
		Host:       host,
		Tool:       report.Tool{Version: o.Build.Version, Commit: o.Build.Commit, GoVersion: o.Build.GoVersion},
		Now:        o.Now,
		Progress: func(done, total int, current string) {
			// The check's name is what a narrow terminal must keep.
			if current != "" {
				bar.SetLabel(current)
			}
			bar.Update(done, total)
		},
	}
	res, runErr := runner.Run(ctx, file, suite.Options{
		Repeat: o.Repeat, Shuffle: o.Shuffle, Seed: seed, CPULoad: o.CPULoad,
		Variants: o.variants, Timeout: o.Timeout, Jobs: o.jobs(),
		Shard: o.shard, Durations: weights, DurationsFrom: o.Durations, Devices: o.devices,
	})
	bar.Done()
	if res == nil {
		return nil, runErr
	}
	if errors.Is(runErr, context.Canceled) {
		runErr = nil // the result says INTERRUPTED and holds the runs made before
	}
	if runErr != nil {
		runErr = fmt.Errorf("suite %s: %w", file.Name, runErr)
	}
	return cli.Suite(res), runErr
}
