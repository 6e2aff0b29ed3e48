// Package capture is `miotool capture`: its options, flags and the rendering
// of its cases.
package capture

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"miotool/internal/cli"
	"miotool/internal/cmd/libtarget"
	"miotool/internal/cmd/matrix"
	"miotool/internal/dnn/target"
	"miotool/internal/hip"
	"miotool/internal/report"
	"miotool/internal/scenario"
	capturescen "miotool/internal/scenario/capture"
	"miotool/internal/streams"
)

// CaptureOptions are the inputs of `miotool capture`.
type CaptureOptions struct {
	cli.Scenario
	Problem  cli.ProblemFlags
	Modes    []string
	Reclaims []string
	Variants []string
	Samples  int
	Repeat   int
	Seed     uint64
	Target   target.Name

	modes    []hip.CaptureMode
	policies []streams.Policy
	variants []scenario.Variant
}

// NewCmdCapture builds `miotool capture`; runF, when set, replaces the run function.
func NewCmdCapture(f *cli.Factory, runF func(*CaptureOptions) error) *cobra.Command {
	opts := &CaptureOptions{Scenario: cli.NewScenario(f)}
	cmd := &cobra.Command{
		Use:   "capture",
		Short: "Capture a convolution into a graph after find abandoned a naive evaluation (MIOpen #12121)",
		Long: `capture reproduces ROCm/rocm-libraries#12121 and checks its fix. A find on an
empty find-db lets the naive solver's evaluation time out; its stream is
abandoned with the kernel still running. Then a convolution is captured
through the library handle's launch path on a capturable non-blocking stream
in the given mode, the capture is ended, the graph instantiated and launched,
and its output checked against the CPU reference.

--reclaim picks how abandoned streams are reclaimed: lazy (every launch polls
them with a stream query: the pre-fix behaviour, refused during a capture, which
invalidates it), guarded (the launch-path sweep skips while capturing and runs
in relaxed mode), worker (a host callback and a worker thread, nothing on
the launch path: the merged fix) or poller (a thread of the tracker's own
queries the abandoned evaluation's done event in relaxed mode, then frees:
nothing on the launch path and no host callback, so it does not wait for the
runtime's callback thread; see docs/reclaim.md). --variant other-thread
captures on one thread while another thread launches through the handle whose
find abandoned the stream, which global mode still exposes.

The geometry flags (MIOpenDriver's) set the find's problem: without
--problem it is naive-timeout-sim on the simulator and naive-timeout-gpu on a
GPU, and each flag's default below is that problem's field; a flag changes
only its own field. The convolution captured afterwards is capture-small
(-n 1 -c 8 -H 12 -W 12 -k 8 -y 3 -x 3 -p 1 -q 1), whatever the flags say. A
problem whose find needs more device memory than the device has is refused
before anything is allocated (exit 2).

SIGINT or SIGTERM ends the run within two seconds with an INTERRUPTED result:
the runs that finished, the one the signal stopped (interrupted) and those
never reached (not run). --repeat is at most 10000 and the runs of one
invocation (repeats times combinations) at most 100000; --samples at most
1000.

With several modes, policies or variants, the table shows the expected outcome
(from the runtime's capture rules) beside each measured one and flags any
disagreement; the check passes when every case behaves as expected. A single
case passes when end-capture succeeds and the graph's output is right, and
fails with the code, e.g. hipErrorStreamCaptureInvalidated (901).`,
		Example: `  # The whole matrix: lazy fails under global capture, worker passes everywhere
  miotool capture --mode=all --reclaim=all

  # The pre-fix library in the reporter's configuration: fails with 901
  miotool capture --mode=global --reclaim=lazy

  # The merged fix, as a row for a PR's testing checklist
  miotool capture --mode=global --reclaim=worker --format markdown

  # Another thread launches while this one captures
  miotool capture --mode=all --reclaim=all --variant=other-thread`,
		Args: cobra.NoArgs,
		RunE: cli.DeviceRunE(f, opts, runF),
	}
	cli.AddProblemFlags(cmd, f, &opts.Problem, "naive-timeout-%s")
	fl := cmd.Flags()
	fl.StringSliceVar(&opts.Modes, "mode", []string{"global"}, "capture mode: "+cli.OrList(cli.WithAll(cli.StringsOf(hip.CaptureModes))))
	cli.AddReclaimListFlag(cmd, &opts.Reclaims, string(streams.Worker))
	fl.StringSliceVar(&opts.Variants, "variant", []string{"same-thread"}, "who launches during the capture: "+cli.OrList(cli.WithAll(cli.Names(scenario.Variants)))+" (all by default when several modes or policies are given)")
	cli.CompleteList(cmd, "mode", cli.WithAll(cli.StringsOf(hip.CaptureModes)))
	cli.CompleteList(cmd, "variant", cli.WithAll(cli.Names(scenario.Variants)))
	cli.AddSamplesFlag(cmd, &opts.Samples, 3)
	cli.AddRepeatFlag(cmd, &opts.Repeat, matrix.MaxRepeat)
	fl.Uint64Var(&opts.Seed, "seed", 1, "seed of the random data")
	fl.Var(cli.NewEnumValue(&opts.Target, target.Builtin, target.Names...), "target",
		"what runs find and the captured convolution: builtin (miotool's own mechanisms), miopen (libMIOpen, HIP) or cudnn (libcudnn, CUDA)")
	opts.AddDialectFlag(cmd)
	return cmd
}

