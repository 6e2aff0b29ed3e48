package stress

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"testing/fstest"

	"miotool/internal/aiheur"
	"miotool/internal/aiheur/builtin"
	"miotool/internal/aiheur/cache"
	"miotool/internal/conv"
	"miotool/internal/hip"
	"miotool/internal/hip/sim"
	"miotool/internal/testutil"
)

// The scenario on the simulator with small workloads: every thread's sum
// is the PyTorch test's (size - iters)^2, every convolution went through
// the heuristic, and the fixed caches loaded the model exactly once.
func TestRunStressSmall(t *testing.T) {
	for _, tt := range []struct {
		name                         string
		threads, iters, trials, size int
		policy                       cache.Policy
	}{
		{"locked, two threads", 2, 5, 2, 64, cache.Locked},
		{"lockfree, three threads", 3, 10, 1, 40, cache.LockFree},
		{"down to a single pixel", 1, 31, 1, 32, cache.Locked},
		{"the PyTorch size, a few iterations", 2, 3, 1, InputSize, cache.LockFree},
		{"unlocked, one thread (no race possible)", 1, 4, 2, 16, cache.Unlocked},
	} {
		t.Run(tt.name, func(t *testing.T) {
			dev := newDevice(t, hip.DialectCUDA)
			run, err := RunHere(context.Background(), dev, Options{Threads: tt.threads, Iters: tt.iters, Trials: tt.trials,
				Size: tt.size, Policy: tt.policy, Models: builtin.FS})
			if err != nil {
				t.Fatal(err)
			}
			want := float64((tt.size - tt.iters) * (tt.size - tt.iters))
			if run.Expected != want || !run.OK() || len(run.Sums) != tt.trials {
				t.Fatalf("expected %v (want %v), wrong %d, sums %v", run.Expected, want, run.Wrong, run.Sums)
			}
			for trial, sums := range run.Sums {
				for th, s := range sums {
					if s != want {
						t.Errorf("trial %d thread %d: sum %v, want %v", trial, th, s, want)
					}
				}
			}
			convs := 0
			for _, n := range run.Solvers {
				convs += n
			}
			if total := tt.threads * tt.iters * tt.trials; convs != total || run.CacheStats.Hits+run.CacheStats.Misses != uint64(total) {
				t.Errorf("%d solver choices and %d cache lookups for %d convolutions", convs, run.CacheStats.Hits+run.CacheStats.Misses, total)
			}
			if run.CacheStats.Loads != 1 || run.CacheStats.Replaced != 0 {
				t.Errorf("cache stats %v: want exactly one load and nothing replaced", run.CacheStats)
			}
			if run.Arch != aiheur.BuiltinArch || !strings.HasPrefix(run.Cache, string(tt.policy)) {
				t.Errorf("arch %q, cache %q", run.Arch, run.Cache)
			}
		})
	}
}

// Two threads on the pre-fix cache: the run may crash the test process,
// so it belongs to a child process; here only the fixed caches run with
// several threads (and the unlocked one without the race detector, in the
// runner's end-to-end test).
func TestRunStressFixedCachesUnderContention(t *testing.T) {
	for _, p := range []cache.Policy{cache.Locked, cache.LockFree} {
		dev := newDevice(t, hip.DialectHIP)
		run, err := RunHere(context.Background(), dev, Options{Threads: 8, Iters: 6, Trials: 2, Size: 48, Policy: p, Models: builtin.FS})
		if err != nil {
			t.Fatal(err)
		}
		if !run.OK() || run.CacheStats.Loads != 1 || run.CacheStats.Replaced != 0 {
			t.Errorf("%s: wrong %d, stats %v", p, run.Wrong, run.CacheStats)
		}
	}
}

func TestRunStressRejectsBadOptions(t *testing.T) {
	dev := newDevice(t, hip.DialectCUDA)
	good := Options{Threads: 1, Iters: 1, Trials: 1, Size: 8, Policy: cache.Locked, Models: builtin.FS}
	for _, tt := range []struct {
		edit func(*Options)
		want string
	}{
		{func(o *Options) { o.Threads = 0 }, "threads"},
		{func(o *Options) { o.Iters = 8 }, "iters"},
		{func(o *Options) { o.Iters = 0 }, "iters"},
		{func(o *Options) { o.Trials = 0 }, "trials"},
		{func(o *Options) { o.Size = 1 }, "size"},
		{func(o *Options) { o.RaceWindow = -1 }, "race window"},
		{func(o *Options) { o.Models = nil }, "model"},
		{func(o *Options) { o.Policy = "sloppy" }, "policy"},
		{func(o *Options) { o.Models = fstest.MapFS{} }, "no TunaNet model"},
	} {
		o := good
		tt.edit(&o)
		if _, err := RunHere(context.Background(), dev, o); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%+v: error %v, want one mentioning %q", o, err, tt.want)
		}
	}
}

