package trace

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"miotool/internal/hip"
	"miotool/internal/words"
)

// The GPU tests trace real programs on a machine with an NVIDIA GPU,
// PyTorch and a C compiler: the PyTorch scripts of testdata/pytorch and,
// where bin/miotool has been built, miotool's own capture scenario. They
// skip elsewhere. Run them from this folder with a test binary built for
// the machine:
//
//	CGO_ENABLED=0 go test -c -o bin/trace.test ./internal/trace
//	cd internal/trace && ../../bin/trace.test -test.run GPU -test.v
//
// Every case is bounded: each traced program by gpuLimit (the watchdog
// kills its group), the scripts by their own shorter bounds (every wait
// has a timeout, and faulthandler ends a script that outlives its bound
// with every thread's stack on stderr), and the set-up steps by setupLimit.
// A case that fails logs the trace's headline and the end of the program's
// standard output and error, so one run says what went wrong.

// gpuLimit is the watchdog of one traced GPU program.
const gpuLimit = 2 * time.Minute

// setupLimit bounds the PyTorch probe, the observer's build and an
// untraced run of the overhead test.
const setupLimit = 3 * time.Minute

// tailLines is how much of a failing program's output is logged.
const tailLines = 30

// gpuObserver builds the observer with the system compiler, or skips when
// there is no PyTorch with a usable GPU.
func gpuObserver(t *testing.T) string {
	t.Helper()
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("no python3")
	}
	ctx, cancel := context.WithTimeout(context.Background(), setupLimit)
	defer cancel()
	probe := exec.CommandContext(ctx, "python3", "-c", "import sys, torch; sys.exit(0 if torch.cuda.is_available() else 1)")
	if out, err := probe.CombinedOutput(); err != nil {
		if ctx.Err() != nil {
			t.Fatalf("the PyTorch probe did not finish within %v:\n%s", setupLimit, words.LastLines(string(out), tailLines))
		}
		t.Skipf("no PyTorch with a CUDA device here (%v)", err)
	}
	obs, err := Build(ctx, BuildOptions{CacheDir: filepath.Join(t.TempDir(), "cache")})
	if err != nil {
		t.Fatal(err)
	}
	return obs
}

// gpuTrace traces prog under the watchdog and logs what the trace saw;
// when the test fails, it also logs the headline again and the end of the
// program's output.
func gpuTrace(t *testing.T, obs, prog string, args ...string) (traced, time.Duration) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	start := time.Now()
	r, err := Run(context.Background(), Options{Program: prog, Args: args, Observer: obs, Stdout: &stdout,
		Stderr: &stderr, Timeout: gpuLimit, Started: func(pid int) { killOnCleanup(t, pid) }})
	if err != nil {
		t.Fatal(err)
	}
	wall := time.Since(start)
	tr := traced{r: r, j: Judge(r, false), stdout: stdout.String(), stderr: stderr.String()}
	t.Logf("%s %v: %s\n  exit: %s in %v; %d events, %d processes, notes %v", prog, args, tr.j.Headline(),
		r.Exit.Describe(), wall.Round(time.Millisecond), r.Events, len(r.Processes), r.Notes)
	if tr.j.Culprit != nil {
		for _, f := range tr.j.Culprit.Callers {
			t.Logf("    %s  (%s)", f, f.Source)
		}
	}
	for _, h := range r.Hazards {
		t.Logf("  hazard: %s from thread %d: %s", BaseName(h.Call.Name), h.Call.TID, h.Rule())
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("failed case %s %v: %s\n  the program %s\n--- its stdout (last %d lines):\n%s\n--- its stderr (last %d lines):\n%s",
				prog, args, tr.j.Headline(), r.Exit.Describe(), tailLines, words.LastLines(tr.stdout, tailLines),
				tailLines, words.LastLines(tr.stderr, tailLines))
		}
	})
	return tr, wall
}

func anyCaller(fs []Frame, part string) bool {
	return slices.ContainsFunc(fs, func(f Frame) bool { return strings.Contains(f.Symbol, part) })
}

