// Package repeat is `miotool repeat -- PROGRAM`: its options, flags, the
// runs, the judgement of what they did and its rendering.
package repeat

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"miotool/internal/buildinfo"
	"miotool/internal/cli"
	"miotool/internal/repeat"
	"miotool/internal/report"
	"miotool/internal/stats"
	"miotool/internal/suite"
	"miotool/internal/trace"
)

// RepeatOptions are the inputs of `miotool repeat`.
type RepeatOptions struct {
	IO          *cli.IOStreams
	Global      cli.GlobalOptions
	CommandLine string
	Build       buildinfo.Info
	Now         func() time.Time
	Verbosef    func(format string, args ...any)
	ProgressBar func(label string) *cli.ProgressBar
	// Environ is the runs' environment before --env (os.Environ);
	// LookupEnv reads SHARD_INDEX and TOTAL_SHARDS.
	Environ   func() []string
	LookupEnv func(string) (string, bool)
	NumCPU    func() int
	// Many runs the children (repeat.DefaultMany when nil); tests replace
	// it.
	Many repeat.ManyFunc
	// Crashes, when set, opens the source of the runs' crash reports and
	// returns the function that closes it; nil runs without crash reports.
	Crashes func(ctx context.Context) (repeat.CrashSource, func() error, error)
	// crashNote says why the runs went without a crash handler.
	crashNote string

	Runs, Jobs int
	Timeout    time.Duration
	Against    string
	Baseline   string
	Devices    string
	Shard      string
	CPULoad    int
	Env        []string
	Confidence string
	Label      string

	// Program and Args are what follows --.
	Program string
	Args    []string

	// What Complete and Validate made of the flags.
	against    []string
	paths      []string // the program's and the against program's executables
	devices    []string
	shard      shard
	env        []string
	confidence float64
	baseline   *baseline
}

// usageLine is how the command is typed.
const usageLine = "miotool repeat [flags] -- PROGRAM [ARGS...]"

// Bounds on what a user sets, each past any sane use.
const (
	// maxRuns: each run is a process; a build's outcomes are counts.
	maxRuns = 1000000
	// maxJobs: runs at a time, each a process.
	maxJobs = 256
	// defaultRuns is a first look: the bound of 10 runs that all pass is
	// 26%, which the result says.
	defaultRuns = 10
	// defaultTimeout: a run still going after it is hung.
	defaultTimeout = 10 * time.Minute
)

// Labels of the builds in a comparison, the seed's words.
const (
	fixedLabel   = "Patched"
	unfixedLabel = "Unpatched"
	soloLabel    = "This build"
)

