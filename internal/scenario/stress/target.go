package stress

// Library targets: the stress scenario run against a vendor library
// (MIOpen through libMIOpen, cuDNN through libcudnn) instead of miotool's
// handle, heuristic and caches.

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"miotool/internal/conv"
	"miotool/internal/dnn/target"
	"miotool/internal/hip"
	"miotool/internal/hip/osthread"
	"miotool/internal/scenario"
)

// AlgoSelection says how the stress scenario picks each shape's algorithm.
type AlgoSelection string

// Selections.
const (
	// SelectHeuristic asks the library without benchmarking: cuDNN's
	// cudnnGetConvolutionForwardAlgorithm_v7, MIOpen's immediate mode (its
	// TunaNet/WTI fallback when the find-db has no record), as PyTorch
	// does without benchmark mode.
	SelectHeuristic AlgoSelection = "heuristic"
	// SelectFind runs the library's find for every shape (slow: each of
	// the scenario's shapes is new).
	SelectFind AlgoSelection = "find"
)

// ParseAlgoSelection accepts heuristic and find.
func ParseAlgoSelection(s string) (AlgoSelection, error) {
	switch AlgoSelection(s) {
	case SelectHeuristic, SelectFind:
		return AlgoSelection(s), nil
	}
	return "", fmt.Errorf("unknown algorithm selection %q (want heuristic or find)", s)
}

// TargetOptions configure PyTorch's
// test_cudnn_multiple_threads_same_device on a library target: each of
// Threads threads has its own stream and handle on one device; after a
// barrier each runs Iterations times "y = conv2d(x, ones(1,1,2,2)); y /=
// 4" starting from ones(1,1,Size,Size), the output of one iteration being
// the input of the next, and the final sum must be (Size-Iterations)^2.
type TargetOptions struct {
	Target     target.Name
	Threads    int
	Trials     int
	Iterations int
	Size       int
	Select     AlgoSelection
	// Timeout bounds each trial; a trial that does not finish is a hang,
	// a counted outcome. Zero means 10 minutes.
	Timeout time.Duration
	Log     func(format string, args ...any)
	// Open opens the library (target.Open when nil).
	Open target.Opener
}

// DefaultTargetOptions is the PyTorch test's shape: 2 threads, 3 trials,
// 1000 iterations on 2048x2048 ones, heuristic algorithm selection.
func DefaultTargetOptions(t target.Name) TargetOptions {
	return TargetOptions{Target: t, Threads: 2, Trials: 3, Iterations: 1000, Size: 2048, Select: SelectHeuristic}
}

// Check says in one line what is wrong with the options.
func (o TargetOptions) Check() error {
	switch {
	case o.Threads < 1 || o.Threads > 256:
		return fmt.Errorf("threads %d: want 1 to 256", o.Threads)
	case o.Trials < 1:
		return fmt.Errorf("trials %d: want 1 or more", o.Trials)
	case o.Size < 2 || o.Size > 16384:
		return fmt.Errorf("size %d: want 2 to 16384", o.Size)
	case o.Iterations < 1 || o.Iterations >= o.Size:
		return fmt.Errorf("iterations %d: want 1 to size-1 (%d); each iteration shrinks the image by one", o.Iterations, o.Size-1)
	case o.Timeout < 0:
		return fmt.Errorf("timeout %v is negative", o.Timeout)
	}
	_, err := ParseAlgoSelection(string(o.Select))
	return err
}

// Expected is the exact sum of every thread's final output.
func (o TargetOptions) Expected() float64 {
	side := float64(o.Size - o.Iterations)
	return side * side
}

// TargetThread is one thread's share of one trial.
type TargetThread struct {
	Trial, Thread int
	Sum, Expected float64
	// Wrong counts output elements that are not exactly 1.
	Wrong int
	// Algos counts the convolutions run with each algorithm.
	Algos   map[string]int
	Err     string
	Elapsed time.Duration
}

// OK reports whether the thread finished with the exact sum.
func (t TargetThread) OK() bool { return t.Err == "" && t.Sum == t.Expected && t.Wrong == 0 }

// TargetResult is the whole run.
type TargetResult struct {
	Target   target.Name
	Library  string
	Options  TargetOptions
	Threads  []TargetThread
	Measured scenario.Outcome
	// Hung is set when a trial did not finish within the timeout; its
	// threads are left running and their resources are not released.
	Hung    bool
	Detail  string
	Elapsed time.Duration
}

