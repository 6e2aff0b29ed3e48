// Package stress is `miotool stress-threads`: its options, flags, the child
// process each run is, and the rendering of the runs.
package stress

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"miotool/internal/aiheur"
	"miotool/internal/aiheur/cache"
	"miotool/internal/cli"
	"miotool/internal/dnn/target"
	"miotool/internal/hip"
	"miotool/internal/report"
	stressscen "miotool/internal/scenario/stress"

	// The embedded model: the default where no ROCm model directory is.
	_ "miotool/internal/aiheur/builtin"
)

// StressOptions are the inputs of `miotool stress-threads`.
type StressOptions struct {
	cli.Scenario
	Threads, Iters, Trials int
	Runs, Jobs             int
	Cache                  cache.Policy
	ModelDir               string
	RaceWindow             time.Duration
	RunTimeout             time.Duration
	// Target runs the workload through a real library (miopen, cudnn)
	// instead of miotool's handle and heuristic; Algo is how that library
	// picks its algorithm.
	Target target.Name
	Algo   stressscen.AlgoSelection
	// childToken is set in a process the parent started as one of its
	// runs (stressscen.ChildEnv): it runs the workload once and prints
	// its lines. No flag, config key or MIOTOOL_* variable sets it.
	childToken string
	lookupEnv  func(string) (string, bool)

	// Executable is the program the runs re-execute with their arguments;
	// os.Executable when nil. Tests put a stand-in there.
	Executable func(args []string) (stressscen.ChildCommand, error)
}

// NewCmdStress builds `miotool stress-threads`; runF, when set, replaces the run function.
func NewCmdStress(f *cli.Factory, runF func(*StressOptions) error) *cobra.Command {
	opts := &StressOptions{Scenario: cli.NewScenario(f), lookupEnv: f.LookupEnv}
	cmd := &cobra.Command{
		Use:   "stress-threads",
		Short: "Convolve from several threads at once through the AI heuristic's model cache (ROCM-27477)",
		Long: `stress-threads is PyTorch's test_cudnn_multiple_threads_same_device made
standalone, to reproduce MIOpen's AI-heuristic model-cache race (ROCM-27477) and
check its fix. Each of --threads threads has its own library handle and stream on
one device; they meet at a barrier, then each runs --iters iterations that
convolve the previous output with a 1x1x2x2 weight of ones and divide it by 4,
starting from a 1x1x2048x2048 input of ones. Every iteration is a new problem
size, and its solver is chosen by the TunaNet heuristic, which takes its model
from the process's model cache on every call, as MIOpen does. After each of
--trials trials every thread's sum must be exactly (2048 - iters)^2 (1098304 for
1000 iterations).

--cache picks the cache: unlocked is the pre-fix pattern (two threads that miss
together both load, and the second insert destroys the model the first is still
running: a real use-after-free, which may end the process), locked is the fix
(one mutex over find and insert), lockfree reads without a lock. The race is only
possible while the cache is first populated, so every run is a fresh process:
--runs runs, --jobs at a time, each ended by a watchdog after --run-timeout.

Crashes are luck; the verdict is not. The caches record, as a race detector
would, an access from another thread with no lock or barrier in between (race),
a published model destroyed by a concurrent insert, and a model released while a
reader holds it (use-after-free), so with two or more threads the pre-fix cache
fails every run on every machine (one thread has no race to find, and passes). Each run's output is checked element by element (every value exactly 1,
guard values beside it untouched), so a kernel that did not run is a wrong
result. The table counts crashes by signal, use-after-free, destroyed models,
races, wrong results, hangs and runs stopped by an interrupt (Ctrl-C: exit 130).
PASS only when every run completed with nothing recorded.

The model comes from --model-dir, by default an installed ROCm's
share/miopen/db when there is one, else the model embedded in miotool (fitted to
miotool's own solvers). --race-window widens the race on purpose, for
demonstrations; it is off by default and printed with the result.`,
		Example: `  # The pre-fix cache: FAIL in every run (race detected), crashes in some
  miotool stress-threads --cache=unlocked --runs 200

  # The fix, the same number of runs
  miotool stress-threads --cache=locked --runs 200 --jobs 2

  # One run of the PyTorch test's defaults, as a PR checklist row
  miotool stress-threads --format markdown`,
		Args: cobra.NoArgs,
		RunE: cli.RunE(f, opts, runF),
	}
	fl := cmd.Flags()
	fl.IntVar(&opts.Threads, "threads", stressscen.DefaultThreads, "threads, each with its own handle and stream (1 to 1024)")
	fl.IntVar(&opts.Iters, "iters", stressscen.DefaultIters, fmt.Sprintf("iterations per thread and trial (1 to %d)", stressscen.InputSize-1))
	fl.IntVar(&opts.Trials, "trials", stressscen.DefaultTrials, fmt.Sprintf("trials per run (1 to %d; threads x iters x trials at most %d)", maxTrials, maxConvolutions))
	fl.IntVar(&opts.Runs, "runs", 1, fmt.Sprintf("runs, each in a fresh process (1 to %d)", maxRuns))
	fl.IntVar(&opts.Jobs, "jobs", 1, fmt.Sprintf("runs at a time (1 to %d)", maxJobs))
	fl.Var(cli.NewEnumValue(&opts.Cache, cache.Locked, cache.Policies...), "cache", "model cache policy: unlocked (pre-fix), locked (the fix) or lockfree")
	fl.StringVar(&opts.ModelDir, "model-dir", "", "directory of MIOpen model files (default: an installed ROCm's share/miopen/db, else the embedded model)")
	fl.DurationVar(&opts.RaceWindow, "race-window", 0, fmt.Sprintf("widen the cache race on purpose: wait a random time of up to this long between a miss's load and its insert (demonstrations only; 0 = off, at most %v)", maxRaceWindow))
	fl.DurationVar(&opts.RunTimeout, "run-timeout", 10*time.Minute, fmt.Sprintf("watchdog: a run still going after this is killed and counted as a hang (at most %v)", maxRunTimeout))
	fl.Var(cli.NewEnumValue(&opts.Target, target.Builtin, target.Names...), "target",
		"what runs the convolutions: builtin (miotool's handle and TunaNet heuristic), miopen (libMIOpen, HIP) or cudnn (libcudnn, CUDA)")
	fl.Var(cli.NewEnumValue(&opts.Algo, stressscen.SelectHeuristic, stressscen.SelectHeuristic, stressscen.SelectFind), "algo",
		"with a library target: how it picks each convolution's algorithm, heuristic or find")
	opts.AddDialectFlag(cmd)
	return cmd
}

