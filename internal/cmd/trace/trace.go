// Package trace is `miotool trace -- PROGRAM`: its options, flags, the
// run of the program under the observer, and the rendering of what the
// trace saw.
package trace

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"miotool/internal/childproc"
	"miotool/internal/cli"
	"miotool/internal/report"
	"miotool/internal/trace"
	"miotool/internal/userfile"
	"miotool/internal/words"
)

// TraceOptions are the inputs of `miotool trace`.
type TraceOptions struct {
	IO          *cli.IOStreams
	Global      cli.GlobalOptions
	CommandLine string
	Now         func() time.Time
	Verbosef    func(format string, args ...any)
	// Environ is the program's environment (os.Environ).
	Environ func() []string
	// TraceProgram traces a program (trace.Run) and BuildObserver builds
	// the observer (trace.Build); tests replace them.
	TraceProgram  func(context.Context, trace.Options) (*trace.Result, error)
	BuildObserver func(context.Context, trace.BuildOptions) (string, error)

	Timeout  time.Duration
	Strict   bool
	Observer string
	// SaveRecords names the file the observer's records are saved to.
	SaveRecords string

	// Program and Args are what follows --.
	Program string
	Args    []string
}

// usageLine is how the command is typed.
const usageLine = "miotool trace [flags] -- PROGRAM [ARGS...]"