// RunTarget runs the stress scenario on a library target. Failures
// of the library during the loop are measured outcomes (FAIL); only a
// failure to set the scenario up is an error.
func RunTarget(ctx context.Context, dev hip.Device, opts TargetOptions) (*TargetResult, error) {
	if opts.Target == target.Builtin {
		return nil, errors.New("the builtin target has its own stress scenario")
	}
	if opts.Select == "" {
		opts.Select = SelectHeuristic
	}
	if opts.Timeout == 0 {
		opts.Timeout = 10 * time.Minute
	}
	if err := opts.Check(); err != nil {
		return nil, err
	}
	lib, err := opts.Open.Open(dev, opts.Target)
	if err != nil {
		return nil, err
	}
	start := time.Now()
	res := &TargetResult{Target: opts.Target, Library: lib.Describe(), Options: opts}
	logf := opts.Log
	if logf == nil {
		logf = func(string, ...any) {}
	}
	for trial := range opts.Trials {
		logf("trial %d of %d: %d threads x %d iterations on %dx%d", trial+1, opts.Trials, opts.Threads, opts.Iterations, opts.Size, opts.Size)
		threads, hung, err := runTargetStressTrial(ctx, dev, lib, opts, trial)
		res.Threads = append(res.Threads, threads...)
		if hung {
			res.Hung = true
			res.Detail = fmt.Sprintf("trial %d did not finish within %v", trial+1, opts.Timeout)
			break
		}
		if err != nil {
			_ = lib.Close()
			return res, fmt.Errorf("trial %d: %w", trial+1, err)
		}
	}
	if !res.Hung {
		_ = lib.Close() // a hung trial's threads may still use the binding
	}
	res.Elapsed = time.Since(start)
	res.Measured = scenario.Pass
	var bad []string
	for _, t := range res.Threads {
		if !t.OK() {
			res.Measured = scenario.Fail
			why := t.Err
			if why == "" {
				why = fmt.Sprintf("sum %.0f, want %.0f (%d elements not 1)", t.Sum, t.Expected, t.Wrong)
			}
			bad = append(bad, fmt.Sprintf("trial %d thread %d: %s", t.Trial+1, t.Thread+1, why))
		}
	}
	if res.Hung {
		res.Measured = scenario.Fail
	}
	res.Detail = scenario.JoinDetail(res.Detail, strings.Join(bad, "; "))
	return res, nil
}

// targetStressProblem is one iteration's convolution: 1x1xHxH by a 2x2 filter.
func targetStressProblem(h int) conv.Problem {
	return conv.Problem{N: 1, C: 1, H: h, W: h, K: 1, R: 2, S: 2, StrideH: 1, StrideW: 1, DilH: 1, DilW: 1, Groups: 1}
}

// targetStressParty is one thread of a trial.
type targetStressParty struct {
	target.Party
	x, w   hip.DevPtr // x is the ping buffer, Party.Y the pong
	result hip.DevPtr
	algos  map[string]int
	report TargetThread
}

func runTargetStressTrial(ctx context.Context, dev hip.Device, lib target.Target, opts TargetOptions, trial int) ([]TargetThread, bool, error) {
	parties := make([]*targetStressParty, opts.Threads)
	out := func() []TargetThread {
		ts := make([]TargetThread, 0, len(parties))
		for _, sp := range parties {
			if sp != nil {
				ts = append(ts, sp.report)
			}
		}
		return ts
	}
	var k scenario.FirstError
	cleanup := func() {
		for _, sp := range parties {
			if sp == nil {
				continue
			}
			k.Add(sp.Thread.Run(func() error { return sp.teardown(dev) }))
			sp.Thread.Stop()
		}
	}
	bytes := 4 * opts.Size * opts.Size
	for i := range parties {
		th, err := osthread.Start(lib.BindThread)
		if err != nil {
			cleanup()
			return out(), false, err
		}
		sp := &targetStressParty{Party: target.Party{Thread: th}, algos: map[string]int{},
			report: TargetThread{Trial: trial, Thread: i, Expected: opts.Expected()}}
		parties[i] = sp
		if err := th.Run(func() error { return sp.setup(dev, lib, bytes) }); err != nil {
			cleanup()
			return out(), false, err
		}
	}

	// The barrier: every thread is set up and idle before any loop starts.
	done := make([]<-chan error, len(parties))
	for i, sp := range parties {
		done[i] = sp.Thread.Go(func() error { return sp.loop(ctx, dev, opts) })
	}
	timeout := time.NewTimer(opts.Timeout)
	defer timeout.Stop()
	for i, sp := range parties {
		select {
		case err := <-done[i]:
			if err != nil {
				sp.report.Err = err.Error()
			}
		case <-timeout.C:
			return out(), true, nil
		}
	}
	for _, sp := range parties {
		if sp.report.Err == "" {
			if err := sp.Thread.Run(func() error { return sp.verify(dev, opts) }); err != nil {
				sp.report.Err = err.Error()
			}
		}
		sp.report.Algos = sp.algos
	}
	cleanup()
	if err := ctx.Err(); err != nil {
		return out(), false, err
	}
	return out(), false, k.Err
}

