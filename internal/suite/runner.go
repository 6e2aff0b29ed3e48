package suite

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/big"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"miotool/internal/childproc"
	"miotool/internal/finddb"
	"miotool/internal/report"
	"miotool/internal/runenv"
	"miotool/internal/words"
)

// Runner runs suites. Each run of a check is a process of Command followed
// by the check's arguments and ResultArgs; its result is one miotool/result
// document (any version ReadJSON reads), in the file ResultFlag names or,
// without one, on its standard output.
type Runner struct {
	// Command is the miotool program and any arguments that go before a
	// check's own: os.Executable() for real runs; tests re-execute their
	// own binary.
	Command []string
	// Environ is the environment every check starts from (os.Environ()).
	Environ []string
	// Args are a check's arguments as it runs and as its row shows them:
	// its own, and whatever the caller adds to every check. Nil: its own.
	Args func(c Check) []string
	// ResultArgs go into every run's command line after the check's own
	// flags (before a trace check's "--"): what makes it print its result
	// as one miotool/result JSON document on standard output and nothing
	// else there.
	ResultArgs []string
	// ResultFlag, when set, is the flag that makes a run write its result
	// to a file ("--export-json"): each run gets a file of its own, and its
	// standard output is left to it. A traced program prints what it likes
	// there, so only a file keeps the result apart from the program's own
	// output. Empty: the result is read from standard output.
	ResultFlag string
	Host       string
	Tool       report.Tool
	Now        func() time.Time
	// Progress, when set, hears of each run as it starts (done runs so
	// far, all runs, the check's name), of each run's end when runs go
	// side by side (with the name of one still running, or ""), and once
	// more when all are done. Its calls never overlap.
	Progress func(done, total int, current string)
	// PipeGrace is how long a check's output pipes may stay open after it
	// ended (held by a process it started that left its process group)
	// before the runner stops waiting; 0 means childproc's default.
	PipeGrace time.Duration
	// TempDir is where a suite run's scratch find-db folder is made;
	// empty means os.TempDir().
	TempDir string
}

// Options say how to run a suite.
type Options struct {
	Repeat  int  // runs of each check per variant; 0 counts as 1
	Shuffle bool // shuffle each pass over the checks
	Seed    uint64
	CPULoad int // busy CPU workers kept running while the checks run
	// Jobs is how many runs may go at once; 0 and 1 run one at a time.
	// Runs start in the plan's order, with more than one job the
	// exclusive checks of each pass first (ExclusiveFirst); an exclusive
	// check's run waits for every run before it to end and has nothing
	// beside it.
	Jobs int
	// Variants are environments to run the whole suite in again, after
	// the baseline.
	Variants []Variant
	// Timeout, when positive, bounds every run in place of the file's
	// timeouts.
	Timeout time.Duration
	// Shard, unless Whole, runs only the shard's part of the suite
	// (PlanShard), split by Durations when given, else by count; the
	// result lists only that part, and its notes name the shard.
	Shard Shard
	// Durations weigh the checks for the split; DurationsFrom names the
	// file they were read from.
	Durations     Weights
	DurationsFrom string
	// Devices, when set, are the devices the runs go side by side on,
	// each run pinned to one (DeviceVariables set to its id): up to Jobs
	// at once over all of them, the least busy device first, an
	// exclusive check alone on its device while the others go on.
	Devices []string
}

// stderrTailBytes is how much of a check's standard error is kept.
const stderrTailBytes = 4096

// MaxRuns bounds the runs of one suite run: each is a process of its own
// and a row of the result, so a suite of 9 checks at --repeat 1000
// already takes hours; more is a typo, not a plan.
const MaxRuns = 10000

