package main

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"miotool/internal/cli"
	"miotool/internal/hip"
	"miotool/internal/scenario/capture"
	"miotool/internal/streams"
)

// ReplayOptions are the inputs of `miotool replay`.
type ReplayOptions struct {
	cli.Scenario
	Problem  cli.ProblemFlags
	Mode     string
	Reclaims []string
	Replays  int
	Deadline time.Duration
	Samples  int
	Repeat   int
	Seed     uint64

	mode     hip.CaptureMode
	policies []streams.Policy
}

// NewCmdReplay builds `miotool replay`; runF, when set, replaces the run function.
func NewCmdReplay(f *cli.Factory, runF func(*ReplayOptions) error) *cobra.Command {
	opts := &ReplayOptions{Scenario: cli.NewScenario(f)}
	cmd := &cobra.Command{
		Use:   "replay",
		Short: "Tune, capture, then only replay: is the abandoned evaluation's scratch released?",
		Long: `replay runs the tune -> capture -> replay-only workload: a find abandons a naive
evaluation (its scratch buffer stays pinned while its kernel runs), a
convolution is captured into a graph, and from then on the graph is only
replayed, with no other call into the library. The check: the abandoned
evaluation's scratch is freed within --deadline of the last replay being queued.

With --reclaim=guarded (the first revision of the fix) reclaim happens only on
the launch path, which a replay-only workload never takes, so the scratch stays
pinned: FAIL. With --reclaim=worker a host callback queued behind the
evaluation hands the slot to the tracker's worker thread, which frees it: PASS.
--reclaim=lazy loses the capture itself under global mode.`,
		Example: `  # Guarded fails, worker passes
  miotool replay --reclaim=all

  # The merged fix only, 100 replays, as a PR checklist row
  miotool replay --reclaim=worker --replays 100 --format markdown`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := opts.Complete(f, cmd); err != nil {
				return err
			}
			var err error
			if opts.mode, err = hip.ParseCaptureMode(opts.Mode); err != nil {
				return cli.UsageErrorf("--mode: %v", err)
			}
			if opts.policies, err = parseList(opts.Reclaims, "--reclaim", streams.Policies, streams.ParsePolicy); err != nil {
				return err
			}
			switch {
			case opts.Replays < 1:
				return cli.UsageErrorf("--replays %d: want 1 or more", opts.Replays)
			case opts.Deadline <= 0:
				return cli.UsageErrorf("--deadline %v: want a positive duration such as 5s", opts.Deadline)
			case opts.Samples < 1:
				return cli.UsageErrorf("--samples %d: want 1 or more", opts.Samples)
			case opts.Repeat < 1:
				return cli.UsageErrorf("--repeat %d: want 1 or more", opts.Repeat)
			}
			if runF != nil {
				return runF(opts)
			}
			return cli.ToolError(runReplay(opts))
		},
	}
	cli.AddProblemFlags(cmd, f, &opts.Problem, "naive-timeout-%s")
	fl := cmd.Flags()
	fl.StringVar(&opts.Mode, "mode", "global", "capture mode: global, thread-local or relaxed")
	fl.StringSliceVar(&opts.Reclaims, "reclaim", []string{"all"}, "reclaim policy: lazy, guarded, worker, or all")
	fl.IntVar(&opts.Replays, "replays", 20, "graph launches")
	fl.DurationVar(&opts.Deadline, "deadline", 10*time.Second, "how long after the last replay is queued the scratch must be freed")
	fl.IntVar(&opts.Samples, "samples", 3, "timed runs per solver in the scenario's find")
	fl.IntVar(&opts.Repeat, "repeat", 1, "run every case this many times and count the outcomes")
	fl.Uint64Var(&opts.Seed, "seed", 1, "seed of the random data")
	opts.AddDialectFlag(cmd)
	return cmd
}

func runReplay(opts *ReplayOptions) error {
	start := opts.Now()
	dev, r := opts.Open("replay", start)
	if dev == nil {
		return cli.WriteResult(opts.IO, opts.Global.Format, r)
	}
	defer dev.Close()
	co, label, err := scenarioProblems(&opts.Scenario, &opts.Problem, dev.Props().Backend)
	if err != nil {
		return err
	}
	co.Policies, co.Samples, co.Seed, co.Repeat = opts.policies, opts.Samples, opts.Seed, opts.Repeat
	r.Note("find problem %s; captured problem %s; capture mode %s", label, co.CaptureProblem, opts.mode)
	update, done := opts.Progress("replay: policy")
	n := 0
	co.Log = func(format string, args ...any) {
		if len(format) > 7 && format[:7] == "replay " {
			n++
			update(n, len(co.Policies)*co.Repeat)
		}
		opts.Verbosef(format, args...)
	}
	cases, err := capture.RunReplay(opts.Context, dev, capture.ReplayOptions{
		Options:         co,
		Mode:            opts.mode,
		Replays:         opts.Replays,
		ReleaseDeadline: opts.Deadline,
	})
	done()
	if err != nil {
		return fmt.Errorf("replay: %w", err)
	}
	capture.FillReplay(r, cases, dev.Dialect(), words, opts.Now())
	return cli.WriteResult(opts.IO, opts.Global.Format, r)
}