// NewCmdRepeat builds `miotool repeat`; runF, when set, replaces the run
// function.
func NewCmdRepeat(f *cli.Factory, runF func(*RepeatOptions) error) *cobra.Command {
	opts := &RepeatOptions{IO: f.IOStreams, Build: f.Build, Now: f.Now, Verbosef: f.Verbosef, ProgressBar: f.ProgressBar,
		Environ: os.Environ, LookupEnv: f.LookupEnv, NumCPU: f.NumCPU, Crashes: openCrashes}
	cmd := &cobra.Command{
		Use:   "repeat [flags] -- PROGRAM [ARGS...]",
		Short: "Run a program many times, each a fresh process: its failure rate, its crashes by where they happened, and whether a fix is shown",
		Long: `repeat runs PROGRAM with its arguments --runs times, each run a fresh process
in a process group of its own, --jobs at a time, and counts how each run ended:
passed (exit status 0), failed (its exit status), crashed (the signal, and
whether it left a core) or hung (still running after --timeout, then killed
with everything it started). The program's standard input is empty; what it
prints is read, and the last lines of standard error are kept for each group
of runs that ended alike.

Runs that did not pass are grouped by where they ended: a crashed Python
thread by its Python frames as CPython's faulthandler prints them (python -X
faulthandler, PYTHONFAULTHANDLER=1, pytest's default), anything else by its
signal or exit status and the last lines of its standard error, with the
numbers in them (addresses, pids, times) masked.

Statistics: the failure rate with its exact interval (Clopper-Pearson) at
--confidence (default 95%), or with no failure its one-sided bound ("0 of
220: below 1.35% at 95% confidence"). Against the unfixed build, given as a
result of an earlier run (--baseline FILE, from --format json or
--export-json) or as a command run beside this one (--against 'CMD', both
builds interleaved run by run so that the host's load falls on both alike),
the one-sided Fisher exact test says whether the fix is shown at the
confidence asked; when it is not, the result says how many runs per build
would show it half the time and four times in five if the rates are as
measured (the n at which the test's exact power, over both builds' binomial
counts, reaches 50% and 80%).

Verdict: without an unfixed build, PASS when every run passed, FAIL when one
did not. With one, PASS only when the improvement is shown; fewer failures
not yet shown are FAIL, "Not shown", with the runs that would decide (a CI
must not read an undecided comparison as success); as many failures or more
are FAIL.

--devices 0,1,2,3 spreads the runs over those GPUs, each run seeing one
(CUDA_VISIBLE_DEVICES and HIP_VISIBLE_DEVICES), and counts them by device; a
device whose runs fail significantly more often than the others' is flagged.
--shard I/N makes this run the I-th of N even parts of the runs (1-based;
SHARD_INDEX and TOTAL_SHARDS, as CI systems set them, when --shard is not
given); the result names its shard. --cpu-load N keeps N busy workers running
beside the runs; each --env KEY=VALUE (KEY=VALUE,KEY2=VALUE2 sets several)
is set in every run's environment. Every run gets MIOTOOL_REPEAT_RUN, its
number from 0, to seed or name what it writes by.

--against's command is split into words as a shell would split them, quotes
included, and run without a shell: write sh -c '...' for a pipe or a
variable. It comes from the command line only, never from a config file.

Exit status: 0 PASS; 1 FAIL (a run did not pass, or the fix is not shown); 2
usage error (the program cannot be run, a baseline that is not a repeat's
result of the same program); 3 runs could not be started; 130 (SIGINT) or 143
(SIGTERM) when interrupted: the runs going are killed, and the result says
INTERRUPTED with the statistics of every run that finished.`,
		Example: `  # ROCM-27477's validation: 220 runs over 4 GPUs, 4 at a time
  miotool repeat --runs 220 --jobs 4 --devices 0,1,2,3 -- python3 test_threads.py

  # The unfixed build's runs kept as a baseline, then the fix against them
  miotool repeat --runs 220 --label Unpatched --export-json before.json -- python3 test_threads.py
  miotool repeat --runs 220 --baseline before.json --format markdown -- python3 test_threads.py

  # Both builds run by run, the unfixed one through its own library path
  miotool repeat --runs 400 --against 'env LD_LIBRARY_PATH=/opt/unpatched python3 test_threads.py' -- python3 test_threads.py`,
		Args: cli.ProgramAfterDash("repeat", usageLine),
		RunE: cli.RunE(f, opts, runF),
	}
	cmd.SetFlagErrorFunc(cli.ProgramFlagError(usageLine))
	fl := cmd.Flags()
	fl.SortFlags = false
	fl.IntVar(&opts.Runs, "runs", defaultRuns, fmt.Sprintf("runs of each build, each a fresh process (1 to %d)", maxRuns))
	fl.IntVar(&opts.Jobs, "jobs", 1, fmt.Sprintf("runs at a time (1 to %d)", maxJobs))
	fl.DurationVar(&opts.Timeout, "timeout", defaultTimeout, "a run still going after this is killed, with everything it started, and counted as hung (0: no bound)")
	fl.StringVar(&opts.Confidence, "confidence", "95%", "confidence of the intervals and of the test against the unfixed build, in percent (50 to 99.999)")
	fl.StringVar(&opts.Baseline, "baseline", "", "the result of the unfixed build's runs (miotool repeat's JSON) to compare with")
	fl.StringVar(&opts.Against, "against", "", "the unfixed build's command, run interleaved with PROGRAM run by run, to compare with")
	fl.StringVar(&opts.Label, "label", "", "this build's name in the result (default \""+fixedLabel+"\" when compared, else \""+soloLabel+"\")")
	fl.StringVar(&opts.Devices, "devices", "", "spread the runs over these GPUs, e.g. 0,1,2,3 (each run sees one)")
	fl.StringVar(&opts.Shard, "shard", "", "run the I-th of N even parts of the runs, as I/N (default from SHARD_INDEX and TOTAL_SHARDS)")
	fl.IntVar(&opts.CPULoad, "cpu-load", 0, fmt.Sprintf("keep N busy CPU workers running beside the runs (at most %d per core)", cli.MaxCPULoadPerCore))
	fl.StringArrayVar(&opts.Env, "env", nil, "set KEY=VALUE in every run's environment (repeatable; KEY=VALUE,KEY2=VALUE2 sets several)")
	_ = cmd.MarkFlagFilename("baseline", "json")
	cli.MarkInputFile(cmd, "baseline")
	// The program and its arguments may name files it reads or writes,
	// which no result file may replace.
	cli.MarkInputArgs(cmd)
	return cmd
}