// CheckSize says, before anything runs, whether f run repeat times in
// variants environments (the baseline counted) stays within MaxRuns.
func CheckSize(f *File, repeat, variants int) error {
	runnable := 0
	for _, c := range f.Checks {
		if c.Skip == "" {
			runnable++
		}
	}
	repeat, variants = max(repeat, 1), max(variants, 1)
	// Compared by division, so that no product overflows.
	if runnable > 0 && (repeat > MaxRuns/runnable || repeat*runnable > MaxRuns/variants) {
		return fmt.Errorf("%s would make %s runs (%d %s x %d x %d %s), more than the %d one suite run may make",
			f.Path, runsProduct(runnable, repeat, variants), runnable, words.Plural(runnable, "check", "checks"),
			repeat, variants, words.Plural(variants, "environment", "environments"), MaxRuns)
	}
	return nil
}

// runsProduct is runnable*repeat*variants in decimal, however large.
func runsProduct(runnable, repeat, variants int) string {
	n := new(big.Int).SetInt64(int64(runnable))
	n.Mul(n, big.NewInt(int64(repeat)))
	n.Mul(n, big.NewInt(int64(variants)))
	return n.String()
}

// Run runs every check of f as opts says and returns the suite's result.
// A cancelled ctx stops the suite: the result holds the runs made so far,
// says it was interrupted (by the cause of ctx's end), and the error is
// ctx's; the command that writes it says the process's exit status
// (report.SuiteResult.ExitStatus).
// The runs the interruption stopped are recorded as interrupted, with the
// time they ran (no outcome: neither met nor unmet); the runs it came
// before are not run.
//
// Unless f asks for the user's find-db, every check runs with
// MIOPEN_USER_DB_PATH set to a folder of this run's own, removed when the
// last check has ended; the suite's, a check's and a variant's env may
// still set it.
func (r *Runner) Run(ctx context.Context, f *File, opts Options) (*report.SuiteResult, error) {
	if len(r.Command) == 0 {
		return nil, errors.New("suite runner: no miotool command to run checks with")
	}
	now := r.Now
	if now == nil {
		now = time.Now
	}
	repeat := max(opts.Repeat, 1)
	variants := append([]Variant{{}}, opts.Variants...)
	if err := CheckSize(f, repeat, len(variants)); err != nil {
		return nil, err
	}
	jobs := max(opts.Jobs, 1)
	whole := f
	f, plan, err := shardPart(f, opts)
	if err != nil {
		return nil, err
	}

	res := report.NewSuiteResult(f.Name, now())
	res.Title, res.File, res.Tool = f.Title, f.Path, r.Tool
	if r.Host != "" {
		res.Hosts = []string{r.Host}
	}
	res.Options = report.SuiteOptions{Repeat: repeat, Shuffle: opts.Shuffle, Seed: opts.Seed, CPULoad: opts.CPULoad, Jobs: jobs}
	for _, v := range opts.Variants {
		res.Options.Variants = append(res.Options.Variants, v.Label)
	}
	if plan != nil {
		res.Shard = &report.Shard{Index: plan.Shard.Index, Count: plan.Shard.Total, Split: report.ShardChecks, Set: plan.Split}
		res.Notes = append(res.Notes, plan.Note(whole))
	}
	for _, p := range f.Programs() {
		res.Notes = append(res.Notes, "other code than miotool's, as the user allowed: "+p)
	}
	rows := r.addRows(res, whole, plan, variants)

	environ := r.Environ
	if f.FindDB != FindDBUser {
		dir, err := os.MkdirTemp(r.TempDir, "miotool-suite-find-db-")
		if err != nil {
			return nil, fmt.Errorf("making the suite's scratch find-db folder: %w", err)
		}
		// Every check has ended by the time Run returns.
		defer removeScratchDB(dir)
		environ = mergeEnv(environ, []string{runenv.EnvUserDBPath + "=" + dir})
		res.Notes = append(res.Notes, "find-db: the checks ran on a scratch find-db, removed after the suite; `find-db: user` in the suite file runs them on yours")
	} else {
		res.Notes = append(res.Notes, "find-db: the checks ran on your find-db (MIOPEN_USER_DB_PATH, or its default), as the suite file asks (find-db: user)")
	}

	var resultDir string
	if r.ResultFlag != "" {
		dir, err := os.MkdirTemp(r.TempDir, "miotool-suite-results-")
		if err != nil {
			return nil, fmt.Errorf("making the suite's folder for its checks' results: %w", err)
		}
		defer os.RemoveAll(dir)
		resultDir = dir
	}

	if opts.CPULoad > 0 {
		stop := StartCPULoad(opts.CPULoad)
		defer stop()
	}
	steps := Plan(f, len(variants), repeat, opts.Shuffle, opts.Seed)
	if jobs > 1 {
		steps = ExclusiveFirst(f, steps)
	}
	runs := r.runSteps(ctx, f, steps, rows, environ, resultDir, jobs, opts.Devices, opts.Timeout, now)
	var runErr error
	order := 0
	for i, out := range runs {
		if !out.ran {
			runErr = ctx.Err() // stopped before this run started
			continue
		}
		st := steps[i]
		run := out.run
		order++
		run.Iteration, run.Order, run.Host = st.Iteration, order, r.Host
		if out.interrupted {
			// The interruption stopped the run: whatever the process
			// printed as it died is no verdict, but the check was
			// running, for as long as it ran.
			runErr = ctx.Err()
			run = report.SuiteRun{Host: run.Host, Iteration: run.Iteration, Order: run.Order,
				Verdict: report.Interrupted, ExitCode: run.ExitCode, Summary: interruption(ctx) + " while the check ran",
				PinnedDevice: run.PinnedDevice, Started: run.Started, Duration: run.Duration, StderrTail: run.StderrTail}
		} else if run.Verdict == f.Checks[st.Check].Expect {
			run.StderrTail = "" // kept only where someone will read it
		}
		row := rows[st.Variant][st.Check]
		row.Runs = append(row.Runs, run)
	}
	res.Notes = append(res.Notes, deviceNotes(opts.Devices, steps, runs, rows, repeat)...)
	if r.Progress != nil && runErr == nil {
		r.Progress(len(steps), len(steps), "")
	}
	if runErr != nil {
		res.Interrupted = interruption(ctx)
	}
	res.Duration = now().Sub(res.Started)
	return res, runErr
}

