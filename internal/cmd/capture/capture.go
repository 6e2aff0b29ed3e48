// Package capture is `miotool capture`: its options, flags and the rendering
// of its cases.
package capture

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"miotool/configs"
	"miotool/internal/cli"
	"miotool/internal/cmd/libtarget"
	"miotool/internal/dnn/target"
	"miotool/internal/hip"
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
in relaxed mode) or worker (a host callback and a worker thread, nothing on
the launch path: the merged fix). --variant other-thread captures on one thread
while another thread launches through the handle whose find abandoned the
stream, which global mode still exposes.

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
	fl.IntVar(&opts.Samples, "samples", 3, "timed runs per solver in the scenario's find")
	fl.IntVar(&opts.Repeat, "repeat", 1, "run every case this many times and count the outcomes")
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

// Validate checks what must be 1 or more.
func (o *CaptureOptions) Validate() error {
	return cli.AtLeastOne(cli.Count{Flag: "--samples", N: o.Samples}, cli.Count{Flag: "--repeat", N: o.Repeat})
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
// capture and replay.
func ScenarioProblems(s *cli.Scenario, pf *cli.ProblemFlags, backend string) (capturescen.Options, string, error) {
	fp, name, err := pf.Resolve(backend)
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
	return capturescen.Options{
		FindProblem:     fp,
		CaptureProblem:  cp.Problem,
		NaiveTimeoutPct: s.Env.NaiveTimeoutPercent,
		MaxDraining:     streams.MaxDrainingFor(s.Env.HWQueues),
		Log:             s.Verbosef,
	}, label, nil
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
	defer dev.Close()
	co, label, err := ScenarioProblems(&o.Scenario, &o.Problem, dev.Props().Backend)
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
	if err != nil {
		return fmt.Errorf("capture: %w", err)
	}
	fillCases(r, cases, dev.Dialect(), o.Now())
	return cli.RenderResult(o.IO, o.Global.Format, r)
}

// runTargetCapture is capture against a real library: its find on an empty
// find-db, then a capture of its forward convolution.
func runTargetCapture(opts *CaptureOptions, start time.Time) error {
	dev, r, cleanup := libtarget.Open(&opts.Scenario, "capture", opts.Target, start)
	defer cleanup()
	if dev == nil {
		return cli.RenderResult(opts.IO, opts.Global.Format, r)
	}
	defer dev.Close()
	p, name, err := opts.Problem.Resolve(dev.Props().Backend)
	if err != nil {
		return err
	}
	r.Note("target %s; problem %s %s", opts.Target, name, p)
	for _, n := range target.NotesFor(nil, dev, opts.Target) {
		r.Note("%s", n)
	}
	update, done := opts.Progress("capture: case")
	cases, err := capturescen.RunTarget(opts.Context, dev, capturescen.TargetOptions{
		Target: opts.Target, Modes: opts.modes, Variants: opts.variants, Problem: p,
		Seed: opts.Seed, Repeat: opts.Repeat, Log: opts.Verbosef, Progress: update,
	})
	done()
	if err != nil {
		return fmt.Errorf("capture --target=%s: %w", opts.Target, err)
	}
	fillTargetCases(r, cases, dev.Dialect(), opts.Now())
	return cli.RenderResult(opts.IO, opts.Global.Format, r)
}