// Complete reads the global options, the program, the shard (the flag,
// else SHARD_INDEX and TOTAL_SHARDS) and the --env assignments.
func (o *RepeatOptions) Complete(f *cli.Factory, cmd *cobra.Command, args []string) error {
	o.Global = f.Global
	o.CommandLine = f.CommandLine()
	o.Program, o.Args = args[0], args[1:]
	compared := o.Baseline != "" || o.Against != ""
	if o.Label == "" {
		o.Label = soloLabel
		if compared {
			o.Label = fixedLabel
		}
	}
	variants, err := suite.ParseVariants(o.Env)
	if err != nil {
		return cli.UsageErrorf("--env %v", err)
	}
	o.env = nil
	for _, v := range variants {
		o.env = append(o.env, v.Env...)
	}
	return nil
}

// Validate checks, before anything runs, the counts, the confidence, the
// programs, the devices, the shard and the baseline.
func (o *RepeatOptions) Validate() error {
	switch {
	case o.Runs < 1 || o.Runs > maxRuns:
		return cli.UsageErrorf("--runs %d: want 1 to %d", o.Runs, maxRuns)
	case o.Jobs < 1 || o.Jobs > maxJobs:
		return cli.UsageErrorf("--jobs %d: want 1 to %d", o.Jobs, maxJobs)
	case o.Timeout < 0:
		return cli.UsageErrorf("--timeout %v: want 0 (no bound) or a positive duration such as 10m", o.Timeout)
	case o.Against != "" && o.Baseline != "":
		return cli.UsageErrorf("--against and --baseline: give the unfixed build once, as a command to run beside this one or as an earlier result")
	case strings.TrimSpace(o.Label) == "":
		return cli.UsageErrorf("--label: give the build a name")
	}
	if err := cli.CheckCPULoad(o.CPULoad, o.NumCPU()); err != nil {
		return err
	}
	var err error
	if o.confidence, err = parseConfidence(o.Confidence); err != nil {
		return cli.UsageErrorf("--confidence %s: %v", o.Confidence, err)
	}
	if o.devices, err = parseDevices(o.Devices); err != nil {
		return cli.UsageErrorf("--devices %s: %v", o.Devices, err)
	}
	if err := o.validateShard(); err != nil {
		return err
	}
	env := o.runEnv()
	path, err := trace.LookProgram(o.Program, env, "")
	if err != nil {
		return cli.UsageError(err)
	}
	o.paths = []string{path}
	o.against = nil
	if o.Against != "" {
		words, err := report.SplitCommandLine(o.Against)
		if err != nil || len(words) == 0 {
			return cli.UsageErrorf("--against %q: want the unfixed build's command line (%v)", o.Against, orEmpty(err))
		}
		apath, err := trace.LookProgram(words[0], env, "")
		if err != nil {
			return cli.UsageErrorf("--against: %v", err)
		}
		o.against, o.paths = words, append(o.paths, apath)
	}
	o.baseline = nil
	if o.Baseline != "" {
		b, err := readBaseline(o.Baseline, o.program(), o.Build)
		if err != nil {
			return cli.UsageErrorf("--baseline %s: %v", o.Baseline, err)
		}
		o.baseline = b
	}
	return nil
}

func orEmpty(err error) error {
	if err == nil {
		return errors.New("it is empty")
	}
	return err
}

// program is the program and its arguments.
func (o *RepeatOptions) program() []string { return append([]string{o.Program}, o.Args...) }

