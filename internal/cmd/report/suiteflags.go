package report

import (
	"fmt"

	"github.com/spf13/cobra"

	"miotool/internal/cli"
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
	// spellings are those a suite file is read by, from the command tree.
	spellings suite.Spellings
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

// addSuiteFlags adds --jobs and --allow-programs to cmd, and what they
// do to its help.
func addSuiteFlags(cmd *cobra.Command, o *suiteFlags) {
	cmd.Long += suiteFlagsHelp
	fl := cmd.Flags()
	fl.IntVar(&o.Jobs, "jobs", 0, "run up to N checks at once, each its own process (default: the cores plus one, at most 4; exclusive checks run alone)")
	fl.BoolVar(&o.AllowPrograms, allowProgramsFlag, false, "let the suite run programs other than miotool (trace and repeat checks) and set variables that load other code")
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

// jobs is the --jobs the suite runs with.
func (o *ReportOptions) jobs() int {
	if o.Jobs > 0 {
		return o.Jobs
	}
	return DefaultJobs(o.NumCPU())
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
	if programs := file.Programs(); len(programs) > 0 {
		fmt.Fprintf(o.IO.ErrOut, "miotool: suite %s runs other code than miotool's (allowed with --allow-programs):\n", file.Name)
		for _, p := range programs {
			fmt.Fprintf(o.IO.ErrOut, "  %s\n", p)
		}
	}
	return file, nil
}
