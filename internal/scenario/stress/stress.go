// Package stress runs stress-threads, PyTorch's
// test_cudnn_multiple_threads_same_device made standalone: several threads
// convolve at once, each choosing its solvers through the AI heuristic's
// model cache (ROCM-27477), every run in a fresh process so that a crash is
// a counted outcome. It returns the runs' facts and writes them into a
// result (Fill); RunTarget runs the same workload on a library target.
package stress

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"miotool/internal/aiheur"
	"miotool/internal/aiheur/cache"
	"miotool/internal/conv"
	"miotool/internal/handle"
	"miotool/internal/hip"
)

// The PyTorch test test_cudnn_multiple_threads_same_device, whose defaults
// stress-threads keeps.
const (
	DefaultThreads = 2
	DefaultIters   = 1000
	DefaultTrials  = 3
	// InputSize is the input's height and width: 1x1x2048x2048 ones.
	InputSize = 2048
	// stressDivisor is what every iteration's output is divided by: the
	// sum of the 2x2 ones filter, so every value stays 1.
	stressDivisor = 4
)

// Options configure one process's run of the stress scenario.
type Options struct {
	Threads, Iters, Trials int
	// Size is the input's height and width (InputSize when zero).
	Size int
	// Policy and RaceWindow make the process's model caches.
	Policy     cache.Policy
	RaceWindow time.Duration
	// Models holds the TunaNet files (a model directory or the embedded
	// models); Arch picks the model set ("" lets Arch choose).
	Models fs.FS
	Arch   string
	Log    func(format string, args ...any)
}

func (o *Options) validate() error {
	if o.Size == 0 {
		o.Size = InputSize
	}
	switch {
	case o.Threads < 1 || o.Threads > 1024:
		return fmt.Errorf("threads must be between 1 and 1024, got %d", o.Threads)
	case o.Trials < 1:
		return fmt.Errorf("trials must be at least 1, got %d", o.Trials)
	case o.Size < 2 || o.Size > 1<<15:
		return fmt.Errorf("size must be between 2 and %d, got %d", 1<<15, o.Size)
	case o.Iters < 1 || o.Iters >= o.Size:
		return fmt.Errorf("iters must be between 1 and %d (each iteration shrinks the %dx%d input by one), got %d", o.Size-1, o.Size, o.Size, o.Iters)
	case o.RaceWindow < 0:
		return fmt.Errorf("race window must not be negative, got %v", o.RaceWindow)
	case o.Models == nil:
		return errors.New("no model files to run the heuristic with")
	}
	_, err := cache.ParsePolicy(string(o.Policy))
	return err
}

// ExpectedSum is the PyTorch test's assertion: after iters
// iterations every value is still 1, on a (size-iters)^2 output.
func ExpectedSum(size, iters int) float64 {
	side := float64(size - iters)
	return side * side
}

// RunResult is what one process's run measured. A child process prints it
// as one line (ResultPrefix + JSON) for the parent to read.
type RunResult struct {
	Threads  int     `json:"threads"`
	Iters    int     `json:"iters"`
	Trials   int     `json:"trials"`
	Size     int     `json:"size"`
	Expected float64 `json:"expected_sum"`
	// Sums are the final sums, [trial][thread].
	Sums [][]float64 `json:"sums"`
	// Wrong counts the sums that differ from Expected.
	Wrong int    `json:"wrong"`
	Arch  string `json:"arch"`
	// Cache is the caches' policy line; CacheStats their counters.
	Cache      string      `json:"cache"`
	CacheStats cache.Stats `json:"cache_stats"`
	// Solvers counts the solver chosen per convolution; Fallbacks the
	// convolutions the model did not cover (first applicable solver).
	Solvers   map[string]int `json:"solvers"`
	Fallbacks int            `json:"fallbacks"`
	ElapsedMs float64        `json:"elapsed_ms"`
	// Detections are the caches' race, destroyed-model and use-after-free
	// records over the whole run.
	Detections cache.Detections `json:"detections"`
}

// OK reports whether every sum was right.
func (r *RunResult) OK() bool { return r.Wrong == 0 }

// ResultPrefix starts the line a child process prints its RunResult on.
const ResultPrefix = "miotool-stress-run: "

// WriteResult prints r as a child's result line.
func WriteResult(w io.Writer, r *RunResult) error {
	data, err := json.Marshal(r)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(w, "%s%s\n", ResultPrefix, data)
	return err
}

// ParseResult finds a child's result line in its standard output.
func ParseResult(stdout []byte) (*RunResult, bool) {
	for _, line := range strings.Split(string(stdout), "\n") {
		body, ok := strings.CutPrefix(strings.TrimSpace(line), ResultPrefix)
		if !ok {
			continue
		}
		var r RunResult
		if json.Unmarshal([]byte(body), &r) == nil {
			return &r, true
		}
	}
	return nil, false
}