// NewCmdTrace builds `miotool trace`; runF, when set, replaces the run function.
func NewCmdTrace(f *cli.Factory, runF func(*TraceOptions) error) *cobra.Command {
	opts := &TraceOptions{IO: f.IOStreams, Now: f.Now, Verbosef: f.Verbosef, Environ: os.Environ,
		TraceProgram: trace.Run, BuildObserver: trace.Build}
	cmd := &cobra.Command{
		Use:   "trace [flags] -- PROGRAM [ARGS...]",
		Short: "Run any program and name the call that broke its stream capture: thread, stream, library",
		Long: `trace runs PROGRAM with its arguments as a child process, observes the GPU
runtime calls of every process it starts, and judges each stream capture they
made: which call broke it, on which thread, and which library made the call.

Everything after -- belongs to the program, its own flags included; miotool's
flags go before it. The program gets miotool's standard input, output and
error as they are (a terminal stays a terminal; a reader that has gone gives
it SIGPIPE), and miotool's result follows its output once it has ended, on a
line of its own. With --format json the result is one line, the last, so
that a script reads it whatever the program printed:

  miotool trace --format json -- python3 train.py | tail -n 1 | jq .exit_code

--export-json FILE, --export-markdown FILE and --junit FILE write files of
their own. The program runs in a process group
of its own, which is killed when the program ends (nothing it started
outlives it), when --timeout runs out, and when miotool dies; on a terminal
it has the foreground, so Ctrl-C reaches it as from a shell.

What is observed: CUDA's driver API through CUPTI callbacks, with an injection
library (CUDA_INJECTION64_PATH), which sees every driver call, the ones the
CUDA runtime makes included; HIP through an LD_PRELOAD interposer over
libamdhip64's capture-relevant functions, which sees the calls a program or
library linked to libamdhip64 makes (one that dlopens libamdhip64 and looks up
its functions itself bypasses it; AMD's rocprofiler-sdk traces those). The
observer is a small C library, built on first use with the system C compiler
into the user cache directory, or given prebuilt with --observer
(MIOTOOL_TRACE_OBSERVER). A statically linked program cannot be observed.

What is judged: for each capture, who began it (process, thread and its name,
stream, mode, time, the Python line of a Python thread, and the device that
thread was on, as the runtime names it: the result's device), how its
end-capture returned, how many nodes its graph has, how many calls were made
during it and from how many threads, and every call the runtime refused while
it was active (900-908) with its native callers and, for a Python thread, its
Python stack. FAIL when a capture was invalidated, failed or never ended, or a
call was refused during one, or the program crashed, hung or exited non-zero.
PASS only when at least one capture ran, every capture ended with success,
nothing was refused and the program exited 0. A program that began no capture
is SKIP, "no capture began: nothing to check" (exit 4), only when the observer
was in it and it exited 0 (graphs it built without capture and launched are
named); a program that failed is FAIL however many captures it began, and one
the trace could not observe (statically linked, setuid, CUPTI missing or taken,
a trace inside a trace) is ERROR (exit 3), saying why. The headline names the
first culprit in the user's words: the earliest refused call before the end of
a capture that did not end well (a 901 only reports an earlier refusal), by
its Python line and thread, e.g. "torch.cuda.synchronize() at train.py:42 in
log_metrics, thread 561 "metrics" (cuCtxSynchronize)"; each failed capture
gets one screen, from who began it to its first refused call and what
followed. Native callers read innermost first, "←" meaning "called from",
without the runtime's own frames (libcuda, libcudart, a static cudart,
libamdhip64, libc): "cudaMalloc ← cupy_backends.cuda.api.runtime.malloc".

Hazards: a call that succeeded only because the capture was begun in relaxed
or thread-local mode, and that a global-mode capture refuses or is
invalidated by, as the measured rules tables say (configs/rules/h200-cuda.yaml
and configs/rules/hip.yaml, what 'miotool rules' checks a device against), is
listed with the table cell that makes it one. It passes today and breaks the
day someone captures in global mode (PyTorch's default). A call whose own
thread switched itself to a mode the tables say is safe under every capture
(MIOpen's ScopedRelaxedCaptureMode, PyTorch's allocator) is counted as
guarded, not a hazard. Work launched during a capture into a stream that was
not part of it is listed as outside the capture. --strict makes hazards and
work outside a capture fail.

Exit status: 0 PASS; 1 FAIL; 2 the program does not exist or cannot be
executed, or another usage error; 3 the tool failed, or the program could not
be observed; 4 no capture began in a program that exited 0, or no C compiler
to build the observer with (each says what to install); 130 (SIGINT) or 143
(SIGTERM) when miotool was interrupted: the program's group gets the same
signal, then SIGKILL after 5s, and the result says INTERRUPTED with what was
seen. A program that SIGINT ended (Ctrl-C on its terminal) is INTERRUPTED too.`,
		Example: `  # A PyTorch step whose capture breaks: which call, which thread, which library
  miotool trace -- python3 train_step.py

  # A MIOpen gtest, as a row for a PR's testing checklist
  miotool trace --format markdown -- ./bin/test_naive_timeout --gtest_filter='*Capture*'

  # miotool's own pre-fix reclaim under the trace: FAIL naming cuStreamQuery
  miotool trace -- miotool --backend cuda capture --mode=global --reclaim=lazy`,
		Args:              cli.ProgramAfterDash("trace", usageLine),
		ValidArgsFunction: completeProgram(opts.Environ),
		RunE:              cli.RunE(f, opts, runF),
	}
	cmd.SetFlagErrorFunc(cli.ProgramFlagError(usageLine))
	fl := cmd.Flags()
	fl.SortFlags = false
	fl.DurationVar(&opts.Timeout, "timeout", 0, "watchdog: kill the program's process group after this long and judge it hung (0: none)")
	fl.BoolVar(&opts.Strict, "strict", false, "fail on hazards (calls that only the capture's relaxed or thread-local mode let through) and on work launched outside a capture")
	fl.StringVar(&opts.Observer, "observer", "", "a prebuilt observer library to use instead of building one (also "+envObserver+")")
	fl.StringVar(&opts.SaveRecords, "save-records", "", "also save the observer's records of the run to `FILE`, with the run's facts: what a bug report or a test replays")
	_ = cmd.MarkFlagFilename("save-records", "records")
	cli.MarkOutputFile(cmd, "save-records")
	_ = cmd.MarkFlagFilename("observer", "so")
	cli.MarkInputFile(cmd, "observer")
	// The program and its arguments may name files it reads or writes,
	// which no result file may replace.
	cli.MarkInputArgs(cmd)
	return cmd
}

