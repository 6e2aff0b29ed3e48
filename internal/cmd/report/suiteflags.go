package report

import (
	"errors"
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"miotool/internal/cli"
	"miotool/internal/report"
	"miotool/internal/suite"
	"miotool/internal/trace"
)

// suiteFlags are report --suite's flags about how the checks run beside
// each other and what a suite file may run.
type suiteFlags struct {
	// Jobs is how many checks run at once; 0 picks DefaultJobs.
	Jobs int
	// AllowPrograms lets a suite run programs other than miotool
	// (trace checks) and set variables that load other code.
	AllowPrograms bool
	// Shard is --shard I/N; empty: SHARD_INDEX and TOTAL_SHARDS when
	// set, else the whole suite.
	Shard string
	// Durations is an earlier result whose durations balance the split.
	Durations string
	// Devices is --devices: the ids to pin each run to one of.
	Devices string
	// spellings are those a suite file is read by, from the command tree.
	spellings suite.Spellings

	shard   suite.Shard
	devices []string
}

// allowProgramsFlag is the flag that lets a suite run other programs.
const allowProgramsFlag = "allow-programs"

// SuiteSpellings are the words of miotool's command line a suite file's
// commands are read and refused by, taken from the command tree that root
// heads: the global flags that take a value, every flag that writes a file
// of its own (rules --write-expect), the output flags the runner sets.
func SuiteSpellings(root *cobra.Command) suite.Spellings {
	return suite.Spellings{
		Reserved:      cli.OutputFlags,
		GlobalValue:   cli.ValueFlags(root.PersistentFlags()),
		NoResult:      []string{"-h", "--help", "--version"},
		Writes:        cli.WrittenFileFlags(root),
		AllowPrograms: "--" + allowProgramsFlag,
		// trace's observer, given prebuilt.
		Library: []string{"--observer"},
		// repeat's unfixed build.
		Programs:   []string{"--against"},
		LoadingEnv: []string{cli.EnvName("trace.observer"), trace.EnvCUPTI},
	}
}

// maxJobs bounds --jobs: every check is a process with a device context
// of its own, and past a few dozen they only queue for the same cores
// and the same GPU.
const maxJobs = 64

// DefaultJobs is how many checks run at once without --jobs: one more
// than the machine's cores, at most 4. Much of a check's wall time is
// waiting (rules-sim-vs-h200 on timers, replay-guarded on its 2 s
// deadline, each process on its start), so one check more than the cores
// keeps them busy: on 2 cores pr12265 took 6.5 s at --jobs 2, 5.0 s at 3
// and 4.4 s at 4, where the checks that compute only slow each other.
// Checks whose verdict a neighbour's load could change run alone
// whatever the count (suite.ExclusiveCommands, exclusive: true).
func DefaultJobs(numCPU int) int {
	return min(max(numCPU, 1)+1, 4)
}

var suiteFlagsHelp = fmt.Sprintf(`

Checks run side by side, up to --jobs at once (default: one more than the
cores, at most 4), each still its own process; the table lists them in the
suite file's order whatever order they end in. Each pass starts its exclusive
checks first, one at a time with nothing beside them, then the others in the
file's order. find, repeat, stress-threads and trace checks are exclusive
(find's verdict rests on the naive evaluation overrunning a multiple of the
best solver's time, which a neighbour's load shifts; stress-threads measures
a race; repeat counts how often a program fails), and any check can say
exclusive: true or false. --jobs 1 runs one check
at a time, in the file's order.

A check whose runs skip where it expects PASS or FAIL (the device or library
it needs is not there) is SKIP, not a failure: it tested nothing, and a suite
in which nothing was tested exits 4. A suite run makes at most %d runs
(checks x --repeat x environments); a larger one is refused before it starts.

The checks run on a scratch find-db, a folder of the suite run's own that is
removed after it, so a suite's find never writes into yours; find-db: user in
the suite file runs them on yours (MIOPEN_USER_DB_PATH, or its default). A
suite file cannot set MIOPEN_USER_DB_PATH; --env can.

A suite runs miotool's own checks. A check that runs another program
(command: miotool trace [flags] -- PROGRAM [ARGS...], or miotool repeat, whose
--against names one more), or an env that makes
every check load other code (LD_PRELOAD and the other LD_ variables, PATH, CC,
CUDA_INJECTION64_PATH, ROCM_PATH and the like), is refused unless you give
--allow-programs; with it, the programs are listed on standard error before
anything starts, and in the result's notes.

More suite file keys:

    find-db: user           # run the checks on your find-db (default: scratch)
    checks:
      - name: replay-worker
        command: miotool replay --reclaim=worker
        expect: PASS
        exclusive: true     # run with no other check beside it`, suite.MaxRuns)