// Arch picks the TunaNet model set in models: miotool's own when
// present (it ranks miotool's solvers), else the set MIOpen would use for
// deviceArch, else the first MIOpen set found.
func Arch(models fs.FS, deviceArch string) (string, error) {
	has := func(arch string) bool {
		m, meta := aiheur.TunaNetFiles(arch)
		_, e1 := fs.Stat(models, m)
		_, e2 := fs.Stat(models, meta)
		return e1 == nil && e2 == nil
	}
	candidates := []string{aiheur.BuiltinArch, aiheur.TunaNetArch(deviceArch)}
	for _, a := range []string{"gfx942", "gfx90a", "gfx908"} {
		candidates = append(candidates, a)
	}
	for _, a := range candidates {
		if has(a) {
			return a, nil
		}
	}
	m, meta := aiheur.TunaNetFiles(aiheur.BuiltinArch)
	return "", fmt.Errorf("the model files hold no TunaNet model (miotool's %s with %s, or MIOpen's <arch>.tn.model with <arch>_metadata.tn.model)", m, meta)
}

// CheckModels picks the model set in models for deviceArch (see Arch) and
// loads it once, so that a broken file is one clear error before the runs
// rather than a failure in every run.
func CheckModels(models fs.FS, deviceArch string) (arch string, err error) {
	if arch, err = Arch(models, deviceArch); err != nil {
		return "", err
	}
	tn, err := aiheur.LoadTunaNet(models, arch)
	if err != nil {
		return "", err
	}
	tn.Release()
	return arch, nil
}

// CacheLine describes the model caches policy and raceWindow make, for the
// result: the caches the runs will build, in this process's words.
func CacheLine(policy cache.Policy, raceWindow time.Duration) (string, error) {
	caches, err := aiheur.NewCaches(policy, cache.Options{RaceWindow: raceWindow})
	if err != nil {
		return "", err
	}
	return caches.Describe(), nil
}

// solverFor maps a ranked solver name to one of miotool's solvers: its own
// names as they are, and MIOpen's forward solvers by family (naive to
// naive, 1x1 GEMM to the 1x1 GEMM, other GEMM and implicit-GEMM solvers to
// the tiled implicit GEMM). Winograd, FFT, direct assembly and backward
// solvers have no counterpart ("").
func solverFor(name string) string {
	switch name {
	case conv.SolverNaive, conv.SolverImplicitGemm, conv.SolverGemm1x1:
		return name
	}
	forward := strings.Contains(name, "Fwd")
	switch {
	case !forward:
		return ""
	case strings.Contains(name, "Naive"):
		return conv.SolverNaive
	case strings.HasPrefix(name, "GemmFwd1x1"):
		return conv.SolverGemm1x1
	case strings.HasPrefix(name, "GemmFwd"), strings.Contains(name, "ImplicitGemm"), strings.Contains(name, "Igemm"):
		return conv.SolverImplicitGemm
	}
	return ""
}

// heuristic chooses a solver per problem the way MIOpen's immediate mode
// does with no find-db record: it takes the TunaNet model from the static
// cache (every call), ranks the solvers and takes the best applicable one.
type heuristic struct {
	caches  *aiheur.Caches
	models  fs.FS
	arch    string
	solvers []*conv.Solver
}

// pick returns the solver for p and whether the model chose it (false: the
// model does not cover p, and the first applicable solver is used).
func (h *heuristic) pick(p conv.Problem) (*conv.Solver, bool, error) {
	held, err := h.caches.HoldTunaNet(h.models, h.arch)
	if err != nil {
		return nil, false, err
	}
	scores, err := held.Model.Scores(aiProblem(p))
	held.Done()
	switch {
	case errors.Is(err, aiheur.ErrNotSupported):
		scores = nil
	case err != nil:
		return nil, false, err
	}
	for _, s := range scores {
		name := solverFor(s.Solver)
		if name == "" {
			continue
		}
		for _, sol := range h.solvers {
			if sol.Name == name && sol.IsApplicable(p) {
				return sol, true, nil
			}
		}
	}
	for _, sol := range h.solvers {
		if sol.IsApplicable(p) {
			return sol, false, nil
		}
	}
	return nil, false, fmt.Errorf("no solver applies to %s", p)
}

