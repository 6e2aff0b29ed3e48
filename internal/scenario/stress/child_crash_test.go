package stress

import (
	"context"
	"os"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"miotool/internal/aiheur/builtin"
	"miotool/internal/aiheur/cache"
	"miotool/internal/hip"
)

// crashChildEnv makes this test binary, re-executed, the real stress run
// on the pre-fix cache, killed by a signal in its second trial (see
// TestCrashingStressChild).
const crashChildEnv = "MIOTOOL_STRESS_CRASH_CHILD"

// TestCrashingStressChild is not a test: with crashChildEnv set it is a
// child process that runs the scenario as a stress run does (RunHere on
// the unlocked cache, several threads, then its result line), except that
// the first convolution of the second trial kills the process, as the
// pre-fix cache's own crashes do at a moment of their choosing. The
// records of the first trial's races were made by then; nothing else of
// the run gets out.
func TestCrashingStressChild(t *testing.T) {
	if os.Getenv(crashChildEnv) != "1" {
		t.Skip("runs only as a crashing stress child")
	}
	var trialDone atomic.Bool
	crashing := brokenConv(func(k hip.GoKernel) hip.GoKernel {
		return func(mem hip.Memory, grid, block hip.Dim3, args []hip.KernelArg) error {
			if trialDone.Load() {
				_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
				select {} // the signal ends the process
			}
			return k(mem, grid, block, args)
		}
	})
	dev := newDevice(t, hip.DialectHIP)
	run, err := RunHere(context.Background(), dev, Options{Threads: 4, Iters: 4, Trials: 2, Size: 16,
		Policy: cache.Unlocked, Models: builtin.FS, convSource: crashing, Lines: os.Stdout,
		Log: func(format string, _ ...any) {
			if strings.HasPrefix(format, "trial ") { // a trial's sums: it is over
				trialDone.Store(true)
			}
		}})
	if err != nil {
		t.Fatal(err)
	}
	_ = WriteRunLine(os.Stdout, run)
	t.Fatal("the run was not killed in its second trial")
}

// A stress run that crashes keeps the records of the races that led to
// it: the real run on the pre-fix cache prints each kind's first record as
// it is made, so the runner reads them from the crashed child's output
// though no result line came.
func TestACrashedStressRunKeepsItsDetections(t *testing.T) {
	cmd := ChildCommand{Path: os.Args[0], Args: []string{"-test.run=^TestCrashingStressChild$", "-test.count=1"},
		Env: append(os.Environ(), crashChildEnv+"=1")}
	runs, err := RunProcesses(context.Background(), cmd, RunnerOptions{Runs: 1, Jobs: 1, Timeout: 2 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	r := runs[0]
	if r.Kind != RunCrashed || r.Run != nil {
		t.Fatalf("the run %s (%s), result %v; want a crash with no result line:\n%s", r.Kind, r.Detail, r.Run, r.StderrTail)
	}
	races := r.Detections.Races
	if races.Count == 0 || races.First == nil {
		t.Fatalf("the crashed run's detections %v: the races of its first trial were lost", r.Detections)
	}
	t.Logf("crashed (%s) after %v with %d races, %d destroyed, %d use-after-free", r.Detail, r.Wall, races.Count, r.Detections.Destroyed.Count, r.Detections.UseAfterFree.Count)
	if f := races.First; f.Kind != cache.KindRace || f.Thread.Name == "" || f.Other.Name == "" || f.Thread.Name == f.Other.Name {
		t.Errorf("first race %+v; want one between two named threads", f)
	}
}