// Complete reads the configuration and resolves the matrix the flags name:
// modes, policies and variants. A matrix run covers both variants unless
// --variant says otherwise.
func (o *CaptureOptions) Complete(f *cli.Factory, cmd *cobra.Command, _ []string) error {
	if err := o.Scenario.Complete(f, cmd); err != nil {
		return err
	}
	if err := o.parseMatrix(); err != nil {
		return err
	}
	if o.Target != target.Builtin {
		if cmd.Flags().Changed("reclaim") {
			return cli.UsageErrorf("--reclaim applies to --target=builtin only: a library reclaims its own streams")
		}
		o.policies = nil // the library reclaims its own streams
	}
	if !cmd.Flags().Changed("variant") && len(o.modes)*max(1, len(o.policies)) > 1 {
		o.variants = scenario.Variants
	}
	return nil
}

// Validate checks the counts against their bounds.
func (o *CaptureOptions) Validate() error {
	return matrix.ValidateCounts(o.Samples, o.Repeat, len(o.modes)*max(1, len(o.policies))*len(o.variants))
}

func (o *CaptureOptions) parseMatrix() error {
	var err error
	if o.modes, err = cli.ParseList(o.Modes, "--mode", hip.CaptureModes, hip.ParseCaptureMode); err != nil {
		return err
	}
	if o.policies, err = cli.ParseList(o.Reclaims, "--reclaim", streams.Policies, streams.ParsePolicy); err != nil {
		return err
	}
	o.variants, err = cli.ParseList(o.Variants, "--variant", scenario.Variants, scenario.ParseVariant)
	return err
}

// Device opens the selected backend's device, or, with --target, the
// device of the library's runtime once the library has loaded and
// supports it.
func (o *CaptureOptions) Device() cli.DeviceRequest {
	if o.Target != target.Builtin {
		return cli.DeviceRequest{Check: "capture", Open: func(check string, start time.Time) (hip.Device, *report.Result, func()) {
			return libtarget.Open(&o.Scenario, check, o.Target, start)
		}}
	}
	return o.Scenario.DeviceRequest("capture")
}

// RunOn runs the cases on d and judges them.
func (o *CaptureOptions) RunOn(ctx context.Context, d *cli.Device) (*report.Result, error) {
	if o.Target != target.Builtin {
		return runTargetCapture(ctx, o, d)
	}
	r := d.Result
	co, label, err := matrix.ScenarioProblems(&o.Scenario, &o.Problem, d.Props())
	if err != nil {
		return nil, err
	}
	co.Modes, co.Policies, co.Variants, co.Samples, co.Seed, co.Repeat = o.modes, o.policies, o.variants, o.Samples, o.Seed, o.Repeat
	if co.NaiveTimeoutPct == 0 {
		r.Note("MIOPEN_NAIVE_TIMEOUT=0: the time bound is off, nothing is abandoned, so no case can show the bug")
	}
	r.Note("find problem %s; captured problem %s", label, co.CaptureProblem)
	update, done := o.Progress("capture: case")
	co.Progress = update
	cases, err := capturescen.Run(ctx, d.Device, co)
	done()
	stop, err := matrix.Stopped(ctx, err, capturescen.Planned(co))
	if err != nil {
		return nil, fmt.Errorf("capture: %w", err)
	}
	fillCases(r, cases, d.Dialect(), stop, o.Now())
	return r, nil
}

// runTargetCapture is capture against a real library: its find on an empty
// find-db, then a capture of its forward convolution.
func runTargetCapture(ctx context.Context, opts *CaptureOptions, d *cli.Device) (*report.Result, error) {
	r := d.Result
	p, name, err := opts.Problem.Resolve(d.Props().Backend)
	if err != nil {
		return nil, err
	}
	r.Note("target %s; problem %s %s", opts.Target, name, p)
	for _, n := range target.NotesFor(nil, d.Device, opts.Target) {
		r.Note("%s", n)
	}
	update, done := opts.Progress("capture: case")
	to := capturescen.TargetOptions{
		Target: opts.Target, Modes: opts.modes, Variants: opts.variants, Problem: p,
		Seed: opts.Seed, Repeat: opts.Repeat, Log: opts.Verbosef, Progress: update,
	}
	cases, err := capturescen.RunTarget(ctx, d.Device, to)
	done()
	stop, err := matrix.Stopped(ctx, err, max(1, opts.Repeat)*len(opts.modes)*max(1, len(opts.variants)))
	if err != nil {
		return nil, fmt.Errorf("capture --target=%s: %w", opts.Target, err)
	}
	fillTargetCases(r, cases, d.Dialect(), stop, opts.Now())
	return r, nil
}