// envObserver is the environment's spelling of --observer, and
// prebuiltHint the way round a missing compiler or cache directory.
var (
	envObserver  = cli.EnvName("trace.observer")
	prebuiltHint = "give a prebuilt observer with --observer PATH or " + envObserver
)

// writeRunFacts ends saved records with the run's facts the records do not
// hold, as "#!" lines: the form the golden tests replay
// (testdata/golden/README in the test).
func writeRunFacts(b *bytes.Buffer, r *trace.Result) {
	fmt.Fprintf(b, "#! program %s\n", report.JoinCommandLine(append([]string{r.Program}, r.Args...)))
	if r.Path != "" && r.Path != r.Program {
		fmt.Fprintf(b, "#! path %s\n", r.Path)
	}
	switch e := r.Exit; {
	case e.Interrupted:
		fmt.Fprintf(b, "#! interrupted %s\n", childproc.SignalName(e.Forwarded))
	case e.Signal != 0:
		fmt.Fprintf(b, "#! signal %s\n", childproc.SignalName(e.Signal))
	case e.Code != 0:
		fmt.Fprintf(b, "#! exit %d\n", e.Code)
	}
	if r.Executable.Static {
		b.WriteString("#! static\n")
	}
}

// writerOrNil is b as an io.Writer, nil when b is: a nil *bytes.Buffer in
// an interface is not a nil writer.
func writerOrNil(b *bytes.Buffer) io.Writer {
	if b == nil {
		return nil
	}
	return b
}

// reportVerdict is a trace's verdict as a result states it: a program the
// trace could not observe is an ERROR, never a SKIP a CI would accept.
func reportVerdict(v trace.Verdict) report.Verdict {
	switch v {
	case trace.Pass:
		return report.Pass
	case trace.Fail:
		return report.Fail
	case trace.NothingToCheck:
		return report.Skip
	case trace.Interrupted:
		return report.Interrupted
	case trace.CouldNotObserve:
		return report.Error
	}
	return report.Error
}

// completeProgram completes what follows --: the program, as a shell
// completes a command (the executables on $PATH, or files where the word
// has a slash), then the program's own arguments, as files.
func completeProgram(environ func() []string) cobra.CompletionFunc {
	return func(cmd *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
		dash := cmd.ArgsLenAtDash()
		switch {
		case dash < 0:
			return []cobra.Completion{"--"}, cobra.ShellCompDirectiveNoFileComp
		case len(args) > dash || strings.Contains(toComplete, "/"):
			return nil, cobra.ShellCompDirectiveDefault
		}
		return trace.Executables(environ(), toComplete), cobra.ShellCompDirectiveNoFileComp
	}
}

// Complete reads the global options and the program.
func (o *TraceOptions) Complete(f *cli.Factory, cmd *cobra.Command, args []string) error {
	o.Global = f.Global
	o.CommandLine = f.CommandLine()
	o.Program, o.Args = args[0], args[1:]
	return nil
}

// Validate checks, before anything is built or started, the watchdog, the
// program and a given observer. The files the output flags name were
// checked before (they can be written, none is the program or one of its
// arguments).
func (o *TraceOptions) Validate() error {
	if o.Timeout < 0 {
		return cli.UsageErrorf("--timeout %v: want 0 (none) or a positive duration such as 10m", o.Timeout)
	}
	path, err := trace.LookProgram(o.Program, o.Environ(), "")
	if err != nil {
		return cli.UsageError(err)
	}
	// A program the observer cannot load into (set-ID) would be run for
	// nothing: say so before it runs. A statically linked one may start
	// programs that are observed, so its result explains instead.
	if p := trace.CheckProgram(path, o.Environ()); p != nil && p.Refuse {
		return cli.UsageErrorf("%s cannot be traced: %s", o.Program, p.Reason)
	}
	if o.Observer != "" {
		if st, err := os.Stat(o.Observer); err != nil {
			return cli.UsageErrorf("--observer %s: %v", o.Observer, unwrapPath(err))
		} else if !st.Mode().IsRegular() {
			return cli.UsageErrorf("--observer %s: not a file (give the observer library, %s)", o.Observer, trace.ObserverLibrary)
		}
		if err := trace.CheckObserver(o.Observer); err != nil {
			return cli.UsageErrorf("--observer: %v", err)
		}
	}
	return nil
}

