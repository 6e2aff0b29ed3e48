// Package stress runs stress-threads, PyTorch's
// test_cudnn_multiple_threads_same_device made standalone: several threads
// convolve at once, each choosing its solvers through the AI heuristic's
// model cache (ROCM-27477), every run in a fresh process so that a crash is
// a counted outcome. It returns the runs' facts (outcomes, tallies, the
// caches' detections); RunTarget runs the same workload on a library
// target. internal/cmd/stress renders them.
package stress

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"runtime"
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
	// sum of the 2x2 ones filter, so every value stays 1. The division is
	// the convolution's alpha, 1/4: multiplying by the reciprocal of a power
	// of two rounds exactly as dividing by it does.
	stressDivisor = 4
	stressAlpha   = 1.0 / stressDivisor
)

// poisonBits is the NaN every output buffer holds before a convolution
// writes it (at the start of a trial everywhere, before each iteration at
// the guard elements): a result that still holds it, or any NaN it spread
// into, shows a convolution that did not run or wrote the wrong place.
const poisonBits = 0x7fc0dead

var poison = math.Float32frombits(poisonBits)

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
	// Lines gets a detection line (WriteDetectionLine) for the first cache
	// record of each kind as it is made: the child's standard output, so
	// that a run that crashes right after still leaves it. Nil: nowhere.
	Lines io.Writer

	// convSource and ownSource replace the kernel sources (nil: the
	// scenario's own); tests substitute broken kernels through them.
	convSource, ownSource *hip.KernelSource
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
// as one line (WriteRunLine) for the parent to read.
type RunResult struct {
	Threads  int     `json:"threads"`
	Iters    int     `json:"iters"`
	Trials   int     `json:"trials"`
	Size     int     `json:"size"`
	Expected float64 `json:"expected_sum"`
	// Sums are the final sums, [trial][thread], of the output's finite
	// elements (a NaN or an infinity is counted in BadElements instead).
	Sums [][]float64 `json:"sums"`
	// BadElements counts, [trial][thread], the output elements that are not
	// exactly 1 (NaN included).
	BadElements [][]int `json:"bad_elements,omitempty"`
	// Wrong counts the thread-trials whose result failed a check: the sum
	// differs from Expected, an element is not exactly 1, or the element
	// after the output was written.
	Wrong int `json:"wrong"`
	// WrongDetail says what the first failed check found.
	WrongDetail string `json:"wrong_detail,omitempty"`
	Arch        string `json:"arch"`
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

	// Token is the parent's token (ChildEnv), echoed by a child process.
	Token string `json:"token,omitempty"`
}