// With MIOpen's own model files the heuristic ranks MIOpen's solvers; the
// scenario maps them onto miotool's and still checks out.
func TestRunStressWithMIOpenModels(t *testing.T) {
	dir := miopenModels(t)
	dev := newDevice(t, hip.DialectHIP)
	run, err := RunHere(context.Background(), dev, Options{Threads: 2, Iters: 4, Trials: 1, Size: 24,
		Policy: cache.Locked, Models: os.DirFS(dir)})
	if err != nil {
		t.Fatal(err)
	}
	// The simulator is no AMD device: MIOpen would fall back to gfx908's model.
	if !run.OK() || run.Arch != "gfx908" {
		t.Errorf("wrong %d, arch %q (want gfx908)", run.Wrong, run.Arch)
	}
}

func miopenModels(t *testing.T) string {
	t.Helper()
	return filepath.Dir(testutil.Shared(t, "miopen-models", "gfx908.tn.model"))
}

func TestStressArch(t *testing.T) {
	files := func(archs ...string) fstest.MapFS {
		fsys := fstest.MapFS{}
		for _, a := range archs {
			m, meta := aiheur.TunaNetFiles(a)
			fsys[m] = &fstest.MapFile{}
			fsys[meta] = &fstest.MapFile{}
		}
		return fsys
	}
	for _, tt := range []struct {
		fsys   fstest.MapFS
		device string
		want   string
	}{
		{files(aiheur.BuiltinArch, "gfx942"), "gfx942", aiheur.BuiltinArch},
		{files("gfx942", "gfx90a", "gfx908"), "gfx90a", "gfx90a"},
		{files("gfx942", "gfx90a", "gfx908"), "gfx942:sramecc+:xnack-", "gfx942"},
		{files("gfx942", "gfx90a", "gfx908"), "sm_90", "gfx908"},
		{files("gfx942"), "sm_90", "gfx942"},
		{fstest.MapFS{"gfx942.tn.model": &fstest.MapFile{}}, "gfx942", ""}, // metadata missing
	} {
		got, err := Arch(tt.fsys, tt.device)
		if got != tt.want || (tt.want == "") != (err != nil) {
			t.Errorf("Arch(%v, %q) = %q, %v; want %q", keys(tt.fsys), tt.device, got, err, tt.want)
		}
	}
}

func keys(m fstest.MapFS) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

func TestSolverFor(t *testing.T) {
	for name, want := range map[string]string{
		conv.SolverNaive:                             conv.SolverNaive,
		conv.SolverImplicitGemm:                      conv.SolverImplicitGemm,
		conv.SolverGemm1x1:                           conv.SolverGemm1x1,
		"ConvDirectNaiveConvBwd":                     "",
		"GemmFwd1x1_0_1":                             conv.SolverGemm1x1,
		"GemmFwdRest":                                conv.SolverImplicitGemm,
		"ConvHipImplicitGemmGroupFwdXdlops":          conv.SolverImplicitGemm,
		"ConvAsmImplicitGemmGTCDynamicFwdXdlopsNHWC": conv.SolverImplicitGemm,
		"ConvAsmImplicitGemmGTCDynamicWrwXdlopsNHWC": "",
		"ConvBinWinogradRxSf2x3g1":                   "",
		"fft":                                        "",
	} {
		if got := solverFor(name); got != want {
			t.Errorf("solverFor(%q) = %q, want %q", name, got, want)
		}
	}
}

func TestStressRunLineRoundTrip(t *testing.T) {
	in := &RunResult{Threads: 2, Iters: 1000, Trials: 3, Size: 2048, Expected: 1098304,
		Sums: [][]float64{{1098304, 1098304}}, Arch: "miotool", Cache: "locked: ...",
		CacheStats: cache.Stats{Hits: 5, Loads: 1}, Solvers: map[string]int{conv.SolverImplicitGemm: 6}, ElapsedMs: 12.5}
	var b strings.Builder
	b.WriteString("some log line\n")
	if err := WriteRunLine(&b, in); err != nil {
		t.Fatal(err)
	}
	out, ok := ParseRunLine([]byte(b.String()))
	if !ok || fmt.Sprint(*out) != fmt.Sprint(*in) {
		t.Errorf("round trip: %+v, %v; want %+v", out, ok, in)
	}
	if _, ok := ParseRunLine([]byte("no result here\n" + RunLinePrefix + "{broken")); ok {
		t.Error("a broken line parsed")
	}
}