// aiProblem is p as the heuristics see it: forward, FP32, NCHW.
func aiProblem(p conv.Problem) aiheur.Problem {
	return aiheur.Problem{N: p.N, C: p.C, H: p.H, W: p.W, K: p.K, R: p.R, S: p.S,
		PadH: p.PadH, PadW: p.PadW, StrideH: p.StrideH, StrideW: p.StrideW,
		DilationH: p.DilH, DilationW: p.DilW, Groups: p.Groups,
		Direction: aiheur.Forward, DataType: "FP32", Layout: "NCHW"}
}

// stressProblem is the convolution of a side x side image with the 2x2
// weights; iteration i convolves side = size - i, the previous output.
func stressProblem(side int) conv.Problem {
	return conv.Problem{N: 1, C: 1, H: side, W: side, K: 1, R: 2, S: 2,
		StrideH: 1, StrideW: 1, DilH: 1, DilW: 1, Groups: 1}
}

// stressWorker is one thread's handle and buffers, kept across trials as
// PyTorch keeps a thread's cuDNN/MIOpen handle in its pool.
type stressWorker struct {
	h        *handle.Handle
	buf      [2]hip.DevPtr
	weights  hip.DevPtr
	result   hip.DevPtr // the buffer holding the last trial's output
	solvers  map[string]int
	fellBack int
}

// RunHere runs the scenario in this process: per trial, Threads threads
// (each with its own handle and stream on dev) meet at a barrier, then each
// runs Iters iterations of convolution + division on its own data, every
// convolution's solver chosen through the AI heuristic and the model cache
// under test; then every thread's sum is checked. A crash of the pre-fix
// cache takes the process down: run it in a child process (RunProcesses).
func RunHere(ctx context.Context, dev hip.Device, o Options) (*RunResult, error) {
	if err := o.validate(); err != nil {
		return nil, err
	}
	logf := o.Log
	if logf == nil {
		logf = func(string, ...any) {}
	}
	start := time.Now()
	arch := o.Arch
	if arch == "" {
		var err error
		if arch, err = Arch(o.Models, dev.Props().Arch); err != nil {
			return nil, err
		}
	}
	recs := cache.NewRecords(PrintDetection)
	caches, err := aiheur.NewCaches(o.Policy, cache.Options{RaceWindow: o.RaceWindow, Records: recs})
	if err != nil {
		return nil, err
	}
	heur := &heuristic{caches: caches, models: o.Models, arch: arch, solvers: conv.Solvers()}
	run := &RunResult{Threads: o.Threads, Iters: o.Iters, Trials: o.Trials, Size: o.Size,
		Expected: ExpectedSum(o.Size, o.Iters), Arch: arch, Cache: caches.Describe(), Solvers: map[string]int{}}

	ones := make([]float32, o.Size*o.Size)
	for i := range ones {
		ones[i] = 1
	}
	onesBytes := conv.Float32Bytes(ones)
	workers := make([]*stressWorker, o.Threads)
	defer func() {
		for _, w := range workers {
			if w != nil {
				w.close(dev)
			}
		}
	}()
	for t := range workers {
		if workers[t], err = newStressWorker(dev, o.Size); err != nil {
			return nil, fmt.Errorf("thread %d: %w", t, err)
		}
	}
	for trial := 0; trial < o.Trials; trial++ {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		if err := runStressTrial(ctx, dev, workers, heur, o, onesBytes); err != nil {
			return nil, fmt.Errorf("trial %d: %w", trial+1, err)
		}
		caches.Barrier() // every worker has joined
		sums := make([]float64, o.Threads)
		side := o.Size - o.Iters
		for t, w := range workers {
			if sums[t], err = deviceSum(dev, w.result, side*side); err != nil {
				return nil, fmt.Errorf("trial %d, thread %d: reading the result: %w", trial+1, t, err)
			}
			if sums[t] != run.Expected {
				run.Wrong++
			}
		}
		run.Sums = append(run.Sums, sums)
		logf("trial %d: sums %v (expected %.0f)", trial+1, sums, run.Expected)
	}
	for _, w := range workers {
		for name, n := range w.solvers {
			run.Solvers[name] += n
		}
		run.Fallbacks += w.fellBack
	}
	run.CacheStats = caches.Stats()
	run.Detections = caches.Detections()
	run.ElapsedMs = float64(time.Since(start)) / float64(time.Millisecond)
	return run, nil
}

func newStressWorker(dev hip.Device, size int) (*stressWorker, error) {
	h, err := handle.New(dev, handle.Options{})
	if err != nil {
		return nil, err
	}
	w := &stressWorker{h: h, solvers: map[string]int{}}
	for i := range w.buf {
		if w.buf[i], err = dev.Malloc(4 * size * size); err != nil {
			w.close(dev)
			return nil, fmt.Errorf("allocate a %dx%d buffer: %w", size, size, err)
		}
	}
	if w.weights, err = dev.Malloc(4 * 4); err == nil {
		err = dev.MemcpyHtoD(w.weights, conv.Float32Bytes([]float32{1, 1, 1, 1}))
	}
	if err != nil {
		w.close(dev)
		return nil, fmt.Errorf("the 1x1x2x2 weights: %w", err)
	}
	return w, nil
}