// setup makes the party's stream, handle and both image buffers, fills x
// with ones and w with a 2x2 of ones, and waits for the uploads (PyTorch's
// torch.cuda.synchronize() before the barrier).
func (sp *targetStressParty) setup(dev hip.Device, lib target.Target, bytes int) error {
	if err := sp.Party.Setup(dev, lib, bytes); err != nil {
		return err
	}
	var err error
	if sp.x, err = dev.Malloc(bytes); err != nil {
		return err
	}
	if sp.w, err = dev.Malloc(16); err != nil {
		return err
	}
	ones := make([]float32, bytes/4)
	for i := range ones {
		ones[i] = 1
	}
	if err := dev.MemcpyHtoD(sp.x, conv.Float32Bytes(ones)); err != nil {
		return err
	}
	if err := dev.MemcpyHtoD(sp.w, conv.Float32Bytes(ones[:4])); err != nil {
		return err
	}
	return dev.StreamSynchronize(sp.Stream)
}

// loop is the thread's work after the barrier.
func (sp *targetStressParty) loop(ctx context.Context, dev hip.Device, opts TargetOptions) error {
	start := time.Now()
	defer func() { sp.report.Elapsed = time.Since(start) }()
	cur, nxt := sp.x, sp.Y
	chosen := map[int]target.Algo{}
	for i := range opts.Iterations {
		if i%64 == 0 {
			if err := ctx.Err(); err != nil {
				return err
			}
		}
		h := opts.Size - i
		p := targetStressProblem(h)
		a, ok := chosen[h]
		if !ok {
			var err error
			if a, err = sp.pick(dev, p, opts.Select, cur, nxt); err != nil {
				return fmt.Errorf("iteration %d (%dx%d): %w", i+1, h, h, err)
			}
			chosen[h] = a
		}
		sp.algos[a.Name]++
		if err := sp.UseAlgo(dev, p, a); err != nil {
			return fmt.Errorf("iteration %d: %w", i+1, err)
		}
		b := target.Buffers{X: cur, W: sp.w, Y: nxt, Workspace: sp.WS, WorkspaceBytes: sp.WSBytes}
		if err := sp.Session.Forward(p, a, b); err != nil {
			return fmt.Errorf("iteration %d: forward: %w", i+1, err)
		}
		if err := sp.Session.Scale(p, nxt, 0.25); err != nil {
			return fmt.Errorf("iteration %d: scale: %w", i+1, err)
		}
		cur, nxt = nxt, cur
	}
	sp.result = cur
	return dev.StreamSynchronize(sp.Stream)
}

// pick chooses p's algorithm the way opts asks.
func (sp *targetStressParty) pick(dev hip.Device, p conv.Problem, sel AlgoSelection, x, y hip.DevPtr) (target.Algo, error) {
	if sel == SelectHeuristic {
		return sp.Session.Choose(p)
	}
	need, err := sp.Session.FindWorkspace(p)
	if err != nil {
		return target.Algo{}, err
	}
	if err := sp.EnsureWorkspace(dev, need); err != nil {
		return target.Algo{}, err
	}
	found, err := sp.Session.Find(p, target.Buffers{X: x, W: sp.w, Y: y, Workspace: sp.WS, WorkspaceBytes: sp.WSBytes})
	if err != nil {
		return target.Algo{}, fmt.Errorf("find: %w", err)
	}
	return target.FirstThatRan(found)
}

// verify reads the final image and sums it.
func (sp *targetStressParty) verify(dev hip.Device, opts TargetOptions) error {
	side := opts.Size - opts.Iterations
	got, err := target.ReadFloats(dev, sp.result, side*side)
	if err != nil {
		return err
	}
	sum, wrong := 0.0, 0
	for _, v := range got {
		sum += float64(v)
		if v != 1 {
			wrong++
		}
	}
	sp.report.Sum, sp.report.Wrong = sum, wrong
	return nil
}

func (sp *targetStressParty) teardown(dev hip.Device) error {
	var k scenario.FirstError
	k.Add(sp.Party.Teardown(dev))
	for _, p := range []hip.DevPtr{sp.x, sp.w} {
		if p != 0 {
			k.Add(dev.Free(p))
		}
	}
	sp.x, sp.w = 0, 0
	return k.Err
}

// AsRunResult is the run in the form a stress-threads child process
// reports (WriteRunLine), so a library trial can run in a fresh process
// like the builtin ones. Arch names the library and Cache is "library".
func (res *TargetResult) AsRunResult() *RunResult {
	o := res.Options
	run := &RunResult{Threads: o.Threads, Iters: o.Iterations, Trials: o.Trials, Size: o.Size, Expected: o.Expected(),
		Arch: res.Library, Cache: "library", Solvers: map[string]int{}, ElapsedMs: float64(res.Elapsed) / float64(time.Millisecond)}
	for _, th := range res.Threads {
		for len(run.Sums) <= th.Trial {
			run.Sums = append(run.Sums, make([]float64, o.Threads))
		}
		if th.Thread < len(run.Sums[th.Trial]) {
			run.Sums[th.Trial][th.Thread] = th.Sum
		}
		if !th.OK() {
			run.Wrong++
		}
		for name, n := range th.Algos {
			run.Solvers[name] += n
		}
	}
	if res.Hung && run.Wrong == 0 {
		run.Wrong = 1
	}
	return run
}
