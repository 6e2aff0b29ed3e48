package stress

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"miotool/internal/conv"
	"miotool/internal/dnn/target"
	"miotool/internal/dnn/target/targettest"
	"miotool/internal/hip"
	"miotool/internal/scenario"
)

func newDevice(t *testing.T, d hip.Dialect) hip.Device { return targettest.SimDevice(t, d) }

func stressOpts(open target.Opener) TargetOptions {
	return TargetOptions{Open: open, Target: target.CUDNN, Threads: 3, Trials: 2, Iterations: 10, Size: 24, Timeout: 30 * time.Second}
}

func TestTargetStressGetsTheExactSum(t *testing.T) {
	dev := newDevice(t, hip.DialectCUDA)
	lib := targettest.NewFakeLib(t, dev)
	open := targettest.Opener(lib, nil)
	var logged []string
	var mu sync.Mutex
	opts := stressOpts(open)
	opts.Log = func(f string, a ...any) { mu.Lock(); logged = append(logged, fmt.Sprintf(f, a...)); mu.Unlock() }
	res, err := RunTarget(context.Background(), dev, opts)
	if err != nil {
		t.Fatal(err)
	}
	if res.Measured != scenario.Pass || res.Hung || len(res.Threads) != 6 {
		t.Fatalf("measured %s hung %v threads %d: %s", res.Measured, res.Hung, len(res.Threads), res.Detail)
	}
	for _, th := range res.Threads {
		if th.Sum != 196 || th.Expected != 196 || th.Wrong != 0 || th.Algos[conv.SolverImplicitGemm] != 10 {
			t.Errorf("trial %d thread %d: %+v", th.Trial, th.Thread, th)
		}
	}
	if lib.Open.Load() != 0 || !lib.Closed.Load() || lib.Sessions.Load() != 6 {
		t.Fatalf("sessions made %d, open %d, closed %v", lib.Sessions.Load(), lib.Open.Load(), lib.Closed.Load())
	}
	if len(logged) != 2 || !strings.Contains(logged[1], "trial 2 of 2: 3 threads x 10 iterations on 24x24") {
		t.Fatalf("log %q", logged)
	}

	run := res.AsRunResult()
	if !run.OK() || run.Trials != 2 || len(run.Sums) != 2 || len(run.Sums[1]) != 3 || run.Sums[1][2] != 196 ||
		run.Solvers[conv.SolverImplicitGemm] != 60 || run.Cache != "library" {
		t.Fatalf("as a child's result: %+v", run)
	}
}

func TestTargetStressFindSelection(t *testing.T) {
	dev := newDevice(t, hip.DialectHIP)
	open := targettest.Opener(targettest.NewFakeLib(t, dev), nil)
	opts := stressOpts(open)
	opts.Select, opts.Threads, opts.Trials = SelectFind, 2, 1
	res, err := RunTarget(context.Background(), dev, opts)
	if err != nil {
		t.Fatal(err)
	}
	if res.Measured != scenario.Pass {
		t.Fatalf("%s: %+v", res.Detail, res.Threads)
	}
	for _, th := range res.Threads {
		if th.Algos[conv.SolverImplicitGemm] != 10 {
			t.Fatalf("find chose %v", th.Algos)
		}
	}
}

func TestTargetStressCountsAWrongSum(t *testing.T) {
	dev := newDevice(t, hip.DialectCUDA)
	lib := targettest.NewFakeLib(t, dev)
	lib.WrongSession = 2
	open := targettest.Opener(lib, nil)
	opts := stressOpts(open)
	opts.Trials = 1
	res, err := RunTarget(context.Background(), dev, opts)
	if err != nil {
		t.Fatal(err)
	}
	if res.Measured != scenario.Fail || res.Threads[1].OK() || !res.Threads[0].OK() || !strings.Contains(res.Detail, "trial 1 thread 2: sum") {
		t.Fatalf("measured %s: %s", res.Measured, res.Detail)
	}
	if run := res.AsRunResult(); run.OK() || run.Wrong != 1 {
		t.Fatalf("as a child's result: %+v", run)
	}
}

