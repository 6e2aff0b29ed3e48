// Package find is `miotool find`: its options, flags and the rendering of
// its result.
package find

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/spf13/cobra"

	"miotool/internal/cli"
	"miotool/internal/finddb"
	"miotool/internal/finder"
	"miotool/internal/report"
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
	// RequireAbandoned makes "the naive evaluation was abandoned at its
	// deadline" a precondition: without it the check did not test the
	// bound, and its verdict is ERROR.
	RequireAbandoned bool

	// progressBar draws on stderr (nil: no bar; see Factory.ProgressBar).
	progressBar func(label string) *cli.ProgressBar
}

// NewCmdFind builds `miotool find`; runF, when set, replaces the run function.
func NewCmdFind(f *cli.Factory, runF func(*FindOptions) error) *cobra.Command {
	opts := &FindOptions{Scenario: cli.NewScenario(f), progressBar: f.ProgressBar}
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
verbose output is --verbose) or from --problem NAME. Without --problem, the
problem is naive-long-sim on the simulator and naive-long-gpu on a GPU; each
flag's default below is that problem's field. Geometry flags change only the
fields they name, and the rest come from --problem's problem or that default.
A problem whose find needs more device memory than the device has is refused
before anything is allocated (exit 2).

The verdict is said on stderr as soon as find has it; the handle's teardown
follows and waits, as MIOpen's handle destructor does, for an abandoned naive
evaluation to run out (shown as progress on a terminal), and the result, with
the teardown's figures, comes on stdout when it is done (with --format json,
the document alone).

