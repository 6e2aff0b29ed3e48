// Package find is `miotool find`: its options, flags and the rendering of
// its result.
package find

import (
	"errors"
	"fmt"
	"strconv"

	"github.com/spf13/cobra"

	"miotool/internal/cli"
	"miotool/internal/finddb"
	"miotool/internal/finder"
	"miotool/internal/runenv"
	findscen "miotool/internal/scenario/find"
	"miotool/internal/streams"
)

// FindOptions are the inputs of `miotool find`.
type FindOptions struct {
	cli.Scenario
	Problem  cli.ProblemFlags
	FindMode string
	Samples  int
	Reclaim  streams.Policy
	Seed     uint64
}

// NewCmdFind builds `miotool find`; runF, when set, replaces the run function.
func NewCmdFind(f *cli.Factory, runF func(*FindOptions) error) *cobra.Command {
	opts := &FindOptions{Scenario: cli.NewScenario(f)}
	cmd := &cobra.Command{
		Use:   "find",
		Short: "Find the fastest solver for a convolution, with the naive solver's evaluation bounded in time",
		Long: `find evaluates every applicable solver for a forward convolution the way
MIOpen's find does: a warm-up and timed samples per solver, measured with
events, high outliers dropped by modified z-score. The naive solver comes last,
on a disposable stream from the stream tracker, with a deadline of
MIOPEN_NAIVE_TIMEOUT percent (default 300) of the best time so far; if it
overruns, the stream is abandoned with its kernel still running, and the
tracker reclaims it (--reclaim). MIOPEN_NAIVE_TIMEOUT=0 times naive in full.

Results are ranked, every timed solver's output is checked against a CPU
reference, and the record is merged into the user find-db in MIOpen's text
format under MIOPEN_USER_DB_PATH: miotool's items on the problem's line are
added or updated, and every other line, item and byte of the file is kept
as it was, with its mode and owner. A find-db that cannot be written is a
warning; the result is printed all the same.

--find-mode follows MIOpen's find modes. fast takes a find-db record naming
one of miotool's solvers when there is one and otherwise falls back to
immediate mode: the TunaNet heuristic ranks miotool's solvers and the first
runs once, not benchmarked (and nothing is written). hybrid and
dynamic-hybrid take a record too, and benchmark when there is none.

The problem comes from MIOpenDriver's flags (-n -c -H -W -k -y -x -p -q -u -v
-l -j -g, or their long names; -v is the stride here, as in MIOpenDriver, so
verbose output is --verbose) or from --problem NAME. With neither, the problem
is naive-long-sim on the simulator and naive-long-gpu on a GPU.

PASS when find stayed within its bound and the chosen solver (and every other
timed one) verified.`,
		Example: `  # The default problem for this device: naive times out and is abandoned
  miotool find

  # A MIOpenDriver command line
  miotool find -n 32 -c 64 -H 56 -W 56 -k 64 -y 3 -x 3 -p 1 -q 1

  # A named problem, then again from the find-db without benchmarking
  miotool find --problem resnet50-conv4
  miotool find --problem resnet50-conv4 --find-mode fast

  # Use MIOpen's own user find-db folder: its records are kept as they are
  MIOPEN_USER_DB_PATH=~/.config/miopen miotool find --problem resnet50-conv4

  # Time naive in full, as before the time bound existed
  MIOPEN_NAIVE_TIMEOUT=0 miotool find --problem naive-timeout-sim`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := opts.Complete(f, cmd); err != nil {
				return err
			}
			if err := opts.Validate(); err != nil {
				return err
			}
			if runF != nil {
				return runF(opts)
			}
			return opts.Run()
		},
	}
	cli.AddProblemFlags(cmd, f, &opts.Problem, "naive-long-%s")
	fl := cmd.Flags()
	fl.StringVar(&opts.FindMode, "find-mode", "normal", "normal (benchmark), fast (a find-db record, else the immediate-mode heuristic, no benchmark), hybrid or dynamic-hybrid (a find-db record, else benchmark); MIOPEN_FIND_MODE, when set, gives the default")
	fl.IntVar(&opts.Samples, "samples", 7, "timed runs per solver after the warm-up")
	fl.Var(cli.NewEnumValue(&opts.Reclaim, streams.Worker, streams.Policies...), "reclaim", "how abandoned streams are reclaimed: "+cli.OrList(streams.Policies))
	cli.CompleteValues(cmd, "find-mode", cli.Names(finder.Modes))
	fl.Uint64Var(&opts.Seed, "seed", 1, "seed of the random input and weights")
	opts.AddDialectFlag(cmd)
	return cmd
}

// Complete reads the configuration and the runtime variables; a usable
// MIOPEN_FIND_MODE gives --find-mode's default.
func (o *FindOptions) Complete(f *cli.Factory, cmd *cobra.Command) error {
	if err := o.Scenario.Complete(f, cmd); err != nil {
		return err
	}
	if !cmd.Flags().Changed("find-mode") && findModeSetInEnv(o.Env) {
		o.FindMode = strconv.Itoa(int(o.Env.FindMode))
	}
	return nil
}

// findModeSetInEnv reports whether MIOPEN_FIND_MODE was set (and usable).
// Unset, find benchmarks: that is what the command is for, although
// MIOpen's own default (dynamic hybrid) would take a find-db record.
func findModeSetInEnv(env runenv.Env) bool {
	for _, s := range env.Settings {
		if s.Name == runenv.EnvFindMode {
			return s.Source == runenv.FromEnv
		}
	}
	return false
}

// Validate checks what can be checked before the device opens: the find
// mode, the sample count, and a user-db folder that is a file (a usage
// error, rather than a warning after a long benchmark).
func (o *FindOptions) Validate() error {
	if _, err := finder.ParseMode(o.FindMode); err != nil {
		return cli.UsageErrorf("--find-mode: %v", err)
	}
	if o.Samples < 1 {
		return cli.UsageErrorf("--samples %d: want 1 or more", o.Samples)
	}
	if o.Env.UserDBPath != "" {
		if err := finddb.CheckDir(o.Env.UserDBPath); errors.Is(err, finddb.ErrNotAFolder) {
			return cli.UsageErrorf("%s=%v", runenv.EnvUserDBPath, err)
		}
	}
	return nil
}

// Run finds and writes the result.
func (o *FindOptions) Run() error {
	start := o.Now()
	dev, r := o.Open("find", start)
	if dev == nil {
		return cli.RenderResult(o.IO, o.Global.Format, r)
	}
	defer dev.Close()
	p, name, err := o.Problem.Resolve(dev.Props().Backend)
	if err != nil {
		return err
	}
	mode, _ := finder.ParseMode(o.FindMode)
	update, done := o.Progress("find:")
	so := findscen.Options{
		Problem: p, ProblemName: name, Mode: mode, Samples: o.Samples, Reclaim: o.Reclaim,
		HWQueues: o.Env.HWQueues, NaiveTimeoutPct: o.Env.NaiveTimeoutPercent, Seed: o.Seed,
		DBDir: o.Env.UserDBPath, Progress: update, Logf: o.Verbosef,
		Warnf: func(format string, args ...any) {
			fmt.Fprintf(o.IO.ErrOut, "miotool: warning: "+format+"\n", args...)
		},
	}
	out, err := findscen.Run(o.Context, dev, so)
	done()
	if err != nil {
		return err
	}
	fill(r, so, out, o.Now())
	return cli.RenderResult(o.IO, o.Global.Format, r)
}