// memory is a hip.Memory over plain slices, for running twins directly.
type memory map[hip.DevPtr][]float32

func (m memory) Float32s(p hip.DevPtr, n int) ([]float32, error) {
	v, ok := m[p]
	if !ok || n > len(v) {
		return nil, fmt.Errorf("no %d floats at %#x", n, uint64(p))
	}
	return v[:n], nil
}

func (m memory) Bytes(hip.DevPtr, int) ([]byte, error) { return nil, errors.New("not supported") }

// The naive twin's fast path in the stress source computes exactly what
// the naive twin computes, bit for bit, for every shape and alpha; shapes
// outside it go to the naive twin.
func TestStressConvTwinsMatchGeneric(t *testing.T) {
	shapes := []conv.Problem{
		stressProblem(37),
		stressProblem(300),
		{N: 2, C: 3, H: 9, W: 7, K: 6, R: 2, S: 2, StrideH: 1, StrideW: 1, DilH: 1, DilW: 1, Groups: 3},
		{N: 1, C: 1, H: 300, W: 2, K: 2, R: 2, S: 2, StrideH: 1, StrideW: 1, DilH: 1, DilW: 1, Groups: 1},
		{N: 1, C: 2, H: 9, W: 9, K: 1, R: 2, S: 2, StrideH: 1, StrideW: 1, DilH: 1, DilW: 1, Groups: 1},
		{N: 1, C: 1, H: 9, W: 9, K: 1, R: 3, S: 3, StrideH: 1, StrideW: 1, DilH: 1, DilW: 1, Groups: 1},
		{N: 1, C: 1, H: 9, W: 9, K: 1, R: 2, S: 2, PadH: 1, PadW: 1, StrideH: 1, StrideW: 1, DilH: 1, DilW: 1, Groups: 1},
		{N: 1, C: 1, H: 9, W: 9, K: 1, R: 2, S: 2, StrideH: 2, StrideW: 2, DilH: 1, DilW: 1, Groups: 1},
	}
	generic, fast := conv.DirectSource(), stressConvSource()
	if fast.Text != generic.Text || !slices.Equal(fast.Kernels, generic.Kernels) || fast.PTX != generic.PTX {
		t.Fatal("the stress source must be conv's direct kernel text with the same entry points and PTX")
	}
	naive, _ := conv.SolverByName(conv.SolverNaive)
	for _, p := range shapes {
		for _, alpha := range []float32{1, stressAlpha} {
			b := conv.Buffers{X: 0x1000, W: 0x2000, Y: 0x3000}
			l := naive.PlanScaled(p, b, alpha)[0]
			x := conv.RandomTensor(p.InputElements(), 7)
			x[0], x[3] = float32(math.Copysign(0, -1)), 1e-40 // a negative zero and a subnormal
			w := conv.RandomTensor(p.WeightElements(), 8)
			want, got := make([]float32, p.OutputElements()), make([]float32, p.OutputElements())
			if err := generic.Twins[l.Kernel](memory{b.X: x, b.W: w, b.Y: want}, l.Grid, l.Block, l.Args); err != nil {
				t.Fatal(err)
			}
			if err := fast.Twins[l.Kernel](memory{b.X: x, b.W: w, b.Y: got}, l.Grid, l.Block, l.Args); err != nil {
				t.Fatal(err)
			}
			for i := range want {
				if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
					t.Fatalf("%s alpha %v: element %d is %v, naive twin %v", p, alpha, i, got[i], want[i])
				}
			}
		}
	}
}

// Every launch a solver plans for a stress problem is in the stress
// source; anything else comes from conv's whole source.
func TestStressLaunchesComeFromTheDirectSource(t *testing.T) {
	src := stressConvSource()
	for _, side := range []int{InputSize, InputSize - DefaultIters + 1, 2} {
		p := stressProblem(side)
		for _, sol := range conv.Solvers() {
			for _, l := range sol.PlanScaled(p, conv.Buffers{}, stressAlpha) {
				if launchSource(src, l.Kernel) != src {
					t.Errorf("%s on %s launches %s, which the stress source lacks", sol.Name, p, l.Kernel)
				}
			}
		}
	}
	if launchSource(src, "igemm_fwd_nchw_f32_64x64") != conv.Source() {
		t.Error("a tiled kernel does not come from conv's whole source")
	}
}