// A trial that does not finish is a hang, reported, not waited for.
func TestTargetStressTurnsAHangIntoAnOutcome(t *testing.T) {
	dev := newDevice(t, hip.DialectCUDA)
	lib := targettest.NewFakeLib(t, dev)
	lib.Block = make(chan struct{})
	t.Cleanup(func() { close(lib.Block) })
	open := targettest.Opener(lib, nil)
	opts := stressOpts(open)
	opts.Timeout = 50 * time.Millisecond // the forwards block until the test ends
	res, err := RunTarget(context.Background(), dev, opts)
	if err != nil {
		t.Fatal(err)
	}
	if !res.Hung || res.Measured != scenario.Fail || len(res.Threads) != 3 || !strings.Contains(res.Detail, "trial 1 did not finish within 50ms") {
		t.Fatalf("hung %v measured %s: %s", res.Hung, res.Measured, res.Detail)
	}
	if lib.Closed.Load() {
		t.Fatal("the library was closed under threads still using it")
	}
	if run := res.AsRunResult(); run.OK() {
		t.Fatal("a hung run reads as passed")
	}
}

func TestTargetStressOptionsAreChecked(t *testing.T) {
	ok := DefaultTargetOptions(target.CUDNN)
	if err := ok.Check(); err != nil || ok.Expected() != 1098304 {
		t.Fatalf("the PyTorch shape: %v, expected sum %.0f", err, ok.Expected())
	}
	for _, tt := range []struct {
		edit func(*TargetOptions)
		want string
	}{
		{func(o *TargetOptions) { o.Threads = 0 }, "threads 0"},
		{func(o *TargetOptions) { o.Trials = 0 }, "trials 0"},
		{func(o *TargetOptions) { o.Size = 1 }, "size 1"},
		{func(o *TargetOptions) { o.Iterations = 2048 }, "iterations 2048: want 1 to size-1 (2047)"},
		{func(o *TargetOptions) { o.Timeout = -time.Second }, "timeout -1s is negative"},
		{func(o *TargetOptions) { o.Select = "guess" }, `unknown algorithm selection "guess"`},
	} {
		o := ok
		tt.edit(&o)
		if err := o.Check(); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%+v: %v, want %q", o, err, tt.want)
		}
	}
	dev := newDevice(t, hip.DialectCUDA)
	open := targettest.Opener(targettest.NewFakeLib(t, dev), nil)
	bad := stressOpts(open)
	bad.Size = 1
	if _, err := RunTarget(context.Background(), dev, bad); err == nil {
		t.Fatal("bad options ran")
	}
	if _, err := RunTarget(context.Background(), dev, TargetOptions{Target: target.Builtin}); err == nil {
		t.Fatal("the builtin target ran here")
	}
}

func TestTargetStressReportsALibraryThatWillNotOpen(t *testing.T) {
	dev := newDevice(t, hip.DialectCUDA)
	missing := &target.UnavailableError{Target: target.CUDNN, Reason: "libcudnn.so.9 not found (tried libcudnn.so.9: no such file)"}
	open := targettest.Opener(nil, missing)
	_, err := RunTarget(context.Background(), dev, stressOpts(open))
	if !errors.Is(err, missing) || err.Error() != "target cudnn unavailable: libcudnn.so.9 not found (tried libcudnn.so.9: no such file)" {
		t.Fatalf("%v", err)
	}
}

func TestTargetStressThroughTheStandInLibraries(t *testing.T) {
	for _, tt := range []struct {
		target target.Name
		open   func(*testing.T) (*targettest.HostDevice, target.Target)
		sel    AlgoSelection
		algo   string
	}{
		{target.CUDNN, targettest.CUDNNStandIn, SelectHeuristic, "IMPLICIT_GEMM"},
		{target.CUDNN, targettest.CUDNNStandIn, SelectFind, "IMPLICIT_PRECOMP_GEMM"},
		{target.MIOpen, targettest.MIOpenStandIn, SelectHeuristic, "solution 85 (Direct)"},
		{target.MIOpen, targettest.MIOpenStandIn, SelectFind, "miopenConvolutionFwdAlgoDirect"},
	} {
		t.Run(string(tt.target)+"/"+string(tt.sel), func(t *testing.T) {
			dev, lib := tt.open(t)
			open := targettest.Opener(lib, nil)
			opts := TargetOptions{Open: open, Target: tt.target, Threads: 2, Trials: 2, Iterations: 30, Size: 40, Select: tt.sel}
			res, err := RunTarget(context.Background(), dev, opts)
			if err != nil {
				t.Fatal(err)
			}
			if res.Measured != scenario.Pass || len(res.Threads) != 4 {
				t.Fatalf("measured %s: %s %+v", res.Measured, res.Detail, res.Threads)
			}
			for _, th := range res.Threads {
				if th.Sum != 100 || th.Algos[tt.algo] != 30 {
					t.Fatalf("thread %+v", th)
				}
			}
			if n := dev.Allocations(); n != 0 {
				t.Fatalf("%d allocations left", n)
			}
		})
	}
}
