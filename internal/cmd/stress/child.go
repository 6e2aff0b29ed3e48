package stress

// One run of stress-threads, in a process the parent started as one of
// its runs (stressscen.ChildEnv): it opens the device, says where it ran
// (its device line), runs the workload and prints its result line; or,
// when the device or the library does not open, prints the result the
// command would have written, for the parent to write.

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"miotool/internal/cli"
	"miotool/internal/cmd/libtarget"
	"miotool/internal/dnn/target"
	"miotool/internal/hip"
	"miotool/internal/report"
	stressscen "miotool/internal/scenario/stress"
)

// runStressChild is one run. It exits 0 only when every sum was right and
// the caches recorded nothing, 1 when a sum was wrong or a race, a
// destroyed model or a use-after-free was recorded; the parent reads the
// lines, not the status, but a run that found the defect never says
// success.
func runStressChild(ctx context.Context, opts *StressOptions) error {
	start := opts.Now()
	var (
		dev     hip.Device
		r       *report.Result
		release = func() {}
	)
	if opts.Target != target.Builtin {
		dev, r, release = libtarget.Open(&opts.Scenario, "stress-threads", opts.Target, start)
	} else {
		dev, r = opts.Open("stress-threads", start)
	}
	defer release() // after the device is closed
	if dev == nil {
		data, err := json.Marshal(r)
		if err != nil {
			return err
		}
		if err := stressscen.WriteUnopenedLine(opts.IO.Out, data); err != nil {
			return err
		}
		return &cli.ExitError{Code: r.ExitCode(), Err: errors.New(r.Summary)}
	}
	defer dev.Close()
	device := stressscen.RunDevice{Token: opts.childToken, Backend: r.Backend, BackendReason: r.BackendReason,
		Name: r.Device.Name, Arch: r.Device.Arch, Description: r.Device.Description}
	if opts.Target != target.Builtin {
		device.Notes = target.NotesFor(nil, dev, opts.Target)
	}
	device.OpenMs = float64(opts.Now().Sub(start)) / float64(time.Millisecond)
	if err := stressscen.WriteDeviceLine(opts.IO.Out, device); err != nil {
		return err
	}

	var run *stressscen.RunResult
	if opts.Target != target.Builtin {
		o := stressscen.DefaultTargetOptions(opts.Target)
		o.Threads, o.Trials, o.Iterations, o.Select, o.Log = opts.Threads, opts.Trials, opts.Iters, opts.Algo, opts.Verbosef
		res, err := stressscen.RunTarget(ctx, dev, o)
		if err != nil {
			return err
		}
		run = res.AsRunResult()
	} else {
		_, _, fsys, err := opts.models()
		if err != nil {
			return err
		}
		run, err = stressscen.RunHere(ctx, dev, stressscen.Options{
			Threads: opts.Threads, Iters: opts.Iters, Trials: opts.Trials,
			Policy: opts.Cache, RaceWindow: opts.RaceWindow, Models: fsys, Log: opts.Verbosef, Lines: opts.IO.Out,
		})
		if err != nil {
			return err
		}
	}
	run.Token = opts.childToken
	if err := stressscen.WriteRunLine(opts.IO.Out, run); err != nil {
		return err
	}
	switch {
	case !run.OK():
		return &cli.ExitError{Code: cli.ExitCheckFailed, Err: errors.New("wrong sums"), Silent: true}
	case run.Detections.Any():
		return &cli.ExitError{Code: cli.ExitCheckFailed, Err: errors.New("the caches recorded the defect"), Silent: true}
	}
	return nil
}
