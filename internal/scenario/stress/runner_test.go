package stress

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"miotool/internal/aiheur/cache"
	"miotool/internal/testutil"
)

// fakeChildEnv makes this test binary, re-executed, behave as one stress
// run that ends in the named way (see TestFakeStressChild).
const (
	fakeChildEnv = "MIOTOOL_STRESS_FAKE_CHILD"
	fakeGateEnv  = "MIOTOOL_STRESS_FAKE_GATE"
	fakeDirEnv   = "MIOTOOL_STRESS_FAKE_DIR"
)

// TestFakeStressChild is not a test: with fakeChildEnv set it is a child
// process that passes, prints a wrong sum, crashes in one of the ways a Go
// process can, fails, or hangs on a gate the parent never opens.
func TestFakeStressChild(t *testing.T) {
	mode := os.Getenv(fakeChildEnv)
	if mode == "" {
		t.Skip("runs only as a fake stress child")
	}
	run := &RunResult{Threads: 2, Iters: 10, Trials: 1, Size: 16, Expected: 36, Sums: [][]float64{{36, 36}}}
	switch mode {
	case "pass":
		_ = WriteRunLine(os.Stdout, run)
		os.Exit(0)
	case "wrong":
		run.Sums[0][1], run.Wrong = 40, 1
		_ = WriteRunLine(os.Stdout, run)
		os.Exit(1)
	case "fault":
		// A read of unmapped memory, as a released model's weights are.
		mem, err := syscall.Mmap(-1, 0, os.Getpagesize(), syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_ANON|syscall.MAP_PRIVATE)
		if err != nil {
			t.Fatal(err)
		}
		p := (*int64)(unsafe.Pointer(&mem[0]))
		if err := syscall.Munmap(mem); err != nil {
			t.Fatal(err)
		}
		fmt.Println(*p)
	case "mapwrites":
		m := map[int]int{}
		var wg sync.WaitGroup
		for g := 0; g < 2; g++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; ; i++ {
					m[i%1024] = i
				}
			}()
		}
		wg.Wait()
	case "panic":
		// An unrecovered panic on another goroutine ends the process; this
		// goroutine waits for that on a channel nothing ever sends on.
		go func() { panic("the model is gone") }()
		<-make(chan struct{})
	case "sigkill":
		_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
	case "detect-pass":
		// Sums right, but the caches saw a destroyed model as it happened
		// and report races in the result.
		_ = WriteDetectionLine(os.Stdout, *record(cache.KindDestroyed))
		run.Detections.Races = cache.Tally{Count: 12, First: record(cache.KindRace)}
		_ = WriteRunLine(os.Stdout, run)
		os.Exit(0)
	case "detect-crash":
		// The record printed as it was made outlives the crash.
		_ = WriteDetectionLine(os.Stdout, *record(cache.KindUseAfterFree))
		_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
	case "first-passes":
		// The first run passes; the next says it started, then waits on the
		// gate until the parent's interruption kills it.
		dir := os.Getenv(fakeDirEnv)
		if f, err := os.OpenFile(filepath.Join(dir, "first"), os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600); err == nil {
			f.Close()
			_ = WriteRunLine(os.Stdout, run)
			os.Exit(0)
		}
		if err := os.WriteFile(filepath.Join(dir, "waiting"), []byte(fmt.Sprint(os.Getpid())), 0o600); err != nil {
			t.Fatal(err)
		}
		f, err := os.Open(os.Getenv(fakeGateEnv))
		if err == nil {
			f.Close()
		}
	case "error":
		fmt.Fprintln(os.Stderr, "miotool: no device")
		os.Exit(3)
	case "hang":
		// Opening a FIFO for reading blocks until a writer opens it; the
		// parent never does, so only the watchdog ends this.
		f, err := os.Open(os.Getenv(fakeGateEnv))
		if err == nil {
			f.Close()
		}
		os.Exit(0)
	}
	t.Fatalf("fake child mode %q did not end the process", mode)
}

func fakeChild(t *testing.T, mode string, extraEnv ...string) ChildCommand {
	return ChildCommand{Path: os.Args[0], Args: []string{"-test.run=^TestFakeStressChild$", "-test.count=1"},
		Env: append(append(os.Environ(), fakeChildEnv+"="+mode), extraEnv...)}
}

// gate is a FIFO that a hanging child blocks on; Cleanup opens it for
// writing so that no child can stay blocked after the test.
func gate(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "gate")
	if err := syscall.Mkfifo(path, 0o600); err != nil {
		t.Skipf("cannot make a FIFO: %v", err)
	}
	t.Cleanup(func() {
		if f, err := os.OpenFile(path, os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
			f.Close()
		}
	})
	return path
}