func (w *stressWorker) close(dev hip.Device) {
	_ = w.h.Close()
	for _, p := range append(w.buf[:], w.weights) {
		if p != 0 {
			_ = dev.Free(p)
		}
	}
}

// runStressTrial is one trial: every thread resets its input to ones,
// synchronizes, waits at the barrier, and runs the iterations.
func runStressTrial(ctx context.Context, dev hip.Device, workers []*stressWorker, heur *heuristic, o Options, ones []byte) error {
	var (
		barrier sync.WaitGroup
		done    sync.WaitGroup
		stop    atomic.Bool
		mu      sync.Mutex
		first   error
	)
	fail := func(err error) {
		mu.Lock()
		if first == nil {
			first = err
		}
		mu.Unlock()
		stop.Store(true)
	}
	barrier.Add(len(workers))
	for t, w := range workers {
		done.Add(1)
		go func() {
			defer done.Done()
			// A thread of its own, as each PyTorch worker is.
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			cache.NameThread(fmt.Sprintf("thread %d", t+1))
			err := dev.MemcpyHtoD(w.buf[0], ones)
			if err == nil {
				err = dev.DeviceSynchronize()
			}
			barrier.Done()
			barrier.Wait()
			if err == nil {
				err = w.iterate(ctx, heur, o, &stop)
			}
			if err == nil {
				err = dev.DeviceSynchronize()
			}
			if err != nil {
				fail(fmt.Errorf("thread %d: %w", t, err))
			}
		}()
	}
	done.Wait()
	return first
}

// iterate runs one thread's iterations: conv(previous output, ones 2x2)
// into the other buffer, then that buffer divided by 4 in place.
func (w *stressWorker) iterate(ctx context.Context, heur *heuristic, o Options, stop *atomic.Bool) error {
	div, err := w.h.Function(Source(), DivKernel)
	if err != nil {
		return err
	}
	src := stressConvSource()
	cur, next := w.buf[0], w.buf[1]
	for i := 0; i < o.Iters; i++ {
		if stop.Load() {
			return errors.New("stopped: another thread failed")
		}
		if i%64 == 0 && ctx.Err() != nil {
			return ctx.Err()
		}
		p := stressProblem(o.Size - i)
		sol, byModel, err := heur.pick(p)
		if err != nil {
			return fmt.Errorf("iteration %d: choosing a solver: %w", i, err)
		}
		w.solvers[sol.Name]++
		if !byModel {
			w.fellBack++
		}
		for _, l := range sol.Plan(p, conv.Buffers{X: cur, W: w.weights, Y: next}) {
			f, err := w.h.Function(src, l.Kernel)
			if err != nil {
				return err
			}
			if err := w.h.Run(f, l.Grid, l.Block, l.SharedMem, l.Args...); err != nil {
				return fmt.Errorf("iteration %d: %s: %w", i, sol.Name, err)
			}
		}
		grid, block, args := divLaunch(next, p.OutputElements(), stressDivisor)
		if err := w.h.Run(div, grid, block, 0, args...); err != nil {
			return fmt.Errorf("iteration %d: division: %w", i, err)
		}
		cur, next = next, cur
	}
	w.result = cur
	return nil
}

// deviceSum copies n floats from p and adds them up in float64.
func deviceSum(dev hip.Device, p hip.DevPtr, n int) (float64, error) {
	buf := make([]byte, 4*n)
	if err := dev.MemcpyDtoH(buf, p); err != nil {
		return 0, err
	}
	vals, err := conv.BytesFloat32(buf)
	if err != nil {
		return 0, err
	}
	sum := 0.0
	for _, v := range vals {
		sum += float64(v)
	}
	return sum, nil
}

// sortedCounts renders a name -> count map as "a 3, b 1", largest first.
func sortedCounts(m map[string]int) string {
	names := make([]string, 0, len(m))
	for k := range m {
		names = append(names, k)
	}
	slices.SortFunc(names, func(a, b string) int {
		if m[a] != m[b] {
			return m[b] - m[a]
		}
		return strings.Compare(a, b)
	})
	parts := make([]string, len(names))
	for i, n := range names {
		parts[i] = fmt.Sprintf("%s %d", n, m[n])
	}
	return strings.Join(parts, ", ")
}