// runEnv is every run's environment: miotool's own, with --env over it.
func (o *RepeatOptions) runEnv() []string {
	base := o.Environ()
	if len(o.env) == 0 {
		return base
	}
	set := map[string]bool{}
	for _, kv := range o.env {
		k, _, _ := strings.Cut(kv, "=")
		set[k] = true
	}
	out := make([]string, 0, len(base)+len(o.env))
	for _, kv := range base {
		if k, _, _ := strings.Cut(kv, "="); !set[k] {
			out = append(out, kv)
		}
	}
	return append(out, o.env...)
}

// parseConfidence reads 95, 95% or 0.95.
func parseConfidence(s string) (float64, error) {
	t := strings.TrimSpace(s)
	pct := strings.HasSuffix(t, "%")
	v, err := strconv.ParseFloat(strings.TrimSpace(strings.TrimSuffix(t, "%")), 64)
	if err != nil {
		return 0, errors.New("want a percentage such as 95 or 99%")
	}
	if !pct && v > 0 && v < 1 {
		v *= 100
	}
	if v < 50 || v > 99.999 {
		return 0, errors.New("want 50 to 99.999 percent")
	}
	return v / 100, nil
}

// parseDevices reads a list of devices as CUDA_VISIBLE_DEVICES takes them:
// ordinals or UUIDs (GPU-..., MIG-...), comma-separated, none twice.
func parseDevices(s string) ([]string, error) {
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	var out []string
	for d := range strings.SplitSeq(s, ",") {
		d = strings.TrimSpace(d)
		switch {
		case d == "":
			return nil, errors.New("an empty device in the list: want ordinals such as 0,1,2,3")
		case strings.ContainsAny(d, " \t=;:"):
			return nil, fmt.Errorf("%q: want a device ordinal or UUID", d)
		case slices.Contains(out, d):
			return nil, fmt.Errorf("device %s is listed twice", d)
		}
		if n, err := strconv.Atoi(d); err == nil && n < 0 {
			return nil, fmt.Errorf("%q: want a device ordinal, 0 or more", d)
		}
		out = append(out, d)
	}
	return out, nil
}

// shard is the I-th of N parts of the runs (1-based); N = 0: no shard.
type shard struct {
	Index, Count int
	// From says where it came from: "--shard" or the variables.
	From string
}

// Share is the shard's runs of runs, and the number of its first run:
// the runs split evenly, the first runs%N shards one more.
func (s shard) Share(runs int) (n, first int) {
	if s.Count == 0 {
		return runs, 0
	}
	i := s.Index - 1
	n = runs / s.Count
	first = i*n + min(i, runs%s.Count)
	if i < runs%s.Count {
		n++
	}
	return n, first
}

// Environment variables a CI sets for its shards, 1-based as --shard.
const (
	envShardIndex  = "SHARD_INDEX"
	envTotalShards = "TOTAL_SHARDS"
)

func (o *RepeatOptions) validateShard() error {
	o.shard = shard{}
	spec, from := strings.TrimSpace(o.Shard), "--shard"
	if spec == "" {
		index, hasIndex := o.LookupEnv(envShardIndex)
		total, hasTotal := o.LookupEnv(envTotalShards)
		switch {
		case !hasIndex && !hasTotal:
			return nil
		case !hasIndex || !hasTotal:
			return cli.UsageErrorf("%s and %s: set both (the shard and how many there are, from 1), or neither", envShardIndex, envTotalShards)
		}
		spec, from = strings.TrimSpace(index)+"/"+strings.TrimSpace(total), envShardIndex+"/"+envTotalShards
	}
	is, ns, ok := strings.Cut(spec, "/")
	i, err1 := strconv.Atoi(strings.TrimSpace(is))
	n, err2 := strconv.Atoi(strings.TrimSpace(ns))
	switch {
	case !ok || err1 != nil || err2 != nil:
		return cli.UsageErrorf("%s %s: want I/N, the I-th of N shards (from 1), such as 2/4", from, spec)
	case n < 1 || i < 1 || i > n:
		return cli.UsageErrorf("%s %s: want 1 <= I <= N (shards count from 1)", from, spec)
	case n > o.Runs:
		return cli.UsageErrorf("%s %s: %d shards of --runs %d would leave some with no run", from, spec, n, o.Runs)
	}
	o.shard = shard{Index: i, Count: n, From: from}
	return nil
}