// OK reports whether every sum was right.
func (r *RunResult) OK() bool { return r.Wrong == 0 }

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
	candidates := []string{aiheur.BuiltinArch, aiheur.TunaNetArch(deviceArch), "gfx942", "gfx90a", "gfx908"}
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
	lines := &lineWriter{w: o.Lines}
	recs := cache.NewRecords(func(r cache.Record) { _ = WriteDetectionLine(lines, r) })
	caches, err := aiheur.NewCaches(o.Policy, cache.Options{RaceWindow: o.RaceWindow, Records: recs})
	if err != nil {
		return nil, err
	}
	heur := &heuristic{caches: caches, models: o.Models, arch: arch, solvers: conv.Solvers()}
	run := &RunResult{Threads: o.Threads, Iters: o.Iters, Trials: o.Trials, Size: o.Size,
		Expected: ExpectedSum(o.Size, o.Iters), Arch: arch, Cache: caches.Describe(), Solvers: map[string]int{}}

	var readBuf []byte
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
		if err := runStressTrial(ctx, dev, workers, heur, o); err != nil {
			return nil, fmt.Errorf("trial %d: %w", trial+1, err)
		}
		caches.Barrier() // every worker has joined
		sums, bad := make([]float64, o.Threads), make([]int, o.Threads)
		side := o.Size - o.Iters
		for t, w := range workers {
			out, err := readOutput(dev, w.result, side, readBuf)
			if err != nil {
				return nil, fmt.Errorf("trial %d, thread %d: reading the result: %w", trial+1, t, err)
			}
			readBuf = out.raw
			sums[t], bad[t] = out.sum, out.bad
			if problem := out.problem(run.Expected); problem != "" {
				run.Wrong++
				if run.WrongDetail == "" {
					run.WrongDetail = fmt.Sprintf("trial %d, thread %d: %s", trial+1, t, problem)
				}
			}
		}
		run.Sums = append(run.Sums, sums)
		run.BadElements = append(run.BadElements, bad)
		logf("trial %d: sums %v (expected %.0f), elements not 1: %v", trial+1, sums, run.Expected, bad)
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
	// The element after a full-size output must exist for the guard.
	for i := range w.buf {
		if w.buf[i], err = dev.Malloc(4 * (size*size + 1)); err != nil {
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

// runStressTrial is one trial: every thread fills its input with ones and
// its other buffer with the poison on the device, synchronizes, waits at
// the barrier, and runs the iterations.
func runStressTrial(ctx context.Context, dev hip.Device, workers []*stressWorker, heur *heuristic, o Options) error {
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
			err := w.reset(o)
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

// sources are the kernel sources the run launches from.
func (o *Options) sources() (convSrc, own *hip.KernelSource) {
	convSrc, own = o.convSource, o.ownSource
	if convSrc == nil {
		convSrc = stressConvSource()
	}
	if own == nil {
		own = Source()
	}
	return convSrc, own
}

// reset is a trial's start on the thread's stream: the input ones (as
// torch.ones makes it, on the device), the other buffer poisoned.
func (w *stressWorker) reset(o Options) error {
	_, own := o.sources()
	fill, err := w.h.Function(own, FillKernel)
	if err != nil {
		return err
	}
	for i, value := range []float32{1, poison} {
		grid, block, args := fillLaunch(w.buf[i], o.Size*o.Size+1, value)
		if err := w.h.Run(fill, grid, block, 0, args...); err != nil {
			return fmt.Errorf("filling a buffer: %w", err)
		}
	}
	return nil
}

// iterate runs one thread's iterations: the guard elements of the other
// buffer poisoned, then conv(previous output, ones 2x2) / 4 into it (the
// division is the convolution's alpha).
func (w *stressWorker) iterate(ctx context.Context, heur *heuristic, o Options, stop *atomic.Bool) error {
	src, own := o.sources()
	guard, err := w.h.Function(own, GuardKernel)
	if err != nil {
		return err
	}
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
		grid, block, args := guardLaunch(next, p.OutputElements(), poison)
		if err := w.h.Run(guard, grid, block, 0, args...); err != nil {
			return fmt.Errorf("iteration %d: guard: %w", i, err)
		}
		for _, l := range sol.PlanScaled(p, conv.Buffers{X: cur, W: w.weights, Y: next}, stressAlpha) {
			f, err := w.h.Function(launchSource(src, l.Kernel), l.Kernel)
			if err != nil {
				return err
			}
			if err := w.h.Run(f, l.Grid, l.Block, l.SharedMem, l.Args...); err != nil {
				return fmt.Errorf("iteration %d: %s: %w", i, sol.Name, err)
			}
		}
		cur, next = next, cur
	}
	w.result = cur
	return nil
}

// output is what a thread-trial left: its side x side result and the
// element after it.
type output struct {
	raw []byte // the bytes read, kept for the next read
	// sum adds the finite elements in float64; bad counts the elements
	// that are not exactly 1, first says where the first of them is and
	// what it holds.
	sum   float64
	bad   int
	first string
	// after is the element after the result, which no convolution writes.
	after uint32
}

// readOutput copies the side*side result at p and the element after it
// (into buf when it is large enough) and checks every element.
func readOutput(dev hip.Device, p hip.DevPtr, side int, buf []byte) (output, error) {
	n := side * side
	if cap(buf) < 4*(n+1) {
		buf = make([]byte, 4*(n+1))
	}
	buf = buf[:4*(n+1)]
	if err := dev.MemcpyDtoH(buf, p); err != nil {
		return output{raw: buf}, err
	}
	return checkOutput(buf, side), nil
}

// checkOutput reads raw as a side*side result and the element after it.
func checkOutput(raw []byte, side int) output {
	n := side * side
	out := output{raw: raw}
	const one = 0x3f800000
	for i := range n {
		bits := binary.LittleEndian.Uint32(raw[4*i:])
		if bits == one {
			out.sum++
			continue
		}
		v := float64(math.Float32frombits(bits))
		if !math.IsNaN(v) && !math.IsInf(v, 0) {
			out.sum += v
		}
		if out.bad++; out.bad == 1 {
			out.first = fmt.Sprintf("(%d, %d) is %v", i/side, i%side, describe(bits))
		}
	}
	out.after = binary.LittleEndian.Uint32(raw[4*n:])
	return out
}

// problem says what is wrong with the output, or "" when the sum is
// expected, every element is 1 and the element after it still holds the
// poison.
func (o output) problem(expected float64) string {
	var parts []string
	if o.sum != expected || o.bad > 0 {
		parts = append(parts, fmt.Sprintf("sum of finite elements %.0f, expected %.0f", o.sum, expected))
	}
	if o.bad > 0 {
		parts = append(parts, fmt.Sprintf("%d elements are not 1, the first at %s", o.bad, o.first))
	}
	if o.after != poisonBits {
		parts = append(parts, fmt.Sprintf("the element after the output was written (%v)", describe(o.after)))
	}
	return strings.Join(parts, "; ")
}

// describe names a float32 by its bits, the poison by name.
func describe(bits uint32) string {
	if bits == poisonBits {
		return "the poison NaN (no convolution wrote it, or it spread from an element none wrote)"
	}
	return fmt.Sprint(math.Float32frombits(bits))
}