PASS when find stayed within its bound and the chosen solver (and every other
timed one) verified. With --require-abandoned the naive evaluation must also
have been abandoned at its deadline: otherwise (MIOPEN_NAIVE_TIMEOUT=0, a
find-db record or fast mode's heuristic chose, naive made its deadline) the
bound was not tested and the verdict is ERROR, "precondition did not hold".
SIGINT or SIGTERM ends find within two seconds with an INTERRUPTED result
holding the solvers timed so far.`,
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
		RunE: cli.DeviceRunE(f, opts, runF),
	}
	cli.AddProblemFlags(cmd, f, &opts.Problem, "naive-long-%s")
	fl := cmd.Flags()
	fl.StringVar(&opts.FindMode, "find-mode", "normal", "normal (benchmark), fast (a find-db record, else the immediate-mode heuristic, no benchmark), hybrid or dynamic-hybrid (a find-db record, else benchmark); MIOPEN_FIND_MODE, when set, gives the default")
	cli.AddSamplesFlag(cmd, &opts.Samples, 7)
	fl.BoolVar(&opts.RequireAbandoned, "require-abandoned", false, "ERROR unless the naive evaluation was abandoned at its deadline: the check then tests the time bound or says it did not")
	cli.AddReclaimFlag(cmd, &opts.Reclaim, streams.Worker)
	cli.CompleteValues(cmd, "find-mode", cli.Names(finder.Modes))
	fl.Uint64Var(&opts.Seed, "seed", 1, "seed of the random input and weights")
	opts.AddDialectFlag(cmd)
	return cmd
}

// Complete reads the configuration and the runtime variables; a usable
// MIOPEN_FIND_MODE gives --find-mode's default.
func (o *FindOptions) Complete(f *cli.Factory, cmd *cobra.Command, _ []string) error {
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
	if err := cli.ValidateSamples(o.Samples); err != nil {
		return err
	}
	if o.Env.UserDBPath != "" {
		if err := finddb.CheckDir(o.Env.UserDBPath); errors.Is(err, finddb.ErrNotAFolder) {
			return cli.UsageErrorf("%s=%v", runenv.EnvUserDBPath, err)
		}
	}
	return nil
}

// Device opens the selected backend's device.
func (o *FindOptions) Device() cli.DeviceRequest { return o.Scenario.DeviceRequest("find") }

// RunOn finds on d and judges the find. With the text format the verdict
// is said on stderr as soon as find has it, and the teardown's figures
// follow in the result. Interrupted, what was measured is the result, and
// the teardown gets a short grace: the process's exit ends the abandoned
// evaluation.
func (o *FindOptions) RunOn(ctx context.Context, d *cli.Device) (*report.Result, error) {
	r, dev := d.Result, d.Device
	p, label, err := o.Problem.Resolve(dev.Props().Backend)
	if err != nil {
		return nil, err
	}
	mode, _ := finder.ParseMode(o.FindMode)
	bar := o.bar("find:")
	so := findscen.Options{
		Problem: p, ProblemName: label, Mode: mode, Samples: o.Samples, Reclaim: o.Reclaim,
		HWQueues: o.Env.HWQueues, NaiveTimeoutPct: o.Env.NaiveTimeoutPercent, Seed: o.Seed,
		DBDir: o.Env.UserDBPath, Progress: bar.Update, Logf: o.Verbosef,
		Warnf: func(format string, args ...any) {
			o.stderrLine(bar, "miotool: warning: "+fmt.Sprintf(format, args...))
		},
		DBLockWait: func(w finddb.LockWait) {
			o.stderrLine(bar, "miotool: find-db: "+w.String())
			bar.SetLabel("find: waiting for the find-db lock")
		},
	}
	if err := fits(so, dev.Props().TotalMemory); err != nil {
		bar.Done()
		return nil, err
	}
	found, err := findscen.Start(ctx, dev, so)
	bar.Done()
	in := fillInput{opts: so, requireAbandoned: o.RequireAbandoned}
	if found == nil {
		if ctx.Err() == nil {
			return nil, err
		}
		in.interrupted = cli.InterruptedReason(ctx).Error()
		in.out = &findscen.Outcome{Result: &finder.Result{Problem: p, Key: p.Key(), Interrupted: true}}
		fill(r, in, o.Now())
		return r, nil
	}
	if errors.Is(err, finder.ErrInterrupted) {
		in.interrupted = cli.InterruptedReason(ctx).Error()
		out := found.Outcome
		in.out = &out
		fill(r, in, o.Now())
		_, _ = d.CloseWith(func() error {
			_, terr := found.Teardown(finder.TeardownOptions{})
			return errors.Join(terr, dev.Close())
		})
		return r, nil
	}
	out := found.Outcome // before the teardown, which may go on after an interruption
	if out.AfterFind.Draining > 0 && o.Global.Format != report.JSON {
		o.sayVerdict(r, in, out)
	}
	terr, finished := o.tearDown(found, d)
	if finished {
		out = found.Outcome
	} else {
		in.teardownInterrupted = cli.InterruptedReason(ctx).Error()
	}
	in.out = &out
	fill(r, in, o.Now())
	return r, terr
}

// sayVerdict writes the find's verdict on stderr as soon as it is known,
// when the teardown has an abandoned naive evaluation to wait for: the
// result, with the teardown's figures, follows on stdout once the
// teardown is done (the process writes its result when the command
// ends, so that the result says the exit status it ends with). A JSON
// reader reads the document alone.
func (o *FindOptions) sayVerdict(r *report.Result, in fillInput, out findscen.Outcome) {
	early := report.New(r.Check, r.Command, r.Started)
	in.out = &out
	fill(early, in, o.Now())
	o.stderrLine(nil, fmt.Sprintf("miotool: find: %s - %s; the result follows the teardown, which waits for the abandoned naive evaluation",
		early.Verdict, early.Summary))
}

// tearDown runs the find's teardown and then closes dev, the teardown's
// wait shown on a progress bar, until it ends or the command is
// interrupted: then it waits a short grace and returns with finished
// false, the teardown left running for the process's exit to end.
func (o *FindOptions) tearDown(found *findscen.Found, d *cli.Device) (err error, finished bool) {
	bar := o.bar("find: teardown")
	defer bar.Done()
	// The label is the notice, e.g. "waiting for the abandoned naive
	// evaluation to run out (27 s left at most)", redrawn each second; the
	// count is the seconds waited. It is an upper bound, not an estimate,
	// so the bar has no total to draw an estimate from.
	notice := func(w finder.TeardownWait) {
		bar.SetLabel("find: " + w.String())
		bar.Update(int(w.Waited/time.Second), 0)
	}
	finished, err = d.CloseWith(func() error {
		_, terr := found.Teardown(finder.TeardownOptions{Notice: notice})
		return errors.Join(terr, d.Device.Close())
	})
	return err, finished
}

// bar is a progress bar on stderr, nil (which does nothing) when there is
// none to draw.
func (o *FindOptions) bar(label string) *cli.ProgressBar {
	if o.progressBar == nil {
		return nil
	}
	return o.progressBar(label)
}

// stderrLine writes a line to stderr, first clearing the bar's line when
// one is drawn there (the bar redraws itself at its next tick).
func (o *FindOptions) stderrLine(bar *cli.ProgressBar, line string) {
	bar.Above(o.IO.ErrOut, line)
}

// fits refuses, before anything is allocated, a problem whose find needs
// more device memory than the device has: the problem is the user's
// input, so it is a usage error (exit 2), with the need and the device's
// memory in the message.
func fits(so findscen.Options, total uint64) error {
	need, err := finder.Need(so.Problem, findscen.FinderOptions(so))
	if err != nil {
		return cli.UsageError(err)
	}
	if err := need.Fits(total); err != nil {
		what := so.ProblemName
		if what == "" {
			what = so.Problem.String()
		}
		return cli.UsageErrorf("problem %s: %v", what, err)
	}
	return nil
}