// shardPart is the part of f that opts' shard runs, and the plan of the
// split; f itself, and no plan, for the whole suite.
func shardPart(f *File, opts Options) (*File, *ShardPlan, error) {
	if opts.Shard.Whole() {
		return f, nil, nil
	}
	if err := CheckShard(f, opts.Shard); err != nil {
		return nil, nil, err
	}
	plan := PlanShard(f, opts.Shard, opts.Durations, opts.DurationsFrom)
	return f.only(plan.Checks), &plan, nil
}

// addRows adds to res one row per check of the whole suite and variant,
// in file order, whatever order they run in, and returns the rows the
// runs go into, by variant and by index into the part of the suite that
// runs here. A shard's result lists the other shards' checks too, each
// with the shard that runs it and no run, so that a merge keeps the
// suite's order and names each check of a shard it lacks.
func (r *Runner) addRows(res *report.SuiteResult, whole *File, plan *ShardPlan, variants []Variant) [][]*report.SuiteCheck {
	shardOf := make([]int, len(whole.Checks))
	if plan != nil {
		shardOf = plan.ShardOfEach(whole)
	}
	rows := make([][]*report.SuiteCheck, len(variants))
	for vi, v := range variants {
		for i, c := range whole.Checks {
			args := r.argsOf(c)
			row := &report.SuiteCheck{
				Name:    c.Name,
				Command: "miotool " + report.JoinCommandLine(args),
				Variant: v.Label,
				Env:     slices.Concat(whole.Env, c.Env, v.Env),
				Expect:  c.Expect,
				Skip:    c.Skip,
				Shard:   shardOf[i],
			}
			res.Checks = append(res.Checks, row)
			if plan == nil || row.Shard == plan.Shard.Index {
				rows[vi] = append(rows[vi], row)
			}
		}
	}
	return rows
}