// The fast path is taken exactly where it should be: twins that refuse
// everything show which launches reached which.
func TestStressConvFastPathCoverage(t *testing.T) {
	refuse := func(hip.Memory, hip.Dim3, hip.Dim3, []hip.KernelArg) error { return errors.New("naive") }
	accept := func(hip.Memory, hip.Dim3, hip.Dim3, []hip.KernelArg) error { return nil }
	twin := fastNaive2x2(refuse, accept)
	p := stressProblem(20)
	naive, _ := conv.SolverByName(conv.SolverNaive)
	nl := naive.Plan(p, conv.Buffers{X: 0x1000, W: 0x2000, Y: 0x3000})[0]
	for _, tt := range []struct {
		name      string
		grid, blk hip.Dim3
		args      []hip.KernelArg
		wantFast  bool
	}{
		{"covering grid", nl.Grid, nl.Block, nl.Args, true},
		{"short grid", hip.D1(nl.Grid.X - 1), nl.Block, nl.Args, false},
		{"oversized block", nl.Grid, hip.D1(512), nl.Args, false},
		{"wrong argument type", nl.Grid, nl.Block, append(append([]hip.KernelArg{}, nl.Args[:3]...), make([]hip.KernelArg, 17)...), false},
		{"alpha not a float32", nl.Grid, nl.Block, append(append([]hip.KernelArg{}, nl.Args[:conv.NumConvArgs-1]...), 0.25), false},
		{"too few arguments", nl.Grid, nl.Block, nl.Args[:5], false},
	} {
		err := twin(memory{}, tt.grid, tt.blk, tt.args)
		if (err == nil) != tt.wantFast {
			t.Errorf("%s: error %v, want the fast path %v", tt.name, err, tt.wantFast)
		}
	}
}

// BenchmarkStressIteration is one thread's iteration on the largest
// problem (2048x2048): the heuristic's choice, the convolution and the
// division, on the simulator.
func BenchmarkStressIteration(b *testing.B) {
	dev, err := sim.New(hip.OpenOptions{})
	if err != nil {
		b.Fatal(err)
	}
	defer dev.Close()
	for _, p := range []cache.Policy{cache.Locked, cache.LockFree} {
		b.Run(string(p), func(b *testing.B) {
			caches, err := aiheur.NewCaches(p, cache.Options{})
			if err != nil {
				b.Fatal(err)
			}
			heur := &heuristic{caches: caches, models: builtin.FS, arch: aiheur.BuiltinArch, solvers: conv.Solvers()}
			w, err := newStressWorker(dev, InputSize)
			if err != nil {
				b.Fatal(err)
			}
			defer w.close(dev)
			o := Options{Threads: 1, Iters: 1, Trials: 1, Size: InputSize, Policy: p, Models: builtin.FS}
			var stop atomic.Bool
			// The first iteration loads the model and the kernels: not timed.
			if err := w.iterate(context.Background(), heur, o, &stop); err != nil {
				b.Fatal(err)
			}
			for b.Loop() {
				if err := w.iterate(context.Background(), heur, o, &stop); err != nil {
					b.Fatal(err)
				}
				if err := dev.StreamSynchronize(w.h.Stream()); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkHeuristicPick is the host-side cost of choosing a solver per
// convolution: a cache hit plus a TunaNet inference and the ranking.
func BenchmarkHeuristicPick(b *testing.B) {
	for _, p := range []cache.Policy{cache.Locked, cache.LockFree} {
		b.Run(string(p), func(b *testing.B) {
			caches, err := aiheur.NewCaches(p, cache.Options{})
			if err != nil {
				b.Fatal(err)
			}
			heur := &heuristic{caches: caches, models: builtin.FS, arch: aiheur.BuiltinArch, solvers: conv.Solvers()}
			if _, _, err := heur.pick(stressProblem(InputSize)); err != nil { // the load: not timed
				b.Fatal(err)
			}
			i := 0
			for b.Loop() {
				if _, _, err := heur.pick(stressProblem(InputSize - i%1000)); err != nil {
					b.Fatal(err)
				}
				i++
			}
		})
	}
}

func TestCheckModelsLoadsTheModelOnce(t *testing.T) {
	if arch, err := CheckModels(builtin.FS, "sm_90"); err != nil || arch != aiheur.BuiltinArch {
		t.Fatalf("the embedded model: %q, %v", arch, err)
	}
	m, meta := aiheur.TunaNetFiles("gfx942")
	broken := fstest.MapFS{m: &fstest.MapFile{Data: []byte("{")}, meta: &fstest.MapFile{Data: []byte("{")}}
	if arch, err := CheckModels(broken, "gfx942"); err == nil {
		t.Fatalf("a broken model set passed as %q", arch)
	}
	line, err := CacheLine(cache.Unlocked, 0)
	if err != nil || !strings.HasPrefix(line, "unlocked") {
		t.Fatalf("cache line %q, %v", line, err)
	}
	if _, err := CacheLine("sometimes", 0); err == nil {
		t.Fatal("an unknown cache policy was described")
	}
}