// Complete reads the configuration, says whether this process is one of a
// parent's runs, and refuses flags that do not apply to the target.
func (o *StressOptions) Complete(f *cli.Factory, cmd *cobra.Command, _ []string) error {
	if err := o.Scenario.Complete(f, cmd); err != nil {
		return err
	}
	o.childToken = ""
	if o.lookupEnv != nil {
		if v, ok := o.lookupEnv(stressscen.ChildEnv); ok {
			token, err := stressscen.ParseChildEnv(v, os.Getppid())
			if err != nil {
				return cli.UsageError(err)
			}
			o.childToken = token
		}
	}
	if o.Target != target.Builtin {
		for _, name := range []string{"cache", "model-dir", "race-window"} {
			if cmd.Flags().Changed(name) {
				return cli.UsageErrorf("--%s applies to --target=builtin only: a library uses its own heuristic and caches", name)
			}
		}
	} else if cmd.Flags().Changed("algo") {
		return cli.UsageErrorf("--algo applies to a library target (--target=miopen or cudnn)")
	}
	return nil
}

// Run is one run in this process when a parent started it as one (its
// lines are its output, and it writes no result), else the runs, each a
// fresh process, and their judged result.
func (o *StressOptions) Run(ctx context.Context) (*cli.Outcome, error) {
	if o.childToken != "" {
		return nil, runStressChild(ctx, o)
	}
	r, err := runStress(ctx, o)
	if r == nil {
		return nil, err
	}
	return cli.Single(r), err
}

// Bounds on what a user sets, each past any sane use: a value beyond one
// is refused up front, naming the bound, rather than run for hours.
const (
	// maxRuns: 200 runs validated the fix; each run keeps an outcome.
	maxRuns = 10000
	// maxJobs: runs at a time, each a process with the device open.
	maxJobs = 256
	// maxTrials: each trial is --threads x --iters convolutions; the
	// PyTorch test runs 3.
	maxTrials = 100
	// maxConvolutions bounds a run's work, threads x iterations x trials:
	// about 170 times the PyTorch test's 6000, some minutes of one run on
	// the simulator.
	maxConvolutions = 1000000
	// maxRaceWindow: a miss waits up to this once per thread and model;
	// microseconds widen the race enough.
	maxRaceWindow = 10 * time.Second
	// maxRunTimeout: the watchdog of one run.
	maxRunTimeout = 24 * time.Hour
)