// The runner classifies every way a run can end, from real processes.
func TestRunStressRunsClassifiesChildren(t *testing.T) {
	gatePath := gate(t)
	for _, tt := range []struct {
		mode    string
		timeout time.Duration
		kind    RunKind
		crash   string
		detail  string
		excerpt []string
	}{
		{"pass", time.Minute, RunPassed, "", "", nil},
		{"wrong", time.Minute, RunWrong, "", "1 of 2 thread-trials wrong", nil},
		{"fault", time.Minute, RunCrashed, "SIGSEGV", "fatal error: fault",
			[]string{"unexpected fault address 0x", "fatal error: fault | [signal SIGSEGV", "at miotool/internal/scenario/stress.TestFakeStressChild <- testing.tRunner"}},
		{"mapwrites", time.Minute, RunCrashed, "fatal error: concurrent map writes", "concurrent map writes",
			[]string{"fatal error: concurrent map writes", "at miotool/internal/scenario/stress.TestFakeStressChild.func"}},
		{"panic", time.Minute, RunCrashed, "panic", "panic: the model is gone", []string{"panic: the model is gone"}},
		{"sigkill", time.Minute, RunCrashed, "SIGKILL", "killed by SIGKILL", nil},
		{"error", time.Minute, RunError, "", "miotool: no device", nil},
		// The watchdog is what this case tests, so its deadline is short.
		{"hang", 2 * time.Second, RunHung, "", "killed by the watchdog", nil},
	} {
		t.Run(tt.mode, func(t *testing.T) {
			runs, err := RunProcesses(context.Background(), fakeChild(t, tt.mode, fakeGateEnv+"="+gatePath),
				RunnerOptions{Runs: 1, Jobs: 1, Timeout: tt.timeout})
			if err != nil {
				t.Fatal(err)
			}
			got := runs[0]
			if got.Kind != tt.kind || got.Crash != tt.crash || !strings.Contains(got.Detail, tt.detail) {
				t.Errorf("kind %q crash %q detail %q; want %q %q, detail containing %q\nstderr: %s",
					got.Kind, got.Crash, got.Detail, tt.kind, tt.crash, tt.detail, got.StderrTail)
			}
			for _, want := range tt.excerpt {
				if !strings.Contains(got.Excerpt, want) {
					t.Errorf("crash excerpt %q lacks %q", got.Excerpt, want)
				}
			}
			if tt.kind == RunPassed || tt.kind == RunWrong {
				if got.Run == nil || got.Run.Expected != 36 {
					t.Errorf("the result line was not read: %+v", got.Run)
				}
			}
		})
	}
}

// Runs go J at a time, each counted once, and progress reaches the total.
func TestRunStressRunsJobsAndProgress(t *testing.T) {
	var mu sync.Mutex
	var seen []int
	runs, err := RunProcesses(context.Background(), fakeChild(t, "pass"), RunnerOptions{Runs: 5, Jobs: 3, Timeout: time.Minute,
		Progress: func(done, total int) {
			mu.Lock()
			defer mu.Unlock()
			if total != 5 {
				t.Errorf("progress total %d, want 5", total)
			}
			seen = append(seen, done)
		}})
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range runs {
		if r.Index != i || r.Kind != RunPassed || r.Wall <= 0 {
			t.Errorf("run %d: %+v", i, r)
		}
	}
	if len(seen) != 5 || seen[len(seen)-1] != 5 {
		t.Errorf("progress calls %v, want 5 ending at 5", seen)
	}
}

