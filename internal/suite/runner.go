package suite

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"miotool/internal/childproc"
	"miotool/internal/report"
)

// Runner runs suites. Each run of a check is a process of Command followed
// by the check's arguments and ResultArgs; its standard output must be one
// miotool/result result (any version ReadJSON reads).
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
	// ResultArgs end every run's command line, after the check's
	// arguments: what makes it print its result as one miotool/result
	// JSON document on standard output and nothing else there.
	ResultArgs []string
	Host       string
	Tool       report.Tool
	Now        func() time.Time
	// Progress, when set, hears of each run as it starts (done runs so
	// far, all runs, the check's name) and once more when all are done.
	Progress func(done, total int, current string)
	// PipeGrace is how long a check's output pipes may stay open after it
	// ended (held by a process it started that left its process group)
	// before the runner stops waiting; 0 means childproc's default.
	PipeGrace time.Duration
}

// Options say how to run a suite.
type Options struct {
	Repeat  int  // runs of each check per variant; 0 counts as 1
	Shuffle bool // shuffle each pass over the checks
	Seed    uint64
	CPULoad int // busy CPU workers kept running while the checks run
	// Variants are environments to run the whole suite in again, after
	// the baseline.
	Variants []Variant
	// Timeout, when positive, bounds every run in place of the file's
	// timeouts.
	Timeout time.Duration
}

// stderrTailBytes is how much of a check's standard error is kept.
const stderrTailBytes = 4096

// Run runs every check of f as opts says and returns the suite's result.
// A cancelled ctx stops the suite: the result holds the runs made so far,
// says it was interrupted (by the cause of ctx's end), and the error is
// ctx's. The run the interruption stopped is recorded as interrupted,
// with the time it ran (no outcome: neither met nor unmet); the checks it
// never reached are not run.
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

	res := report.NewSuiteResult(f.Name, now())
	res.Title, res.File, res.Tool = f.Title, f.Path, r.Tool
	if r.Host != "" {
		res.Hosts = []string{r.Host}
	}
	res.Options = report.SuiteOptions{Repeat: repeat, Shuffle: opts.Shuffle, Seed: opts.Seed, CPULoad: opts.CPULoad}
	for _, v := range opts.Variants {
		res.Options.Variants = append(res.Options.Variants, v.Label)
	}
	// One result row per check and variant, in file order, whatever order
	// they run in.
	rows := make([][]*report.SuiteCheck, len(variants))
	for vi, v := range variants {
		for _, c := range f.Checks {
			args := r.argsOf(c)
			row := &report.SuiteCheck{
				Name:    c.Name,
				Command: "miotool " + report.JoinCommandLine(args),
				Variant: v.Label,
				Env:     slices.Concat(f.Env, c.Env, v.Env),
				Expect:  c.Expect,
				Skip:    c.Skip,
			}
			rows[vi] = append(rows[vi], row)
			res.Checks = append(res.Checks, row)
		}
	}

	if opts.CPULoad > 0 {
		stop := StartCPULoad(opts.CPULoad)
		defer stop()
	}
	steps := Plan(f, len(variants), repeat, opts.Shuffle, opts.Seed)
	var runErr error
	for i, st := range steps {
		if err := ctx.Err(); err != nil {
			runErr = err
			break
		}
		c := f.Checks[st.Check]
		row := rows[st.Variant][st.Check]
		if r.Progress != nil {
			r.Progress(i, len(steps), row.Test())
		}
		if err := ctx.Err(); err != nil {
			runErr = err // stopped before this run started
			break
		}
		timeout := c.Timeout
		if timeout == 0 {
			timeout = f.Timeout
		}
		if opts.Timeout > 0 {
			timeout = opts.Timeout
		}
		if timeout <= 0 {
			timeout = DefaultTimeout
		}
		run := r.runOnce(ctx, f.Workdir, r.argsOf(c), row.Env, timeout, now)
		run.Iteration, run.Order, run.Host = st.Iteration, i+1, r.Host
		if ctx.Err() != nil {
			// The interruption stopped the run: whatever the process
			// printed as it died is no verdict, but the check was
			// running, for as long as it ran.
			runErr = ctx.Err()
			row.Runs = append(row.Runs, report.SuiteRun{Host: run.Host, Iteration: run.Iteration, Order: run.Order,
				Verdict: report.Interrupted, ExitCode: run.ExitCode, Summary: interruption(ctx) + " while the check ran",
				Started: run.Started, Duration: run.Duration, StderrTail: run.StderrTail})
			break
		}
		if run.Verdict == c.Expect {
			run.StderrTail = "" // kept only where someone will read it
		}
		row.Runs = append(row.Runs, run)
	}
	if r.Progress != nil && runErr == nil {
		r.Progress(len(steps), len(steps), "")
	}
	if runErr != nil {
		res.Interrupted = interruption(ctx)
	}
	res.Duration = now().Sub(res.Started)
	return res, runErr
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

// runOnce runs one miotool process and turns what it printed into a run.
func (r *Runner) runOnce(ctx context.Context, dir string, args, env []string, timeout time.Duration, now func() time.Time) report.SuiteRun {
	run := report.SuiteRun{Started: now()}
	// The check may start processes of its own (stress-threads does): the
	// runner kills its whole process group when it ends or times out.
	res, err := childproc.Run(ctx, childproc.Spec{
		Path:      r.Command[0],
		Args:      slices.Concat(r.Command[1:], args, r.ResultArgs),
		Env:       mergeEnv(r.Environ, env),
		Dir:       dir,
		Timeout:   timeout,
		PipeGrace: r.PipeGrace,
	})
	run.Duration = now().Sub(run.Started)
	run.StderrTail = res.Stderr.Last(stderrTailBytes)
	run.ExitCode = res.ExitCode()
	failed := func(format string, args ...any) report.SuiteRun {
		run.Verdict = report.Error
		run.Summary = fmt.Sprintf(format, args...)
		if last := childproc.LastLines(run.StderrTail, 1); last != "" {
			run.Summary += ": " + last
		}
		return run
	}
	switch {
	case err != nil && res.PID == 0:
		return failed("cannot start %s: %v", r.Command[0], err)
	case err != nil:
		return failed("running the check: %v", err)
	case res.TimedOut:
		return failed("no result within %v; the process was killed", timeout)
	case res.Stdout.Cut > 0:
		return failed("%s after more than %d bytes on standard output, more than a result", res.ExitText(), len(res.Stdout.Data))
	}
	result, perr := report.ReadJSON(bytes.NewReader(res.Stdout.Data))
	if perr != nil {
		return failed("%s without a result on standard output", res.ExitText())
	}
	run.Status, run.Summary, run.Backend, run.Device, run.Cases = result.Status, result.Summary, result.Backend, result.Device, result.Cases
	if want := result.Verdict.ExitCode(); run.ExitCode != want {
		return failed("%s does not match its result's verdict %s (exit status %d)", res.ExitText(), result.Verdict, want)
	}
	run.Verdict = result.Verdict
	return run
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