func TestGPUPyTorch(t *testing.T) {
	obs := gpuObserver(t)
	cases := []struct {
		script  string
		verdict Verdict
		culprit string
		caller  string
		other   bool
	}{
		{"sync_thread.py", Fail, "cuCtxSynchronize", "c10::cuda::device_synchronize", true},
		{"query.py", Fail, "cuStreamQuery", "c10::cuda::CUDAStream::query", false},
		{"clean.py", Pass, "", "", false},
	}
	for _, c := range cases {
		t.Run(c.script, func(t *testing.T) {
			tr, _ := gpuTrace(t, obs, "python3", filepath.Join("testdata", "pytorch", c.script))
			if tr.r.Exit.TimedOut {
				t.Fatalf("the script hung: %s", tr.r.Exit.Describe())
			}
			if !tr.r.CUDAObserved() {
				t.Fatalf("CUDA was not observed: %v", tr.r.Notes)
			}
			if tr.j.Verdict != c.verdict {
				t.Fatalf("%s, want %s", tr.j.Headline(), c.verdict)
			}
			if c.culprit == "" {
				return
			}
			call, cp := tr.j.Culprit, tr.j.Capture
			if call == nil || BaseName(call.Name) != c.culprit || call.API != hip.DialectCUDA {
				t.Fatalf("culprit %+v, want %s", call, c.culprit)
			}
			if (call.TID != cp.TID) != c.other || !anyCaller(call.Callers, c.caller) {
				t.Errorf("culprit on thread %d (capture by %d), callers %v; want another thread: %v, a caller %s",
					call.TID, cp.TID, call.Callers, c.other, c.caller)
			}
			if !cp.Invalidated() || cp.Mode != hip.CaptureModeGlobal {
				t.Errorf("capture %+v ended %+v, want a global-mode capture invalidated", cp, cp.End)
			}
		})
	}
}

// TestGPUMiotoolCapture traces miotool's own capture scenario, where
// bin/miotool was built for this machine.
func TestGPUMiotoolCapture(t *testing.T) {
	obs := gpuObserver(t)
	bin, err := filepath.Abs("../../bin/miotool")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(bin); err != nil {
		t.Skipf("no %s", bin)
	}
	for _, c := range []struct {
		reclaim string
		verdict Verdict
	}{{"lazy", Fail}, {"worker", Pass}} {
		t.Run("reclaim="+c.reclaim, func(t *testing.T) {
			tr, _ := gpuTrace(t, obs, bin, "--backend", "cuda", "--no-progress", "capture", "--mode=global", "--reclaim="+c.reclaim)
			if tr.j.Verdict != c.verdict {
				t.Errorf("--reclaim=%s: %s, want %s", c.reclaim, tr.j.Headline(), c.verdict)
			}
			if c.verdict == Fail && (tr.j.Culprit == nil || BaseName(tr.j.Culprit.Name) != "cuStreamQuery") {
				t.Errorf("--reclaim=%s: culprit %+v, want cuStreamQuery", c.reclaim, tr.j.Culprit)
			}
		})
	}
}

// TestGPUOverhead reports (does not judge) the cost of the observer on
// PyTorch's many-thread stress body: runs with and without it, paired
// alternately, and the ratio of the medians.
func TestGPUOverhead(t *testing.T) {
	obs := gpuObserver(t)
	script, err := filepath.Abs("../../scripts/pytorch-threads.py")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(script); err != nil {
		t.Skip(err)
	}
	var plain, under []time.Duration
	for i := 0; i < 5; i++ {
		ctx, cancel := context.WithTimeout(context.Background(), setupLimit)
		start := time.Now()
		out, err := exec.CommandContext(ctx, "python3", script, "--runs", "1").CombinedOutput()
		cancel()
		if err != nil {
			t.Fatalf("the untraced run: %v\n%s", err, words.LastLines(string(out), tailLines))
		}
		plain = append(plain, time.Since(start))
		tr, wall := gpuTrace(t, obs, "python3", script, "--runs", "1")
		if !tr.r.Exit.OK() {
			t.Fatalf("traced run: %s", tr.r.Exit.Describe())
		}
		under = append(under, wall)
	}
	slices.Sort(plain)
	slices.Sort(under)
	t.Logf("pytorch-threads.py --runs 1, 5 pairs: median %v without the observer, %v with it: ratio %.3f",
		plain[2], under[2], float64(under[2])/float64(plain[2]))
}