func unwrapPath(err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// interruptSignal is the signal that interrupted ctx, to forward to the
// program's group: SIGTERM for SIGTERM, SIGINT otherwise.
func interruptSignal(ctx context.Context) func() syscall.Signal {
	return func() syscall.Signal {
		var in *cli.Interruption
		if errors.As(context.Cause(ctx), &in) {
			if s, ok := in.Signal.(syscall.Signal); ok {
				return s
			}
		}
		return syscall.SIGINT
	}
}

// Run builds the observer when none is given, runs the program under it,
// and judges what the observer saw.
func (o *TraceOptions) Run(ctx context.Context) (*cli.Outcome, error) {
	start := o.Now()
	r := report.New("trace", o.CommandLine, start)
	observer := o.Observer
	if observer == "" {
		o.Verbosef("building the trace observer (or taking it from the cache)")
		var err error
		observer, err = o.BuildObserver(ctx, trace.BuildOptions{})
		if err != nil {
			return cli.Single(o.buildFailed(ctx, r, err)), nil
		}
	}
	o.Verbosef("trace observer: %s", observer)
	// The program gets miotool's own standard output, not the writer that
	// wraps it, so that it sees what it would see without miotool.
	var stdout io.Writer = o.IO.Out
	if f := o.IO.OutFile(); f != nil {
		stdout = f
	}
	var records *bytes.Buffer
	if o.SaveRecords != "" {
		records = &bytes.Buffer{}
	}
	res, err := o.TraceProgram(ctx, trace.Options{
		Program: o.Program, Args: o.Args, Env: o.Environ(),
		Stdin: o.IO.In, Stdout: stdout, Stderr: o.IO.ErrOut,
		Timeout: o.Timeout, Observer: observer, InterruptSignal: interruptSignal(ctx),
		Records: writerOrNil(records),
	})
	if err == nil && records != nil {
		writeRunFacts(records, res)
		if werr := userfile.Write(o.SaveRecords, records.Bytes(), userfile.Options{NewMode: 0o644}); werr != nil {
			err = fmt.Errorf("--save-records %s: %w", o.SaveRecords, werr)
		}
	}
	if err != nil {
		var ue *trace.UsageError
		if errors.As(err, &ue) {
			return nil, cli.UsageError(err)
		}
		return nil, fmt.Errorf("trace: %w", err)
	}
	rules, err := trace.BuiltinRules()
	if err != nil {
		return nil, fmt.Errorf("trace: %w", err)
	}
	judged(r, res, o.Strict, rules, o.Now())
	return cli.Single(r).AfterProgram(res.Exit.Stdout.NewlineFirst()), nil
}

// buildFailed is the result of a trace whose observer could not be built:
// SKIP when there is no compiler (exit 4, with what to install),
// INTERRUPTED when miotool was, ERROR when the compiler failed.
func (o *TraceOptions) buildFailed(ctx context.Context, r *report.Result, err error) *report.Result {
	var nc *trace.NoCompilerError
	var be *trace.BuildError
	switch {
	case errors.As(err, &nc):
		r.Finish(report.Skip, nc.Error()+", or "+prebuiltHint, o.Now())
	case ctx.Err() != nil:
		r.Finish(report.Interrupted, "interrupted while building the trace observer: the program was not started", o.Now())
	case errors.As(err, &be):
		r.Finish(report.Error, fmt.Sprintf("building the trace observer failed (%s): %v", strings.Join(be.Command, " "), be.Err), o.Now())
		if out := strings.TrimSpace(be.Output); out != "" {
			for _, l := range strings.Split(words.LastLines(out, 20), "\n") {
				r.Note("compiler: %s", l)
			}
		}
	default:
		r.Finish(report.Error, fmt.Sprintf("the trace observer: %v: %s", err, prebuiltHint), o.Now())
	}
	r.Note("the program was not started: %s", report.JoinCommandLine(append([]string{o.Program}, o.Args...)))
	return r
}
