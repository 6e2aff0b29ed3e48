// Package capture is `miotool capture`: its options, flags and the rendering
// of its cases.
package capture

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"miotool/configs"
	"miotool/internal/cli"
	"miotool/internal/cmd/libtarget"
	"miotool/internal/conv"
	"miotool/internal/dnn/target"
	"miotool/internal/finder"
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
	cli.AddProblemFlags(cmd, f, &opts.Problem, "naive-timeout-%s")
	fl := cmd.Flags()
	fl.StringSliceVar(&opts.Modes, "mode", []string{"global"}, "capture mode: "+cli.OrList(cli.WithAll(cli.StringsOf(hip.CaptureModes))))
	fl.StringSliceVar(&opts.Reclaims, "reclaim", []string{"worker"}, "reclaim policy: "+cli.OrList(cli.WithAll(cli.Names(streams.Policies))))
	fl.StringSliceVar(&opts.Variants, "variant", []string{"same-thread"}, "who launches during the capture: "+cli.OrList(cli.WithAll(cli.Names(scenario.Variants)))+" (all by default when several modes or policies are given)")
	cli.CompleteList(cmd, "mode", cli.WithAll(cli.StringsOf(hip.CaptureModes)))
	cli.CompleteList(cmd, "reclaim", cli.WithAll(cli.Names(streams.Policies)))
	cli.CompleteList(cmd, "variant", cli.WithAll(cli.Names(scenario.Variants)))
	fl.IntVar(&opts.Samples, "samples", 3, fmt.Sprintf("timed runs per solver in the scenario's find (at most %d)", MaxSamples))
	fl.IntVar(&opts.Repeat, "repeat", 1, fmt.Sprintf("run every case this many times and count the outcomes (at most %d)", MaxRepeat))
	fl.Uint64Var(&opts.Seed, "seed", 1, "seed of the random data")
	fl.Var(cli.NewEnumValue(&opts.Target, target.Builtin, target.Names...), "target",
		"what runs find and the captured convolution: builtin (miotool's own mechanisms), miopen (libMIOpen, HIP) or cudnn (libcudnn, CUDA)")
	opts.AddDialectFlag(cmd)
	return cmd
}