// Validate checks the counts, durations and model directory.
func (o *StressOptions) Validate() error {
	switch {
	case o.Threads < 1 || o.Threads > 1024:
		return cli.UsageErrorf("--threads %d: want 1 to 1024", o.Threads)
	case o.Iters < 1 || o.Iters >= stressscen.InputSize:
		return cli.UsageErrorf("--iters %d: want 1 to %d (each iteration shrinks the %dx%d input by one)", o.Iters, stressscen.InputSize-1, stressscen.InputSize, stressscen.InputSize)
	case o.Trials < 1 || o.Trials > maxTrials:
		return cli.UsageErrorf("--trials %d: want 1 to %d", o.Trials, maxTrials)
	case o.Threads*o.Iters*o.Trials > maxConvolutions:
		return cli.UsageErrorf("--threads %d x --iters %d x --trials %d is %d convolutions per run: want at most %d",
			o.Threads, o.Iters, o.Trials, o.Threads*o.Iters*o.Trials, maxConvolutions)
	case o.Runs < 1 || o.Runs > maxRuns:
		return cli.UsageErrorf("--runs %d: want 1 to %d", o.Runs, maxRuns)
	case o.Jobs < 1 || o.Jobs > maxJobs:
		return cli.UsageErrorf("--jobs %d: want 1 to %d", o.Jobs, maxJobs)
	case o.RaceWindow < 0 || o.RaceWindow > maxRaceWindow:
		return cli.UsageErrorf("--race-window %v: want 0 (off) up to %v", o.RaceWindow, maxRaceWindow)
	case o.RunTimeout <= 0 || o.RunTimeout > maxRunTimeout:
		return cli.UsageErrorf("--run-timeout %v: want a positive duration up to %v", o.RunTimeout, maxRunTimeout)
	case o.RaceWindow >= o.RunTimeout:
		return cli.UsageErrorf("--race-window %v: want less than --run-timeout %v, or every run would hang", o.RaceWindow, o.RunTimeout)
	}
	if o.ModelDir != "" {
		info, err := os.Stat(o.ModelDir)
		if err != nil {
			return cli.UsageErrorf("--model-dir: %v", err)
		}
		if !info.IsDir() {
			return cli.UsageErrorf("--model-dir %s: not a directory", o.ModelDir)
		}
	}
	return nil
}

// models resolves the model directory (the flag, an installed ROCm, or the
// embedded model) and describes the choice.
func (o *StressOptions) models() (dir, described string, fsys fs.FS, err error) {
	dir, source := aiheur.ModelDir(o.ModelDir)
	fsys, err = aiheur.ModelFS(dir)
	if errors.Is(err, aiheur.ErrNoModels) {
		return "", "", nil, fmt.Errorf("%w; give one with %s", err, cli.ModelDirFlag)
	}
	if err != nil {
		return "", "", nil, err
	}
	switch source {
	case aiheur.SourceEmbedded:
		described = "the model embedded in miotool"
	case aiheur.SourceFlag:
		described = dir + " (" + cli.ModelDirFlag + ")"
	default:
		described = dir + " (" + source + ")"
	}
	return dir, described, fsys, nil
}

// childArgs are the arguments of one run's process: the backend and
// device as the user asked for them (the run selects and opens the device,
// this process never does), the configuration, and this command's workload
// flags. The runs know they are runs from stressscen.ChildEnv, not from
// these arguments.
func (o *StressOptions) childArgs(modelDir string) []string {
	backend := string(o.Global.Backend)
	if backend == "" {
		backend = string(hip.BackendAuto)
	}
	args := []string{"--backend", backend, "--device", strconv.Itoa(o.Global.Device), "--no-progress"}
	if o.Global.ConfigFile != "" {
		args = append(args, "--config", o.Global.ConfigFile)
	}
	args = append(args, "stress-threads",
		"--threads", strconv.Itoa(o.Threads), "--iters", strconv.Itoa(o.Iters), "--trials", strconv.Itoa(o.Trials),
		"--dialect", string(o.Dialect))
	if o.Target != target.Builtin {
		return append(args, "--target", string(o.Target), "--algo", string(o.Algo))
	}
	args = append(args, "--cache", string(o.Cache), "--race-window", o.RaceWindow.String())
	if modelDir != "" {
		args = append(args, "--model-dir", modelDir)
	}
	return args
}

func osExecutable(args []string) (stressscen.ChildCommand, error) {
	exe, err := os.Executable()
	if err != nil {
		return stressscen.ChildCommand{}, fmt.Errorf("finding miotool's own executable to start the runs: %w", err)
	}
	return stressscen.ChildCommand{Path: exe, Args: args}, nil
}