// Run makes the runs and returns the judged result for the runner to
// write (see Repeat).
func (o *RepeatOptions) Run(ctx context.Context) (*cli.Outcome, error) {
	r, err := o.Repeat(ctx)
	if r == nil {
		return nil, err
	}
	return cli.Single(r), err
}

// Repeat makes the runs and returns the judged result. An error is a
// failure of the tool; every way the runs end, an interruption included,
// is a result.
func (o *RepeatOptions) Repeat(ctx context.Context) (*report.Result, error) {
	if ctx == nil {
		ctx = context.Background()
	}
	start := o.Now()
	runs, first := o.shard.Share(o.Runs)
	builds := []repeat.Build{{Label: o.Label, Program: o.program(), Path: o.paths[0]}}
	if o.against != nil {
		builds = append(builds, repeat.Build{Label: unfixedLabel, Program: o.against, Path: o.paths[1]})
	}
	var crashes repeat.CrashSource
	o.crashNote = ""
	if o.Crashes != nil {
		src, closeSrc, err := o.Crashes(ctx)
		switch {
		case err == nil:
			defer func() { _ = closeSrc() }()
			crashes = src
		case noCompiler(err):
			o.crashNote = "no crash handler in the runs (" + err.Error() + "): crashes are grouped by what the runs printed"
		default:
			return nil, fmt.Errorf("the crash reports: %w", err)
		}
	}
	stopLoad := suite.StartCPULoad(o.CPULoad)
	bar := o.ProgressBar("repeat")
	facts, err := repeat.Run(ctx, repeat.Options{
		Builds: builds, Runs: runs, FirstRun: first, Jobs: o.Jobs, Timeout: o.Timeout,
		Env: o.runEnv(), Devices: o.devices, Crashes: crashes, Many: o.Many,
		Progress: func(p repeat.Progress) {
			bar.SetLabel(progressLabel(builds, p))
			bar.Update(p.Ended, p.Total)
		},
	})
	bar.Done()
	stopLoad()
	if err != nil {
		return nil, err
	}
	var before *stats.Count
	if o.baseline != nil {
		c := o.baseline.Count
		before = &c
	}
	j := repeat.Judge(facts, before, o.confidence)
	set := o.setup(runs, first)
	if facts.Interrupted {
		set.Interrupted = cli.InterruptedReason(ctx).Error()
	}
	r := report.New("repeat", o.CommandLine, start)
	render(r, set, facts, j, o.baseline)
	r.Finish(r.Verdict, r.Summary, o.Now())
	return r, nil
}

// progressLabel is the bar's label: the failures so far and their rate.
func progressLabel(builds []repeat.Build, p repeat.Progress) string {
	part := func(i int) string {
		if p.Finished[i] == 0 {
			return "0 failed"
		}
		return fmt.Sprintf("%d failed (%s)", p.NotPassed[i], percent(float64(p.NotPassed[i])/float64(p.Finished[i])))
	}
	if len(builds) == 1 {
		return "repeat: " + part(0)
	}
	return fmt.Sprintf("repeat: %s, %s %s", part(0), strings.ToLower(builds[1].Label), part(1))
}

// setup is what the result records of how the runs were made.
func (o *RepeatOptions) setup(runs, first int) setup {
	s := setup{Program: o.program(), Against: o.against, Label: o.Label, Runs: runs, Jobs: o.Jobs, Timeout: o.Timeout,
		Devices: o.devices, CPULoad: o.CPULoad, Env: o.env, Confidence: o.confidence,
		Version: versionText(o.Build), Shard: o.shard, AllRuns: o.Runs, FirstRun: first, CrashReports: o.Crashes != nil && o.crashNote == "",
		CrashNote: o.crashNote}
	if o.baseline != nil {
		s.Baseline = o.Baseline
	}
	return s
}

// versionText is miotool's version and commit as the result records it.
func versionText(b buildinfo.Info) string {
	if b.Commit == "" {
		return b.Version
	}
	return b.Version + " (commit " + b.Commit + ")"
}