// removeScratchDB removes a suite run's scratch find-db folder, and the
// lock files MIOpen's locking left for its files in MIOpen's lock folder
// (find takes that lock too): each suite run's folder is new, so they
// would pile up there otherwise.
func removeScratchDB(dir string) {
	if entries, err := os.ReadDir(dir); err == nil {
		for _, e := range entries {
			if lock, err := finddb.MIOpenLockFile(filepath.Join(dir, e.Name()), ""); err == nil {
				_ = os.Remove(lock)
			}
		}
	}
	_ = os.RemoveAll(dir)
}

// stepRun is what became of one step of the plan.
type stepRun struct {
	run report.SuiteRun
	// ran: the step's process was started (or could not be, for a reason
	// other than the interruption); the steps the interruption came
	// before did not run.
	ran bool
	// interrupted: ctx's end killed the run's process.
	interrupted bool
	// device is the index of the device the run was pinned to, among
	// the options' Devices.
	device int
	// resultFile is where the run writes its result; "" for its
	// standard output.
	resultFile string
	timeout    time.Duration
}

// runSteps runs the steps in order through childproc.Many, at most jobs
// at once over the devices (one when none are given) and an exclusive
// check's run alone on its device, until ctx ends. Many starts each
// child once a job is free, asking for its Spec in plan order; the Spec
// waits there for a place on a device (lanes), so that an exclusive run
// starts only once its device is idle, and the place is given back as
// the run is reported. It returns the outcome of every step, in plan
// order, those that did not run marked so: the result keeps the plan's
// order whatever the order runs end in.
func (r *Runner) runSteps(ctx context.Context, f *File, steps []Step, rows [][]*report.SuiteCheck, environ []string, resultDir string,
	jobs int, devices []string, timeoutOverride time.Duration, now func() time.Time) []stepRun {
	outs := make([]stepRun, len(steps))
	var (
		mu      sync.Mutex // over done, running and Progress's calls
		done    int
		running = map[int]string{} // step -> its row's name, for progress
	)
	places := newLanes(ctx, jobs, len(devices))
	defer places.close()
	progress := func(current string) {
		if r.Progress != nil {
			r.Progress(done, len(steps), current)
		}
	}
	spec := func(i int) childproc.Spec {
		st := steps[i]
		c := f.Checks[st.Check]
		device, ok := places.acquire(c.Exclusive)
		if !ok {
			return childproc.Spec{Skip: true} // ctx ended while it waited
		}
		row := rows[st.Variant][st.Check]
		mu.Lock()
		progress(row.Test())
		mu.Unlock()
		if ctx.Err() != nil {
			places.release(device)
			return childproc.Spec{Skip: true} // stopped before this run started
		}
		out := &outs[i]
		env := mergeEnv(environ, row.Env)
		if len(devices) > 0 {
			env = mergeEnv(env, pinEnv(devices[device]))
			out.run.PinnedDevice = devices[device]
		}
		out.device, out.timeout = device, runTimeout(f, c, timeoutOverride)
		resultArgs := r.ResultArgs
		if resultDir != "" {
			out.resultFile = filepath.Join(resultDir, fmt.Sprintf("run-%d.json", i))
			resultArgs = slices.Concat(resultArgs, []string{r.ResultFlag, out.resultFile})
		}
		mu.Lock()
		running[i] = row.Test()
		mu.Unlock()
		out.run.Started = now()
		// The check may start processes of its own (stress-threads
		// does): its whole process group is killed when it ends or
		// times out.
		return childproc.Spec{
			Path:      r.Command[0],
			Args:      slices.Concat(r.Command[1:], BeforeDash(r.argsOf(c), resultArgs...)),
			Env:       env,
			Dir:       f.Workdir,
			Timeout:   out.timeout,
			PipeGrace: r.PipeGrace,
		}
	}
	ended := func(i int, res childproc.Result, err error) {
		out := &outs[i]
		out.run.Duration = now().Sub(out.run.Started)
		out.run, out.interrupted = r.judge(out.run, res, err, out.resultFile, out.timeout)
		out.ran = true
		mu.Lock()
		done++
		delete(running, i)
		if jobs > 1 {
			// Side by side, the bar moves as runs end too, naming the
			// run that started first of those still going.
			first, current := len(steps), ""
			for k, name := range running {
				if k < first {
					first, current = k, name
				}
			}
			progress(current)
		}
		mu.Unlock()
		places.release(out.device)
	}
	childproc.Many(ctx, len(steps), jobs, spec, ended)
	return outs
}

