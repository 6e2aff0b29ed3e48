package main

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"miotool/internal/cli"
	"miotool/internal/finddb"
	"miotool/internal/finder"
	"miotool/internal/handle"
	"miotool/internal/scenario/find"
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
reference, and the record goes to a user find-db in MIOpen's text format under
MIOPEN_USER_DB_PATH. --find-mode fast takes a find-db record when there is one
and skips benchmarking.

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

  # Time naive in full, as before the time bound existed
  MIOPEN_NAIVE_TIMEOUT=0 miotool find --problem naive-timeout-sim`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := opts.Complete(f, cmd); err != nil {
				return err
			}
			if !cmd.Flags().Changed("find-mode") && findModeSetInEnv(opts.Env) {
				opts.FindMode = findModeFromEnv(opts.Env.FindMode)
			}
			if _, err := finder.ParseMode(opts.FindMode); err != nil {
				return cli.UsageErrorf("--find-mode: %v", err)
			}
			if opts.Samples < 1 {
				return cli.UsageErrorf("--samples %d: want 1 or more", opts.Samples)
			}
			if runF != nil {
				return runF(opts)
			}
			return cli.ToolError(runFind(opts))
		},
	}
	cli.AddProblemFlags(cmd, f, &opts.Problem, "naive-long-%s")
	fl := cmd.Flags()
	fl.StringVar(&opts.FindMode, "find-mode", "normal", "normal (benchmark) or fast (use a find-db record when there is one); MIOPEN_FIND_MODE, when set, gives the default (NORMAL is normal, the others fast)")
	fl.IntVar(&opts.Samples, "samples", 7, "timed runs per solver after the warm-up")
	fl.Var(cli.NewEnumValue(&opts.Reclaim, streams.Worker, streams.Policies...), "reclaim", "how abandoned streams are reclaimed: lazy, guarded or worker")
	fl.Uint64Var(&opts.Seed, "seed", 1, "seed of the random input and weights")
	opts.AddDialectFlag(cmd)
	return cmd
}

// findModeSetInEnv reports whether MIOPEN_FIND_MODE was set (and usable).
// Unset, find benchmarks: that is what the command is for, although
// MIOpen's own default (dynamic hybrid) would take a find-db record.
func findModeSetInEnv(env cli.RuntimeEnv) bool {
	for _, s := range env.Settings {
		if s.Name == cli.EnvFindMode {
			return s.Source == cli.FromEnv
		}
	}
	return false
}

// findModeFromEnv maps MIOPEN_FIND_MODE to find's modes: the hybrid modes
// use the find-db when it has the problem, as fast does.
func findModeFromEnv(m cli.FindMode) string {
	if m == cli.FindModeNormal {
		return string(finder.ModeNormal)
	}
	return string(finder.ModeFast)
}

func runFind(opts *FindOptions) error {
	start := opts.Now()
	dev, r := opts.Open("find", start)
	if dev == nil {
		return cli.WriteResult(opts.IO, opts.Global.Format, r)
	}
	defer dev.Close()
	p, name, err := opts.Problem.Resolve(dev.Props().Backend)
	if err != nil {
		return err
	}
	if name != "" {
		r.Note("problem %s: %s", name, p)
	} else {
		r.Note("problem: %s", p)
	}
	h, err := handle.New(dev, handle.Options{Policy: opts.Reclaim, MaxDraining: streams.MaxDrainingFor(opts.Env.HWQueues)})
	if err != nil {
		return err
	}
	ts, err := finder.NewTensors(dev, p, nil, opts.Seed)
	if err != nil {
		h.Close()
		return err
	}
	mode, _ := finder.ParseMode(opts.FindMode)
	props := dev.Props()
	db := ""
	if opts.Env.UserDBPath != "" {
		db = finddb.UserFile(opts.Env.UserDBPath, props.Arch, props.ComputeUnits, props.Backend)
	}
	update, done := opts.Progress("find:")
	steps := 0
	res, ferr := finder.Find(opts.Context, h, ts, finder.Options{
		NaiveTimeoutPct: opts.Env.NaiveTimeoutPercent,
		Samples:         opts.Samples,
		Mode:            mode,
		UserDB:          db,
		Verify:          true,
		Log: func(format string, args ...any) {
			steps++
			update(steps, 0)
			opts.Verbosef(format, args...)
		},
	})
	done()
	afterFind := h.Tracker().Counters()
	// Teardown waits for the abandoned evaluation: after find, on purpose.
	teardownStart := time.Now()
	cerr := h.Close()
	terr := ts.Free()
	if ferr != nil {
		return fmt.Errorf("find: %w", ferr)
	}
	if cerr != nil {
		return fmt.Errorf("handle teardown: %w", cerr)
	}
	if terr != nil {
		return terr
	}
	r.Note("teardown (waits for abandoned evaluations) took %s", time.Since(teardownStart).Round(time.Millisecond))
	r.Note("reclaim policy %s, backlog cap %d (GPU_MAX_HW_QUEUES=%d)", opts.Reclaim, streams.MaxDrainingFor(opts.Env.HWQueues), opts.Env.HWQueues)
	find.Fill(r, res, afterFind, h.Tracker().Counters(), opts.Now())
	return cli.WriteResult(opts.IO, opts.Global.Format, r)
}