// runStress starts the runs and writes their result. This process opens
// no device and starts no GPU runtime: each run does, and says where it
// ran (its device line), which becomes the result's header. A one-run
// command so pays the runtime's start-up once, in its run.
func runStress(ctx context.Context, opts *StressOptions) (*report.Result, error) {
	start := opts.Now()
	r := report.New("stress-threads", opts.CommandLine, start)
	r.Backend = string(opts.Global.Backend)
	r.BackendReason = "as requested; no run said which it opened"
	for _, st := range opts.Env.Settings {
		if w, ok := strings.CutPrefix(st.Note, "warning: "); ok {
			r.Note("%s", w)
		}
	}
	if opts.Target != target.Builtin {
		return runStressProcesses(ctx, opts, r, Setup{Threads: opts.Threads, Iters: opts.Iters, Trials: opts.Trials,
			Size: stressscen.InputSize, Runs: opts.Runs, Jobs: opts.Jobs, Timeout: opts.RunTimeout,
			Library: fmt.Sprintf("%s, %s algorithm selection", opts.Target, opts.Algo)}, "")
	}
	dir, described, fsys, err := opts.models()
	if err != nil {
		return nil, err
	}
	// A model directory the user named that holds no usable model is a
	// configuration error; a broken installed or embedded one is the tool's.
	badModels := func(err error) error { return err }
	if opts.ModelDir != "" {
		badModels = cli.UsageError
	}
	// The device's arch is the runs' to know: checked here is the set a
	// run picks first (miotool's own, else MIOpen's), so that files that
	// hold no model are one clear error before any run; each run reports
	// the set it used.
	arch, err := stressscen.CheckModels(fsys, "")
	if err != nil {
		return nil, badModels(fmt.Errorf("%s: %w", described, err))
	}
	cacheLine, err := stressscen.CacheLine(opts.Cache, opts.RaceWindow)
	if err != nil {
		return nil, err
	}
	setup := Setup{Threads: opts.Threads, Iters: opts.Iters, Trials: opts.Trials, Size: stressscen.InputSize,
		Runs: opts.Runs, Jobs: opts.Jobs, Policy: opts.Cache, RaceWindow: opts.RaceWindow, Cache: cacheLine,
		Models: described, Arch: arch, Timeout: opts.RunTimeout}
	return runStressProcesses(ctx, opts, r, setup, dir)
}

// runStressProcesses starts the runs, each a fresh miotool process, and
// judges their tally.
func runStressProcesses(ctx context.Context, opts *StressOptions, r *report.Result, setup Setup, modelDir string) (*report.Result, error) {
	exe := opts.Executable
	if exe == nil {
		exe = osExecutable
	}
	child, err := exe(opts.childArgs(modelDir))
	if err != nil {
		return nil, err
	}
	child.Token = stressscen.NewChildToken()
	opts.Verbosef("runs re-execute %s %v", child.Path, child.Args)
	update, done := opts.Progress("stress-threads: run")
	update(0, opts.Runs)
	runs, err := stressscen.RunProcesses(ctx, child, stressscen.RunnerOptions{
		Runs: opts.Runs, Jobs: opts.Jobs, Timeout: opts.RunTimeout, Progress: update, Log: opts.Verbosef,
		// A run that could not open the device says why; the next would too.
		Stop: func(o stressscen.RunOutcome) bool { return o.Unopened != nil },
	})
	done()
	interrupted := ctx.Err() != nil
	if err != nil && !interrupted {
		return nil, err
	}
	if d := firstDevice(runs); d != nil {
		r.Backend, r.BackendReason = d.Backend, d.BackendReason
		r.Device = report.Device{Name: d.Name, Arch: d.Arch, Description: d.Description}
		for _, n := range d.Notes {
			r.Note("%s", n)
		}
		opts.Verbosef("runs on backend %s (%s) on %s", d.Backend, d.BackendReason, d.Description)
	} else if u := unopened(runs, opts, r.Started); u != nil {
		return u, nil
	}
	if setup.Library == "" {
		if a := firstArch(runs); a != "" {
			setup.Arch = a
		}
	}
	if interrupted {
		// The runs that finished are reported; the result says INTERRUPTED.
		setup.Interrupted = cli.InterruptedReason(ctx).Error()
	}
	Fill(r, setup, runs, opts.Now())
	return r, nil
}

// firstDevice is the device line of the first run, in start order, that
// printed one.
func firstDevice(runs []stressscen.RunOutcome) *stressscen.RunDevice {
	for _, o := range runs {
		if o.Device != nil {
			return o.Device
		}
	}
	return nil
}

// firstArch is the model set the first completed run used.
func firstArch(runs []stressscen.RunOutcome) string {
	for _, o := range runs {
		if o.Run != nil && o.Run.Arch != "" {
			return o.Run.Arch
		}
	}
	return ""
}

// unopened is the result a run wrote when it could not open the device or
// the library (a SKIP or an ERROR), as this command's own: its command
// line, start and duration, and a note saying it came from a run. Nil when
// no run wrote one.
func unopened(runs []stressscen.RunOutcome, opts *StressOptions, start time.Time) *report.Result {
	for _, o := range runs {
		if o.Unopened == nil {
			continue
		}
		var u report.Result
		if err := json.Unmarshal(o.Unopened, &u); err != nil {
			continue
		}
		u.Command, u.Started, u.Duration = opts.CommandLine, start, opts.Now().Sub(start)
		u.Note("from run %d of %d, which opens the device itself (this process does not); no further run was started", o.Index+1, opts.Runs)
		return &u
	}
	return nil
}