// runTimeout bounds one run of c: the override, else the check's own
// timeout, else the file's, else DefaultTimeout.
func runTimeout(f *File, c Check, override time.Duration) time.Duration {
	switch {
	case override > 0:
		return override
	case c.Timeout > 0:
		return c.Timeout
	case f.Timeout > 0:
		return f.Timeout
	}
	return DefaultTimeout
}

// deviceNotes say, one line per device, which runs were pinned to it.
// The checklist's rows name the devices the runs' results reported; these
// lines name the device each run was given, which two GPUs of one model
// would not tell apart.
func deviceNotes(devices []string, steps []Step, runs []stepRun, rows [][]*report.SuiteCheck, repeat int) []string {
	if len(devices) == 0 {
		return nil
	}
	on := make([][]string, len(devices))
	for i, out := range runs {
		if !out.ran {
			continue
		}
		st := steps[i]
		name := rows[st.Variant][st.Check].Test()
		if repeat > 1 {
			name += fmt.Sprintf(" (run %d)", st.Iteration)
		}
		on[out.device] = append(on[out.device], name)
	}
	var notes []string
	for d, id := range devices {
		pinned := make([]string, len(DeviceVariables))
		for k, v := range DeviceVariables {
			pinned[k] = v + "=" + id
		}
		ran := "no run"
		if len(on[d]) > 0 {
			ran = strings.Join(on[d], ", ")
		}
		notes = append(notes, fmt.Sprintf("device %s (%s): %s", id, strings.Join(pinned, " "), ran))
	}
	return notes
}

// interruption says what ended ctx: its cause ("interrupted by SIGINT"),
// or "interrupted" when it was plainly cancelled.
func interruption(ctx context.Context) string {
	cause := context.Cause(ctx)
	if cause == nil || errors.Is(cause, context.Canceled) {
		return "interrupted"
	}
	if errors.Is(cause, context.DeadlineExceeded) {
		return "interrupted: the suite's deadline passed"
	}
	return cause.Error()
}

// argsOf are the arguments c runs with (see Runner.Args).
func (r *Runner) argsOf(c Check) []string {
	if r.Args == nil {
		return slices.Clone(c.Args)
	}
	return r.Args(c)
}