var shardFlagsHelp = fmt.Sprintf(`

--shard I/N runs shard I of N of the suite, counted from 1; without it, the
shard is read from %[1]s and %[2]s when they are set (as TheRock's CI sets
them, counted from 1 too; %[1]s=0 is refused; --shard 1/1 runs the whole suite
whatever they say). The split is the same on every
machine: the checks, costliest first, each go to the shard with the least
cost so far, their cost being one run's time in the earlier result
--durations FILE names (a suite result; a check it lacks costs the average),
else the same for every check (check k to shard k mod N + 1). Give every
shard the same --durations file. The result names its shard, its checks and
the split's id, and lists the other shards' checks, each with the shard that
runs it; "report merge" of every shard is the whole suite's checklist, and
refuses a set with a shard missing (naming it) unless --allow-missing-shards.

--devices 0,1,2,3 runs the checks side by side, each run pinned to one
device: %[3]s and %[4]s are set to its id, and the check gets --device 0.
--jobs counts the runs at once over all the devices (default: at least one
per device); exclusive checks run alone on their device while the others go
on. Each row's Devices cell names the devices its runs were pinned to
("NVIDIA H200 (sm_90) on devices 0, 2"), the result's notes the runs each
device was given.`, suite.ShardIndexEnv, suite.TotalShardsEnv, suite.DeviceVariables[0], suite.DeviceVariables[1])

// addSuiteFlags adds --jobs, --allow-programs, --shard, --durations and
// --devices to cmd, and what they do to its help.
func addSuiteFlags(cmd *cobra.Command, o *suiteFlags) {
	cmd.Long += suiteFlagsHelp + shardFlagsHelp
	fl := cmd.Flags()
	fl.IntVar(&o.Jobs, "jobs", 0, "run up to N checks at once, each its own process (default: the cores plus one, at most 4; exclusive checks run alone)")
	fl.BoolVar(&o.AllowPrograms, allowProgramsFlag, false, "let the suite run programs other than miotool (trace and repeat checks) and set variables that load other code")
	fl.StringVar(&o.Shard, shardFlag, "", "run shard I/N of the suite, counted from 1 (default: "+suite.ShardIndexEnv+"/"+suite.TotalShardsEnv+" when set)")
	fl.StringVar(&o.Durations, durationsFlag, "", "an earlier suite result whose durations balance the shards (default: split by count)")
	fl.StringVar(&o.Devices, devicesFlag, "", "run checks side by side, each pinned to one of these devices, e.g. 0,1,2,3")
	_ = cmd.MarkFlagFilename(durationsFlag, "json")
	cli.MarkInputFile(cmd, durationsFlag)
}

const (
	shardFlag     = "shard"
	durationsFlag = "durations"
	devicesFlag   = "devices"
)

// completeSuiteFlags reads --shard (else SHARD_INDEX and TOTAL_SHARDS,
// through lookupEnv) and --devices.
func (o *ReportOptions) completeSuiteFlags(lookupEnv func(string) (string, bool)) error {
	o.shard, o.devices = suite.Shard{}, nil
	if o.Shard != "" {
		s, err := suite.ParseShard(o.Shard)
		if err != nil {
			return cli.UsageErrorf("--%s %v", shardFlag, err)
		}
		o.shard = s
	} else {
		s, ok, err := suite.ShardFromEnv(func(k string) string { v, _ := lookupEnv(k); return v })
		if err != nil {
			return cli.UsageErrorf("%v (or give --%s I/N, which wins)", err, shardFlag)
		}
		if ok {
			o.shard = s
		}
	}
	if o.Devices != "" {
		devices, err := suite.ParseDevices(o.Devices)
		if err != nil {
			return cli.UsageErrorf("--%s %v", devicesFlag, err)
		}
		o.devices = devices
	}
	return nil
}