// Complete reads the configuration and resolves the matrix the flags name:
// modes, policies and variants. A matrix run covers both variants unless
// --variant says otherwise.
func (o *CaptureOptions) Complete(f *cli.Factory, cmd *cobra.Command) error {
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

// Bounds of the counts capture and replay take. Each bound is far past
// any use, so that a count that cannot finish in reason (or that a typo
// made) is refused up front rather than run for hours.
const (
	// MaxSamples: find trims its samples by modified z-score, which
	// settles within tens; the scenario's find only has to abandon naive.
	MaxSamples = 1000
	// MaxRepeat: ten thousand runs of a case put a failure rate of one in
	// a few thousand within reach; a case takes a fraction of a second on
	// a GPU and about a second on the simulator, so more belongs in
	// several invocations merged with 'miotool report merge'.
	MaxRepeat = 10000
	// MaxRuns bounds the runs of one invocation, repeats times
	// combinations: each run's facts are kept for the result (a few
	// hundred bytes each).
	MaxRuns = 100000
)

// ValidateCounts checks --samples and --repeat against their bounds, and
// the runs they make with combinations cases each.
func ValidateCounts(samples, repeat, combinations int) error {
	if err := cli.AtLeastOne(cli.Count{Flag: "--samples", N: samples}, cli.Count{Flag: "--repeat", N: repeat}); err != nil {
		return err
	}
	switch {
	case samples > MaxSamples:
		return cli.UsageErrorf("--samples %d: at most %d", samples, MaxSamples)
	case repeat > MaxRepeat:
		return cli.UsageErrorf("--repeat %d: at most %d (merge the results of several runs with 'miotool report merge')", repeat, MaxRepeat)
	case repeat*combinations > MaxRuns:
		return cli.UsageErrorf("--repeat %d of %d combinations is %d runs: at most %d in one invocation", repeat, combinations, repeat*combinations, MaxRuns)
	}
	return nil
}

// Validate checks the counts against their bounds.
func (o *CaptureOptions) Validate() error {
	return ValidateCounts(o.Samples, o.Repeat, len(o.modes)*max(1, len(o.policies))*len(o.variants))
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

// ScenarioProblems resolves the find problem and the captured one, for
// capture and replay, and refuses (exit 2) a pair whose find and capture
// need more device memory than the device has, before anything is
// allocated.
func ScenarioProblems(s *cli.Scenario, pf *cli.ProblemFlags, props hip.Props) (capturescen.Options, string, error) {
	fp, name, err := pf.Resolve(props.Backend)
	if err != nil {
		return capturescen.Options{}, "", err
	}
	cp, err := configs.Problem("", "capture-small")
	if err != nil {
		return capturescen.Options{}, "", err
	}
	label := fp.String()
	if name != "" {
		label = name + " (" + label + ")"
	}
	if err := fits(fp, cp.Problem, s.Env.NaiveTimeoutPercent, props.TotalMemory); err != nil {
		return capturescen.Options{}, "", cli.UsageErrorf("find problem %s: %v", label, err)
	}
	return capturescen.Options{
		FindProblem:     fp,
		CaptureProblem:  cp.Problem,
		NaiveTimeoutPct: s.Env.NaiveTimeoutPercent,
		MaxDraining:     streams.MaxDrainingFor(s.Env.HWQueues),
		Log:             s.Verbosef,
	}, label, nil
}

// fits reports an error wrapping finder.ErrTooLarge when the scenario's
// find of fp and the tensors of the captured cp, which it holds at once,
// need more than total bytes (0: a device that does not say).
func fits(fp, cp conv.Problem, naiveTimeoutPct int, total uint64) error {
	need, err := finder.Need(fp, finder.Options{NaiveTimeoutPct: naiveTimeoutPct})
	if err != nil {
		return err
	}
	if err := need.Fits(total); err != nil {
		return err
	}
	captured, err := finder.Need(cp, finder.Options{NaiveTimeoutPct: 0})
	if err != nil {
		return err
	}
	both := finder.MemoryNeed{Input: need.Input + captured.Input, Weights: need.Weights + captured.Weights,
		Output: need.Output + captured.Output, Workspace: need.Workspace + captured.Workspace, NaiveScratch: need.NaiveScratch}
	if err := both.Fits(total); err != nil {
		return fmt.Errorf("with the captured convolution: %w", err)
	}
	return nil
}

// Run runs the cases and writes the result.
func (o *CaptureOptions) Run() error {
	start := o.Now()
	if o.Target != target.Builtin {
		return runTargetCapture(o, start)
	}
	dev, r := o.Open("capture", start)
	if dev == nil {
		return cli.RenderResult(o.IO, o.Global.Format, r)
	}
	closeDevice := CloseDevice(o.Context, dev)
	defer closeDevice()
	co, label, err := ScenarioProblems(&o.Scenario, &o.Problem, dev.Props())
	if err != nil {
		return err
	}
	co.Modes, co.Policies, co.Variants, co.Samples, co.Seed, co.Repeat = o.modes, o.policies, o.variants, o.Samples, o.Seed, o.Repeat
	if co.NaiveTimeoutPct == 0 {
		r.Note("MIOPEN_NAIVE_TIMEOUT=0: the time bound is off, nothing is abandoned, so no case can show the bug")
	}
	r.Note("find problem %s; captured problem %s", label, co.CaptureProblem)
	update, done := o.Progress("capture: case")
	co.Progress = update
	cases, err := capturescen.Run(o.Context, dev, co)
	done()
	stop, err := Stopped(o.Context, err, capturescen.Planned(co))
	if err != nil {
		return fmt.Errorf("capture: %w", err)
	}
	fillCases(r, cases, dev.Dialect(), stop, o.Now())
	return RenderStopped(&o.Scenario, r, stop)
}

// Stopped sorts out how a run of cases ended: an interruption (a
// signal), with planned cases in all, gives the Interruption to render
// and no error; any other error is returned as it is.
func Stopped(ctx context.Context, err error, planned int) (*Interruption, error) {
	if cli.Interrupted(ctx) == nil {
		return nil, err
	}
	if err != nil && !errors.Is(err, capturescen.ErrInterrupted) && !errors.Is(err, context.Canceled) {
		return nil, err
	}
	return &Interruption{Reason: cli.InterruptedReason(ctx).Error(), Planned: planned}, nil
}

// RenderStopped writes r; a run an interruption stopped then ends with
// the signal's status.
func RenderStopped(s *cli.Scenario, r *report.Result, stop *Interruption) error {
	err := cli.RenderResult(s.IO, s.Global.Format, r)
	if stop == nil {
		return err
	}
	var ee *cli.ExitError
	if err != nil && (!errors.As(err, &ee) || ee.Code == cli.ExitToolFailure) {
		return err
	}
	return cli.Interrupted(s.Context)
}

// CloseDevice returns the function that closes dev at the end of a
// command: once the command is interrupted, it waits for the close only
// for a short grace, and the process's exit ends the rest.
func CloseDevice(ctx context.Context, dev hip.Device) func() {
	return func() { _, _ = cli.CloseUnlessInterrupted(ctx, dev.Close) }
}

// runTargetCapture is capture against a real library: its find on an empty
// find-db, then a capture of its forward convolution.
func runTargetCapture(opts *CaptureOptions, start time.Time) error {
	dev, r, cleanup := libtarget.Open(&opts.Scenario, "capture", opts.Target, start)
	defer cleanup()
	if dev == nil {
		return cli.RenderResult(opts.IO, opts.Global.Format, r)
	}
	defer CloseDevice(opts.Context, dev)()
	p, name, err := opts.Problem.Resolve(dev.Props().Backend)
	if err != nil {
		return err
	}
	r.Note("target %s; problem %s %s", opts.Target, name, p)
	for _, n := range target.NotesFor(nil, dev, opts.Target) {
		r.Note("%s", n)
	}
	update, done := opts.Progress("capture: case")
	to := capturescen.TargetOptions{
		Target: opts.Target, Modes: opts.modes, Variants: opts.variants, Problem: p,
		Seed: opts.Seed, Repeat: opts.Repeat, Log: opts.Verbosef, Progress: update,
	}
	cases, err := capturescen.RunTarget(opts.Context, dev, to)
	done()
	stop, err := Stopped(opts.Context, err, max(1, opts.Repeat)*len(opts.modes)*max(1, len(opts.variants)))
	if err != nil {
		return fmt.Errorf("capture --target=%s: %w", opts.Target, err)
	}
	fillTargetCases(r, cases, dev.Dialect(), stop, opts.Now())
	return RenderStopped(&opts.Scenario, r, stop)
}