// judge turns how a check's process ended, and the result it wrote (in
// resultFile, or on its standard output when that is ""), into its run;
// interrupted says ctx's end killed it.
func (r *Runner) judge(run report.SuiteRun, res childproc.Result, err error, resultFile string, timeout time.Duration) (_ report.SuiteRun, interrupted bool) {
	run.StderrTail = res.Stderr.Last(stderrTailBytes)
	run.ExitCode = res.ExitCode()
	failed := func(format string, args ...any) (report.SuiteRun, bool) {
		run.Verdict = report.Error
		run.Summary = fmt.Sprintf(format, args...)
		if cause := ErrorLine(run.StderrTail); cause != "" {
			run.Summary += ": " + cause
		}
		return run, res.Canceled
	}
	switch {
	case err != nil && res.PID == 0:
		return failed("cannot start %s: %v", r.Command[0], err)
	case err != nil:
		return failed("running the check: %v", err)
	case res.TimedOut:
		return failed("no result within %v; the process was killed", timeout)
	case resultFile == "" && res.Stdout.Cut > 0:
		return failed("%s after more than %d bytes on standard output, more than a result", res.ExitText(), len(res.Stdout.Data))
	}
	doc, where := res.Stdout.Data, "on standard output"
	if resultFile != "" {
		var rerr error
		if doc, rerr = os.ReadFile(resultFile); rerr != nil {
			return failed("%s without writing its result file", res.ExitText())
		}
		where = "in its result file"
	}
	result, perr := report.ReadJSON(bytes.NewReader(doc))
	if perr != nil {
		return failed("%s without a result %s", res.ExitText(), where)
	}
	run.Detail, run.Summary, run.Backend, run.Device, run.Cases, run.Progress = result.Detail, result.Summary, result.Backend, result.Device, result.Cases, result.Progress
	if want := result.Verdict.ExitCode(); run.ExitCode != want && !interruptedBySignal(result.Verdict, run.ExitCode) {
		return failed("%s does not match its result's verdict %s (exit status %d)", res.ExitText(), result.Verdict, want)
	}
	run.Verdict = result.Verdict
	return run, res.Canceled
}

// interruptedBySignal says whether an INTERRUPTED result came with the
// status of the signal that stopped it: 143 for SIGTERM, which a batch
// system sends every process of a job (miotool ends with the signal's
// status when one comes before its own status is settled).
func interruptedBySignal(v report.Verdict, code int) bool {
	return v == report.Interrupted && (code == 128+int(syscall.SIGINT) || code == 128+int(syscall.SIGTERM))
}

// ErrorLine is the line of a child's standard error that says what went
// wrong: the last error miotool printed ("miotool: ..."; a hint such as
// "Run 'miotool doctor --help' for usage." follows it), else the first
// line of a Go crash ("panic: ...", "fatal error: ..."), else the last
// line.
func ErrorLine(stderr string) string {
	lines := strings.Split(stderr, "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		// A warning (an unknown MIOTOOL_* variable, a find-db that could
		// not be written) is not what ended the check.
		if l := strings.TrimSpace(lines[i]); strings.HasPrefix(l, "miotool: ") && !strings.HasPrefix(l, "miotool: warning: ") {
			return l
		}
	}
	for _, l := range lines {
		if l = strings.TrimSpace(l); strings.HasPrefix(l, "panic: ") || strings.HasPrefix(l, "fatal error: ") {
			return l
		}
	}
	return words.LastLines(stderr, 1)
}

// BeforeDash is args with flags put in before a "--" (after which a trace
// check's program and its own arguments follow), else at the end.
func BeforeDash(args []string, flags ...string) []string {
	i := slices.Index(args, "--")
	if i < 0 {
		return slices.Concat(args, flags)
	}
	return slices.Concat(args[:i], flags, args[i:])
}

// mergeEnv is base with extra's variables set, later assignments winning.
func mergeEnv(base, extra []string) []string {
	if len(extra) == 0 {
		return base
	}
	set := map[string]bool{}
	for _, kv := range extra {
		k, _, _ := strings.Cut(kv, "=")
		set[k] = true
	}
	out := make([]string, 0, len(base)+len(extra))
	for _, kv := range base {
		k, _, _ := strings.Cut(kv, "=")
		if !set[k] {
			out = append(out, kv)
		}
	}
	// Among extra, the last assignment of a name wins.
	last := map[string]int{}
	for i, kv := range extra {
		k, _, _ := strings.Cut(kv, "=")
		last[k] = i
	}
	for i, kv := range extra {
		k, _, _ := strings.Cut(kv, "=")
		if last[k] == i {
			out = append(out, kv)
		}
	}
	return out
}
