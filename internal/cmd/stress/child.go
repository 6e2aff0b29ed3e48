package stress

// One run of stress-threads, in the child process the parent started
// with --child: the workload, then its run line on standard output.

import (
	"errors"

	"miotool/internal/cli"
	"miotool/internal/cmd/libtarget"
	"miotool/internal/dnn/target"
	"miotool/internal/hip"
	"miotool/internal/report"
	stressscen "miotool/internal/scenario/stress"
)

// runStressChild is one run: the workload in this process, its result as
// one line on stdout. Exit 0 when every sum was right, 1 when one was not.
func runStressChild(opts *StressOptions) error {
	dev, sel, err := opts.OpenDevice(string(opts.Global.Backend), hip.OpenOptions{Ordinal: opts.Global.Device, Dialect: opts.Dialect, HWQueues: opts.Env.HWQueues})
	if err != nil {
		code := cli.ExitToolFailure
		if cli.OpenVerdict(err) == report.Skip {
			code = cli.ExitSkipped
		}
		return &cli.ExitError{Code: code, Err: err}
	}
	defer dev.Close()
	opts.Verbosef("run on %s (%s)", dev.Props(), cli.SelectionReason(sel))
	if opts.Target != target.Builtin {
		return runTargetStressChild(opts, dev)
	}
	_, _, fsys, err := opts.models()
	if err != nil {
		return err
	}
	run, err := stressscen.RunHere(opts.Context, dev, stressscen.Options{
		Threads: opts.Threads, Iters: opts.Iters, Trials: opts.Trials,
		Policy: opts.Cache, RaceWindow: opts.RaceWindow, Models: fsys, Log: opts.Verbosef, Lines: opts.IO.Out,
	})
	if err != nil {
		return err
	}
	if err := stressscen.WriteRunLine(opts.IO.Out, run); err != nil {
		return err
	}
	if !run.OK() {
		return &cli.ExitError{Code: cli.ExitCheckFailed, Err: errors.New("wrong sums"), Silent: true}
	}
	return nil
}

// runTargetStressChild is one run against a library: every trial in this
// process, reported in the same line format as the builtin runs.
func runTargetStressChild(opts *StressOptions, dev hip.Device) error {
	if err := target.Available(opts.Target); err != nil {
		return &cli.ExitError{Code: cli.ExitSkipped, Err: err}
	}
	defer target.Cleanup()
	if err := target.Supports(opts.Target, dev); err != nil {
		return &cli.ExitError{Code: cli.ExitSkipped, Err: libtarget.WithBackendHint(err)}
	}
	o := stressscen.DefaultTargetOptions(opts.Target)
	o.Threads, o.Trials, o.Iterations, o.Select, o.Log = opts.Threads, opts.Trials, opts.Iters, opts.Algo, opts.Verbosef
	res, err := stressscen.RunTarget(opts.Context, dev, o)
	if err != nil {
		return err
	}
	run := res.AsRunResult()
	if err := stressscen.WriteRunLine(opts.IO.Out, run); err != nil {
		return err
	}
	if !run.OK() {
		return &cli.ExitError{Code: cli.ExitCheckFailed, Err: errors.New("wrong sums"), Silent: true}
	}
	return nil
}