// validateShardFlags checks what the shard and device flags ask of each
// other and of the global flags.
func (o *ReportOptions) validateShardFlags() error {
	switch {
	case o.Durations != "" && o.shard.Whole():
		return cli.UsageErrorf("--%s %s: the durations balance a split; add --%s I/N (or set %s and %s)",
			durationsFlag, o.Durations, shardFlag, suite.ShardIndexEnv, suite.TotalShardsEnv)
	case len(o.devices) > 0 && o.Global.Device != 0:
		return cli.UsageErrorf("--device %d and --%s %s: with --%s each check runs on one of them, which it sees as device 0; give the devices with --%s alone",
			o.Global.Device, devicesFlag, o.Devices, devicesFlag, devicesFlag)
	}
	return nil
}

// durations reads --durations: one run's time of each check of an
// earlier suite result.
func (o *ReportOptions) durations() (suite.Weights, error) {
	if o.Durations == "" {
		return nil, nil
	}
	f, err := os.Open(o.Durations)
	if err != nil {
		var pe *os.PathError
		if errors.As(err, &pe) {
			err = pe.Err
		}
		return nil, cli.UsageErrorf("--%s %s: %v", durationsFlag, o.Durations, err)
	}
	defer f.Close()
	res, err := report.ReadSuiteJSON(f)
	if err != nil {
		return nil, cli.UsageErrorf("--%s %s: %v", durationsFlag, o.Durations, err)
	}
	return suite.DurationsOf(res), nil
}

// checkShardAndDevices refuses, before anything runs, a split into more
// shards than the suite has checks to run, and, with --devices, a suite
// that chooses a check's device or the visible devices itself.
func (o *ReportOptions) checkShardAndDevices(file *suite.File) error {
	if err := suite.CheckShard(file, o.shard); err != nil {
		return cli.UsageErrorf("shard %s: %v", o.shard, err)
	}
	if len(o.devices) == 0 {
		return nil
	}
	if err := suite.CheckPinnable(file, o.variants); err != nil {
		return cli.UsageErrorf("--%s %s: %v", devicesFlag, o.Devices, err)
	}
	for _, c := range file.Checks {
		if setsFlag(c.Args, "device") {
			return cli.UsageErrorf("--%s %s: %s:%d: check %q chooses its device with --device; with --%s each check runs on the one it is given",
				devicesFlag, o.Devices, file.Path, c.Line, c.Name, devicesFlag)
		}
	}
	return nil
}

// validateSuiteFlags checks --jobs and --repeat before the suite file is
// read.
func (o *ReportOptions) validateSuiteFlags() error {
	switch {
	case o.Jobs < 0:
		return cli.UsageErrorf("--jobs %d: want 1 or more (0 picks %d here)", o.Jobs, DefaultJobs(o.NumCPU()))
	case o.Jobs > maxJobs:
		return cli.UsageErrorf("--jobs %d: want at most %d checks at once", o.Jobs, maxJobs)
	case o.Repeat > suite.MaxRuns:
		return cli.UsageErrorf("--repeat %d: want at most %d runs of each check (a suite run makes at most %d runs)", o.Repeat, suite.MaxRuns, suite.MaxRuns)
	}
	return nil
}

// jobs is the --jobs the suite runs with: by default, at least one run
// on each device.
func (o *ReportOptions) jobs() int {
	if o.Jobs > 0 {
		return o.Jobs
	}
	return max(DefaultJobs(o.NumCPU()), len(o.devices))
}

// loadSuite reads the suite file (exit 2 for a bad one, or one larger
// than a suite run may be) and, where it runs other programs the user
// allowed, lists them on standard error before anything starts.
func (o *ReportOptions) loadSuite() (*suite.File, error) {
	file, err := suite.LoadWith(o.SuiteFile, suite.LoadOptions{Flags: o.spellings, AllowPrograms: o.AllowPrograms})
	if err != nil {
		return nil, cli.UsageError(err)
	}
	if err := suite.CheckSize(file, o.Repeat, 1+len(o.variants)); err != nil {
		return nil, cli.UsageErrorf("--repeat %d: %v", o.Repeat, err)
	}
	if err := o.checkShardAndDevices(file); err != nil {
		return nil, err
	}
	if programs := file.Programs(); len(programs) > 0 {
		fmt.Fprintf(o.IO.ErrOut, "miotool: suite %s runs other code than miotool's (allowed with --allow-programs):\n", file.Name)
		for _, p := range programs {
			fmt.Fprintf(o.IO.ErrOut, "  %s\n", p)
		}
	}
	return file, nil
}