// Cancelling stops the runs still going instead of waiting for them.
func TestRunStressRunsCancel(t *testing.T) {
	gatePath := gate(t)
	ctx, cancel := context.WithCancel(context.Background())
	result := make(chan error, 1)
	testutil.Go(t, time.Minute, func() {
		_, err := RunProcesses(ctx, fakeChild(t, "hang", fakeGateEnv+"="+gatePath), RunnerOptions{Runs: 4, Jobs: 2, Timeout: time.Hour,
			Log: func(string, ...any) {}})
		result <- err
	})
	cancel()
	select {
	case err := <-result:
		if err != context.Canceled {
			t.Errorf("error %v, want context.Canceled", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the runner did not return within 30s of the cancellation")
	}
}

func TestRunStressRunsRejectsBadOptions(t *testing.T) {
	for _, tt := range []struct {
		cmd  ChildCommand
		o    RunnerOptions
		want string
	}{
		{fakeChild(t, "pass"), RunnerOptions{Runs: 0, Jobs: 1, Timeout: time.Second}, "runs"},
		{fakeChild(t, "pass"), RunnerOptions{Runs: 1, Jobs: 0, Timeout: time.Second}, "jobs"},
		{fakeChild(t, "pass"), RunnerOptions{Runs: 1, Jobs: 1}, "watchdog"},
		{ChildCommand{}, RunnerOptions{Runs: 1, Jobs: 1, Timeout: time.Second}, "no child"},
		{ChildCommand{Path: filepath.Join(t.TempDir(), "missing")}, RunnerOptions{Runs: 1, Jobs: 1, Timeout: time.Second}, "starting"},
	} {
		if _, err := RunProcesses(context.Background(), tt.cmd, tt.o); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%+v: error %v, want one mentioning %q", tt.o, err, tt.want)
		}
	}
}

// A run's detections are its detection lines and its result's together,
// whether it finished or crashed.
func TestRunStressRunsReadsDetections(t *testing.T) {
	for _, tt := range []struct {
		mode               string
		kind               RunKind
		races, destroyed   uint64
		useAfterFree       uint64
		firstKindFromLines cache.Kind
	}{
		{"detect-pass", RunPassed, 12, 1, 0, cache.KindDestroyed},
		{"detect-crash", RunCrashed, 0, 0, 1, cache.KindUseAfterFree},
	} {
		t.Run(tt.mode, func(t *testing.T) {
			runs, err := RunProcesses(context.Background(), fakeChild(t, tt.mode), RunnerOptions{Runs: 1, Jobs: 1, Timeout: time.Minute})
			if err != nil {
				t.Fatal(err)
			}
			d := runs[0].Detections
			if runs[0].Kind != tt.kind || d.Races.Count != tt.races || d.Destroyed.Count != tt.destroyed || d.UseAfterFree.Count != tt.useAfterFree {
				t.Fatalf("kind %s, detections %v; want %s, races %d destroyed %d use-after-free %d", runs[0].Kind, d, tt.kind, tt.races, tt.destroyed, tt.useAfterFree)
			}
			if f := d.Of(tt.firstKindFromLines).First; f == nil || f.Thread.Name != "thread 2" || f.Kind != tt.firstKindFromLines {
				t.Errorf("first %s record %+v", tt.firstKindFromLines, f)
			}
		})
	}
}

// When the runner is interrupted, the runs that finished keep their end;
// the run it killed is interrupted, not crashed; runs never started are
// not there.
func TestRunStressRunsInterrupted(t *testing.T) {
	gatePath, dir := gate(t), t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	type result struct {
		runs []RunOutcome
		err  error
	}
	done := make(chan result, 1)
	// The deferred cancel ends the runner, and so this goroutine, on every
	// path out of the test.
	testutil.Go(t, time.Minute, func() {
		runs, err := RunProcesses(ctx, fakeChild(t, "first-passes", fakeGateEnv+"="+gatePath, fakeDirEnv+"="+dir),
			RunnerOptions{Runs: 4, Jobs: 1, Timeout: time.Hour})
		done <- result{runs, err}
	})
	deadline := time.Now().Add(30 * time.Second)
	for {
		if _, err := os.Stat(filepath.Join(dir, "waiting")); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the second run did not start within 30s")
		}
		time.Sleep(5 * time.Millisecond) // polling a file, with a deadline
	}
	cancel()
	var res result
	select {
	case res = <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("the runner did not return within 30s of the interruption")
	}
	if res.err != context.Canceled {
		t.Errorf("error %v, want context.Canceled", res.err)
	}
	if len(res.runs) != 2 || res.runs[0].Kind != RunPassed || res.runs[1].Kind != RunInterrupted || res.runs[1].Crash != "" || res.runs[1].Index != 1 {
		t.Fatalf("runs %+v; want run 1 passed, run 2 interrupted", res.runs)
	}
}

// record is a cache record of kind k made by thread 2 after thread 1.
func record(k cache.Kind) *cache.Record {
	return &cache.Record{Kind: k, Cache: "TunaNet", Key: "gfx942", Thread: cache.Thread{ID: 7, Name: "thread 2"},
		Other: cache.Thread{ID: 6, Name: "thread 1"}, Access: "write", Location: "map", OtherAccess: "read",
		Since: 3 * time.Microsecond, Readers: 1}
}
