// Package replay is `miotool replay`: its options, flags and the rendering
// of its cases.
package replay

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"miotool/internal/cli"
	"miotool/internal/cmd/matrix"
	"miotool/internal/hip"
	"miotool/internal/report"
	capturescen "miotool/internal/scenario/capture"
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
--reclaim=lazy loses the capture itself under global mode.

The geometry flags set the find's problem as for capture: without --problem it
is naive-timeout-sim on the simulator and naive-timeout-gpu on a GPU (each
flag's default below is that problem's field, and a flag changes only its
own); the graph replays capture-small. Replays are queued a thousand at a time
with at most two batches ahead of the device, so memory stays flat however
many are asked for.

SIGINT or SIGTERM ends the run within two seconds with an INTERRUPTED result
holding the runs that finished. Bounds: --replays at most 1000000,
--deadline at most 1h, --repeat at most 10000 (and 100000 runs in all),
--samples at most 1000.`,
		Example: `  # Guarded fails, worker passes
  miotool replay --reclaim=all

  # The merged fix only, 100 replays, as a PR checklist row
  miotool replay --reclaim=worker --replays 100 --format markdown`,
		Args: cobra.NoArgs,
		RunE: cli.DeviceRunE(f, opts, runF),
	}
	cli.AddProblemFlags(cmd, f, &opts.Problem, "naive-timeout-%s")
	fl := cmd.Flags()
	fl.StringVar(&opts.Mode, "mode", "global", "capture mode: "+cli.OrList(cli.StringsOf(hip.CaptureModes)))
	cli.AddReclaimListFlag(cmd, &opts.Reclaims, "all")
	cli.CompleteValues(cmd, "mode", cli.StringsOf(hip.CaptureModes))
	fl.IntVar(&opts.Replays, "replays", 20, fmt.Sprintf("graph launches (at most %d)", MaxReplays))
	fl.DurationVar(&opts.Deadline, "deadline", 10*time.Second, fmt.Sprintf("how long after the last replay is queued the scratch must be freed (at most %s)", maxDeadlineText))
	cli.AddSamplesFlag(cmd, &opts.Samples, 3)
	cli.AddRepeatFlag(cmd, &opts.Repeat, matrix.MaxRepeat)
	fl.Uint64Var(&opts.Seed, "seed", 1, "seed of the random data")
	opts.AddDialectFlag(cmd)
	return cmd
}

// Complete reads the configuration and resolves the mode and policies the
// flags name.
func (o *ReplayOptions) Complete(f *cli.Factory, cmd *cobra.Command, _ []string) error {
	if err := o.Scenario.Complete(f, cmd); err != nil {
		return err
	}
	var err error
	if o.mode, err = hip.ParseCaptureMode(o.Mode); err != nil {
		return cli.UsageErrorf("--mode: %v", err)
	}
	o.policies, err = cli.ParseList(o.Reclaims, "--reclaim", streams.Policies, streams.ParsePolicy)
	return err
}

const (
	// MaxReplays bounds --replays: the scratch is released within
	// milliseconds of the abandoned kernel's end, so a replay-only
	// workload of a million launches is far longer than the check needs.
	// It takes seconds on a GPU (a few µs a launch) and one to three
	// minutes on the simulator (5,000 to 20,000 replays a second on two
	// cores, busy or not); ten million would take it half an hour.
	MaxReplays = 1_000_000
	// MaxDeadline bounds --deadline: a release that has not come within
	// an hour will not come, and a policy that never releases (guarded)
	// waits the whole deadline.
	MaxDeadline     = time.Hour
	maxDeadlineText = "1h"
)

// Validate checks the counts and the deadline against their bounds.
func (o *ReplayOptions) Validate() error {
	switch {
	case o.Deadline <= 0:
		return cli.UsageErrorf("--deadline %v: want a positive duration such as 5s", o.Deadline)
	case o.Deadline > MaxDeadline:
		return cli.UsageErrorf("--deadline %v: at most %s", o.Deadline, maxDeadlineText)
	}
	if err := cli.AtLeastOne(cli.Count{Flag: "--replays", N: o.Replays}); err != nil {
		return err
	}
	if o.Replays > MaxReplays {
		return cli.UsageErrorf("--replays %d: at most %d", o.Replays, MaxReplays)
	}
	return matrix.ValidateCounts(o.Samples, o.Repeat, len(o.policies))
}

// Device opens the selected backend's device.
func (o *ReplayOptions) Device() cli.DeviceRequest { return o.Scenario.DeviceRequest("replay") }

// RunOn runs the workload once per policy on d and judges it.
func (o *ReplayOptions) RunOn(ctx context.Context, d *cli.Device) (*report.Result, error) {
	r := d.Result
	co, label, err := matrix.ScenarioProblems(&o.Scenario, &o.Problem, d.Props())
	if err != nil {
		return nil, err
	}
	co.Policies, co.Samples, co.Seed, co.Repeat = o.policies, o.Samples, o.Seed, o.Repeat
	r.Note("find problem %s; captured problem %s; capture mode %s", label, co.CaptureProblem, o.mode)
	update, done := o.Progress("replay: policy")
	co.Progress = update
	ro := capturescen.ReplayOptions{
		Options:         co,
		Mode:            o.mode,
		Replays:         o.Replays,
		ReleaseDeadline: o.Deadline,
	}
	cases, err := capturescen.RunReplay(ctx, d.Device, ro)
	done()
	stop, err := matrix.Stopped(ctx, err, capturescen.PlannedReplays(ro))
	if err != nil {
		return nil, fmt.Errorf("replay: %w", err)
	}
	fillCases(r, cases, d.Dialect(), stop, o.Now())
	return r, nil
}
