package repro

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"miotool/internal/conv"
	"miotool/internal/hip"
	"miotool/internal/report"
)

// The orchestration tests drive the target scenarios with fakeLib, a
// library written in Go over the simulated device: its forward launches
// miotool's own convolution kernels on the session's stream, so captures
// follow the simulator's real rule tables. With poll set, every forward
// first queries another stream, as MIOpen's lazy reclaim of an abandoned
// find stream does (#12121).

type fakeLib struct {
	dev hip.Device
	mod hip.Module
	// poll, when set, is queried at the start of every forward of a
	// session that ran find: the stream its find abandoned.
	poll hip.Stream
	// block, when set, holds every forward until it is closed; forwards
	// then fail.
	block chan struct{}
	// wrongSession is the session (1-based, in creation order) whose
	// scale is slightly off, so its thread ends with a wrong sum.
	wrongSession int32
	binds        atomic.Int32
	sessions     atomic.Int32
	open         atomic.Int32
	closed       atomic.Bool
}

func newFakeLib(t *testing.T, dev hip.Device) *fakeLib {
	t.Helper()
	mod, err := dev.ModuleLoad(conv.Source())
	if err != nil {
		t.Fatal(err)
	}
	return &fakeLib{dev: dev, mod: mod}
}

// useLib makes the scenarios open lib for every target until the test ends.
func useLib(t *testing.T, lib targetLib, err error) {
	t.Helper()
	prev := openTargetLib
	openTargetLib = func(Target, hip.Device) (targetLib, error) { return lib, err }
	t.Cleanup(func() { openTargetLib = prev })
}

func (l *fakeLib) describe() string  { return "fakedeep 1.0 (in-process)" }
func (l *fakeLib) notes() []string   { return []string{"fake note"} }
func (l *fakeLib) bindThread() error { l.binds.Add(1); return nil }
func (l *fakeLib) close() error      { l.closed.Store(true); return nil }

func (l *fakeLib) newSession(s hip.Stream) (targetSession, error) {
	l.open.Add(1)
	return &fakeSession{lib: l, s: s, id: l.sessions.Add(1)}, nil
}

type fakeSession struct {
	lib   *fakeLib
	s     hip.Stream
	id    int32
	found bool
}

func (s *fakeSession) findWorkspace(conv.Problem) (int64, error) { return 0, nil }

// find runs every applicable solver into b.Y and ranks them by a made-up
// time; inapplicable ones are listed as unable to run.
func (s *fakeSession) find(p conv.Problem, b targetBuffers) ([]TargetAlgo, error) {
	s.found = true
	var out []TargetAlgo
	for i, sol := range conv.Solvers() {
		a := TargetAlgo{Name: sol.Name, ID: int64(i), TimeMs: float64(i+1) / 10, OK: sol.IsApplicable(p)}
		if !a.OK {
			a.Note, a.TimeMs = "not applicable", -1
			out = append(out, a)
			continue
		}
		if err := s.launch(p, a, b); err != nil {
			return nil, err
		}
		out = append(out, a)
	}
	return out, s.lib.dev.StreamSynchronize(s.s)
}

func (s *fakeSession) choose(p conv.Problem) (TargetAlgo, error) {
	for i, sol := range conv.Solvers() {
		if !sol.IsNaive() && sol.IsApplicable(p) {
			return TargetAlgo{Name: sol.Name, ID: int64(i), TimeMs: -1, OK: true}, nil
		}
	}
	return TargetAlgo{}, errors.New("no solver")
}

func (s *fakeSession) workspace(conv.Problem, TargetAlgo) (int64, error) { return 0, nil }

func (s *fakeSession) forward(p conv.Problem, a TargetAlgo, b targetBuffers) error {
	if s.lib.block != nil {
		<-s.lib.block
		return errors.New("released")
	}
	if s.lib.poll != 0 && s.found {
		_ = s.lib.dev.StreamQuery(s.lib.poll) // the lazy reclaim ignores what it is told
	}
	return s.launch(p, a, b)
}

func (s *fakeSession) launch(p conv.Problem, a TargetAlgo, b targetBuffers) error {
	sol := conv.Solvers()[a.ID]
	for _, l := range sol.Plan(p, conv.Buffers{X: b.X, W: b.W, Y: b.Y}) {
		f, err := s.lib.dev.ModuleGetFunction(s.lib.mod, l.Kernel)
		if err != nil {
			return err
		}
		if err := s.lib.dev.LaunchKernel(f, l.Grid, l.Block, l.SharedMem, s.s, l.Args...); err != nil {
			return fmt.Errorf("fakedeep forward: %w", err)
		}
	}
	return nil
}

// scale is a host round trip: fine outside a capture, which is all the
// stress scenario needs.
func (s *fakeSession) scale(p conv.Problem, y hip.DevPtr, alpha float32) error {
	dev := s.lib.dev
	if s.id == s.lib.wrongSession {
		alpha *= 1.0001
	}
	if err := dev.StreamSynchronize(s.s); err != nil {
		return err
	}
	v, err := readFloats(dev, y, p.OutputElements())
	if err != nil {
		return err
	}
	for i := range v {
		v[i] *= alpha
	}
	return dev.MemcpyHtoD(y, conv.Float32Bytes(v))
}

func (s *fakeSession) close() error { s.lib.open.Add(-1); return nil }

func TestTargetCaptureOfACorrectLibraryPassesInEveryMode(t *testing.T) {
	for _, d := range []hip.Dialect{hip.DialectCUDA, hip.DialectHIP} {
		t.Run(string(d), func(t *testing.T) {
			dev := newDevice(t, d)
			lib := newFakeLib(t, dev)
			useLib(t, lib, nil)
			cases, err := RunTargetCaptureWith(context.Background(), dev, TargetCaptureOptions{
				Target: TargetMIOpen, Modes: hip.CaptureModes, Variants: Variants, Problem: captureProblem, Seed: 4})
			if err != nil {
				t.Fatal(err)
			}
			if len(cases) != 6 {
				t.Fatalf("%d cases, want 6", len(cases))
			}
			for _, c := range cases {
				if c.Measured != Pass || c.Expected != Pass || c.EndCapture != hip.Success || !c.OutputOK || c.Policy != PolicyLibrary {
					t.Errorf("%s/%s: %+v", c.Mode, c.Variant, c)
				}
				if c.Chosen.Name != conv.SolverImplicitGemm || len(c.Found) != len(conv.Solvers()) || c.Library != lib.describe() || c.Target != TargetMIOpen {
					t.Errorf("%s/%s: chosen %s, found %v, library %q", c.Mode, c.Variant, c.Chosen, c.Found, c.Library)
				}
				if c.StatusAfterLaunch != hip.CaptureStatusActive || c.MaxAbsErr > 1e-3 {
					t.Errorf("%s/%s: status after launch %s, max err %g", c.Mode, c.Variant, c.StatusAfterLaunch, c.MaxAbsErr)
				}
			}
			if lib.open.Load() != 0 || !lib.closed.Load() {
				t.Fatalf("%d sessions left open, library closed %v", lib.open.Load(), lib.closed.Load())
			}
			// Same-thread cases bind one thread, other-thread cases two.
			if got := lib.binds.Load(); got != 9 {
				t.Fatalf("threads bound %d, want 9", got)
			}

			r := report.New("capture", "miotool capture --target=miopen --mode=all", time.Time{})
			FillTargetCapture(r, cases, d, time.Time{})
			if r.Verdict != report.Pass || r.Status != "Passes with --target=miopen" {
				t.Fatalf("verdict %s status %q: %s", r.Verdict, r.Status, r.Summary)
			}
			if len(r.Tables) != 2 || len(r.Tables[0].Rows) != len(conv.Solvers()) || len(r.Tables[1].Rows) != 6 || !strings.Contains(strings.Join(r.Notes, "\n"), "fakedeep 1.0") {
				t.Fatalf("tables %d, notes %q", len(r.Tables), r.Notes)
			}
		})
	}
}

// A library that polls another stream from its launch path breaks a
// capture where the runtime's rules say so, and the scenario measures it:
// the same cases the builtin lazy policy fails.
func TestTargetCaptureMeasuresALibraryThatBreaksCaptures(t *testing.T) {
	for _, d := range []hip.Dialect{hip.DialectCUDA, hip.DialectHIP} {
		t.Run(string(d), func(t *testing.T) {
			dev := newDevice(t, d)
			lib := newFakeLib(t, dev)
			poll, err := dev.StreamCreate(hip.StreamNonBlocking)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = dev.StreamDestroy(poll) })
			lib.poll = poll
			useLib(t, lib, nil)
			cases, err := RunTargetCaptureWith(context.Background(), dev, TargetCaptureOptions{
				Target: TargetMIOpen, Modes: hip.CaptureModes, Variants: Variants, Problem: captureProblem, Seed: 4})
			if err != nil {
				t.Fatal(err)
			}
			for _, c := range cases {
				want := ExpectedCapture("lazy", c.Mode, c.Variant)
				if c.Measured != want {
					t.Errorf("%s/%s: measured %s, want %s: %s", c.Mode, c.Variant, c.Measured, want, c.Detail)
					continue
				}
				if want == Pass {
					if !c.OutputOK {
						t.Errorf("%s/%s: output wrong: %s", c.Mode, c.Variant, c.Detail)
					}
					continue
				}
				if c.EndCapture != hip.ErrStreamCaptureInvalidated || c.Agrees() {
					t.Errorf("%s/%s: end capture %v, agrees %v", c.Mode, c.Variant, c.EndCapture, c.Agrees())
				}
				if c.Variant == SameThread && (c.FirstRefusal == "" || c.StatusAfterLaunch != hip.CaptureStatusInvalidated) {
					t.Errorf("%s/%s: the failed library call is not recorded: %+v", c.Mode, c.Variant, c)
				}
				if c.Variant == OtherThread && !strings.Contains(c.Detail, "end capture") {
					t.Errorf("%s/%s: detail %q", c.Mode, c.Variant, c.Detail)
				}
			}
			r := report.New("capture", "miotool capture --target=miopen", time.Time{})
			FillTargetCapture(r, cases, d, time.Time{})
			want := "Fails with --target=miopen (global/same-thread, thread-local/same-thread, global/other-thread), passes (relaxed/same-thread, thread-local/other-thread, relaxed/other-thread)"
			if r.Verdict != report.Fail || r.Status != want {
				t.Fatalf("verdict %s status %q", r.Verdict, r.Status)
			}
			if !strings.Contains(r.Summary, "global/same-thread: "+hip.ErrStreamCaptureInvalidated.Name(d)) {
				t.Fatalf("summary %q", r.Summary)
			}
		})
	}
}

func TestTargetCaptureRefusesBadInput(t *testing.T) {
	dev := newDevice(t, hip.DialectCUDA)
	useLib(t, newFakeLib(t, dev), nil)
	grouped := captureProblem
	grouped.Groups = 2
	for _, tt := range []struct {
		name string
		opts TargetCaptureOptions
		want string
	}{
		{"builtin", TargetCaptureOptions{Target: TargetBuiltin, Modes: hip.CaptureModes}, "runs through RunCapture"},
		{"no modes", TargetCaptureOptions{Target: TargetCUDNN, Problem: captureProblem}, "no capture mode"},
		{"groups", TargetCaptureOptions{Target: TargetCUDNN, Modes: hip.CaptureModes, Problem: grouped}, "group_count 1 only"},
	} {
		if _, err := RunTargetCaptureWith(context.Background(), dev, tt.opts); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: %v, want %q", tt.name, err, tt.want)
		}
	}
	if _, err := RunTargetCapture(context.Background(), dev, "tensorflow", hip.CaptureModes); err == nil || !strings.Contains(err.Error(), `unknown target "tensorflow"`) {
		t.Errorf("unknown target: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := RunTargetCaptureWith(ctx, dev, TargetCaptureOptions{Target: TargetCUDNN, Modes: hip.CaptureModes, Problem: captureProblem}); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled: %v", err)
	}
}

func TestTargetsNeedTheirLibraryAndBackend(t *testing.T) {
	for _, tt := range []struct {
		in   string
		want Target
	}{{"builtin", TargetBuiltin}, {"miopen", TargetMIOpen}, {"cudnn", TargetCUDNN}} {
		if got, err := ParseTarget(tt.in); err != nil || got != tt.want {
			t.Errorf("ParseTarget(%q) = %q, %v", tt.in, got, err)
		}
	}
	if _, err := ParseTarget("MIOpen"); err == nil || !strings.Contains(err.Error(), "want builtin, miopen or cudnn") {
		t.Errorf("case matters: %v", err)
	}
	if err := TargetAvailable("builtin"); err != nil {
		t.Errorf("builtin: %v", err)
	}
	if err := TargetAvailable("nope"); err == nil {
		t.Error("an unknown target is available")
	}

	dev := newDevice(t, hip.DialectCUDA)
	if err := TargetSupports("builtin", dev); err != nil {
		t.Errorf("builtin on the simulator: %v", err)
	}
	for _, tc := range []struct{ target, backend string }{{"cudnn", "cuda"}, {"miopen", "hip"}} {
		err := TargetSupports(tc.target, dev)
		var tu *TargetUnavailableError
		var hu *hip.UnavailableError
		if !errors.As(err, &tu) || !errors.As(err, &hu) || hu.Backend != tc.target {
			t.Fatalf("%s on the simulator: %v", tc.target, err)
		}
		if !strings.Contains(err.Error(), "target "+tc.target+" unavailable: it runs on the "+tc.backend+" backend") ||
			!strings.Contains(err.Error(), "--backend "+tc.backend) {
			t.Errorf("message %q", err)
		}
	}

	// Where the library is missing (this machine, usually), the error
	// lists the paths tried; where it is present, it loads.
	t.Setenv("MIOPEN_USER_DB_PATH", "")
	t.Setenv("MIOPEN_DEBUG_DISABLE_FIND_DB", "")
	for _, target := range []string{"cudnn", "miopen"} {
		err := TargetAvailable(target)
		if err == nil {
			t.Logf("%s is installed here", target)
			continue
		}
		var tu *TargetUnavailableError
		if !errors.As(err, &tu) || len(tu.Libraries) != 1 || len(tu.Libraries[0].Tried) == 0 {
			t.Errorf("%s: %v (%+v)", target, err, tu)
		}
	}
	if libs := TargetLibraries(); len(libs) != 2 || libs[0].Name != "libMIOpen" || libs[1].Name != "libcudnn" {
		t.Errorf("TargetLibraries = %+v", libs)
	}
	if err := TargetCleanup(); err != nil {
		t.Errorf("cleanup: %v", err)
	}

	// The scenarios refuse a device on the wrong backend before anything runs.
	if _, err := RunTargetCapture(context.Background(), dev, "cudnn", hip.CaptureModes); !errors.As(err, new(*hip.UnavailableError)) {
		t.Errorf("capture on the simulator: %v", err)
	}
	if _, err := RunTargetStress(context.Background(), dev, DefaultTargetStress(TargetMIOpen)); !errors.As(err, new(*hip.UnavailableError)) {
		t.Errorf("stress on the simulator: %v", err)
	}
}

func stressOpts() TargetStressOptions {
	return TargetStressOptions{Target: TargetCUDNN, Threads: 3, Trials: 2, Iterations: 10, Size: 24, Timeout: 30 * time.Second}
}

func TestTargetStressGetsTheExactSum(t *testing.T) {
	dev := newDevice(t, hip.DialectCUDA)
	lib := newFakeLib(t, dev)
	useLib(t, lib, nil)
	var logged []string
	var mu sync.Mutex
	opts := stressOpts()
	opts.Log = func(f string, a ...any) { mu.Lock(); logged = append(logged, fmt.Sprintf(f, a...)); mu.Unlock() }
	res, err := RunTargetStress(context.Background(), dev, opts)
	if err != nil {
		t.Fatal(err)
	}
	if res.Measured != Pass || res.Hung || len(res.Threads) != 6 {
		t.Fatalf("measured %s hung %v threads %d: %s", res.Measured, res.Hung, len(res.Threads), res.Detail)
	}
	for _, th := range res.Threads {
		if th.Sum != 196 || th.Expected != 196 || th.Wrong != 0 || th.Algos[conv.SolverImplicitGemm] != 10 {
			t.Errorf("trial %d thread %d: %+v", th.Trial, th.Thread, th)
		}
	}
	if lib.open.Load() != 0 || !lib.closed.Load() || lib.sessions.Load() != 6 {
		t.Fatalf("sessions made %d, open %d, closed %v", lib.sessions.Load(), lib.open.Load(), lib.closed.Load())
	}
	if len(logged) != 2 || !strings.Contains(logged[1], "trial 2 of 2: 3 threads x 10 iterations on 24x24") {
		t.Fatalf("log %q", logged)
	}

	r := report.New("stress-threads", "miotool stress-threads --target=cudnn", time.Time{})
	FillTargetStress(r, res, time.Time{})
	if r.Verdict != report.Pass || len(r.Tables[0].Rows) != 6 || !strings.Contains(r.Summary, "exact sum 196") {
		t.Fatalf("verdict %s: %s", r.Verdict, r.Summary)
	}
	run := res.AsStressRun()
	if !run.OK() || run.Trials != 2 || len(run.Sums) != 2 || len(run.Sums[1]) != 3 || run.Sums[1][2] != 196 ||
		run.Solvers[conv.SolverImplicitGemm] != 60 || run.Cache != "library" {
		t.Fatalf("as a child's result: %+v", run)
	}
}

func TestTargetStressFindSelection(t *testing.T) {
	dev := newDevice(t, hip.DialectHIP)
	useLib(t, newFakeLib(t, dev), nil)
	opts := stressOpts()
	opts.Select, opts.Threads, opts.Trials = SelectFind, 2, 1
	res, err := RunTargetStress(context.Background(), dev, opts)
	if err != nil {
		t.Fatal(err)
	}
	if res.Measured != Pass {
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
	lib := newFakeLib(t, dev)
	lib.wrongSession = 2
	useLib(t, lib, nil)
	opts := stressOpts()
	opts.Trials = 1
	res, err := RunTargetStress(context.Background(), dev, opts)
	if err != nil {
		t.Fatal(err)
	}
	if res.Measured != Fail || res.Threads[1].OK() || !res.Threads[0].OK() || !strings.Contains(res.Detail, "trial 1 thread 2: sum") {
		t.Fatalf("measured %s: %s", res.Measured, res.Detail)
	}
	r := report.New("stress-threads", "x", time.Time{})
	FillTargetStress(r, res, time.Time{})
	if r.Verdict != report.Fail || r.Tables[0].Flagged() != 1 {
		t.Fatalf("verdict %s flagged %d", r.Verdict, r.Tables[0].Flagged())
	}
	if run := res.AsStressRun(); run.OK() || run.Wrong != 1 {
		t.Fatalf("as a child's result: %+v", run)
	}
}

// A trial that does not finish is a hang, reported, not waited for.
func TestTargetStressTurnsAHangIntoAnOutcome(t *testing.T) {
	dev := newDevice(t, hip.DialectCUDA)
	lib := newFakeLib(t, dev)
	lib.block = make(chan struct{})
	t.Cleanup(func() { close(lib.block) })
	useLib(t, lib, nil)
	opts := stressOpts()
	opts.Timeout = 50 * time.Millisecond // the forwards block until the test ends
	res, err := RunTargetStress(context.Background(), dev, opts)
	if err != nil {
		t.Fatal(err)
	}
	if !res.Hung || res.Measured != Fail || len(res.Threads) != 3 || !strings.Contains(res.Detail, "trial 1 did not finish within 50ms") {
		t.Fatalf("hung %v measured %s: %s", res.Hung, res.Measured, res.Detail)
	}
	if lib.closed.Load() {
		t.Fatal("the library was closed under threads still using it")
	}
	if run := res.AsStressRun(); run.OK() {
		t.Fatal("a hung run reads as passed")
	}
}

func TestTargetStressOptionsAreChecked(t *testing.T) {
	ok := DefaultTargetStress(TargetCUDNN)
	if err := ok.Check(); err != nil || ok.Expected() != 1098304 {
		t.Fatalf("the PyTorch shape: %v, expected sum %.0f", err, ok.Expected())
	}
	for _, tt := range []struct {
		edit func(*TargetStressOptions)
		want string
	}{
		{func(o *TargetStressOptions) { o.Threads = 0 }, "threads 0"},
		{func(o *TargetStressOptions) { o.Trials = 0 }, "trials 0"},
		{func(o *TargetStressOptions) { o.Size = 1 }, "size 1"},
		{func(o *TargetStressOptions) { o.Iterations = 2048 }, "iterations 2048: want 1 to size-1 (2047)"},
		{func(o *TargetStressOptions) { o.Timeout = -time.Second }, "timeout -1s is negative"},
		{func(o *TargetStressOptions) { o.Select = "guess" }, `unknown algorithm selection "guess"`},
	} {
		o := ok
		tt.edit(&o)
		if err := o.Check(); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%+v: %v, want %q", o, err, tt.want)
		}
	}
	dev := newDevice(t, hip.DialectCUDA)
	useLib(t, newFakeLib(t, dev), nil)
	bad := stressOpts()
	bad.Size = 1
	if _, err := RunTargetStress(context.Background(), dev, bad); err == nil {
		t.Fatal("bad options ran")
	}
	if _, err := RunTargetStress(context.Background(), dev, TargetStressOptions{Target: TargetBuiltin}); err == nil {
		t.Fatal("the builtin target ran here")
	}
}

func TestTargetNotesComeFromTheLibrary(t *testing.T) {
	dev := newDevice(t, hip.DialectCUDA)
	lib := newFakeLib(t, dev)
	useLib(t, lib, nil)
	if got := TargetNotes(TargetCUDNN, dev); len(got) != 1 || got[0] != "fake note" || !lib.closed.Load() {
		t.Fatalf("notes %q, closed %v", got, lib.closed.Load())
	}
	useLib(t, nil, errors.New("no library"))
	if got := TargetNotes(TargetCUDNN, dev); got != nil {
		t.Fatalf("notes without a library: %q", got)
	}
}

func TestTargetStressReportsALibraryThatWillNotOpen(t *testing.T) {
	dev := newDevice(t, hip.DialectCUDA)
	missing := &TargetUnavailableError{Target: TargetCUDNN, Reason: "libcudnn.so.9 not found (tried libcudnn.so.9: no such file)"}
	useLib(t, nil, missing)
	_, err := RunTargetStress(context.Background(), dev, stressOpts())
	if !errors.Is(err, missing) || err.Error() != "target cudnn unavailable: libcudnn.so.9 not found (tried libcudnn.so.9: no such file)" {
		t.Fatalf("%v", err)
	}
}

func TestLibraryCheckAcceptsTheDriversRMSCriterion(t *testing.T) {
	p := conv.Problem{N: 1, C: 4, H: 8, W: 8, K: 4, R: 3, S: 3, PadH: 1, PadW: 1, StrideH: 1, StrideW: 1, DilH: 1, DilW: 1, Groups: 1}
	want := conv.Reference(p, conv.RandomTensor(p.InputElements(), 1), conv.RandomTensor(p.WeightElements(), 2))
	got := append([]float32(nil), want...)
	if err := libraryCheck(p, got, want); err != nil {
		t.Fatalf("exact output refused: %v", err)
	}
	// One element off by more than the element-wise tolerance, RMS still tiny.
	got[3] += 1e-3
	if conv.Check(p, got, want).OK {
		t.Fatal("the element-wise check should refuse this")
	}
	if err := libraryCheck(p, got, want); err == nil && conv.Check(p, got, want).RMS > conv.DriverRMSTolerance {
		t.Fatal("accepted past the RMS tolerance")
	}
	// Garbage fails both.
	for i := range got {
		got[i] = 0
	}
	if err := libraryCheck(p, got, want); err == nil {
		t.Fatal("zeros accepted")
	}
}

// A library that fails every case alike is summarised once, naming the
// cases; different reasons stay apart, in the order first seen.
func TestFillTargetCaptureGroupsIdenticalFailures(t *testing.T) {
	wrong := "graph output: verification FAILED: RMS 4.1e-07"
	mk := func(mode hip.CaptureMode, v Variant, end hip.Code, detail string) TargetCaptureCase {
		c := TargetCaptureCase{Target: TargetCUDNN, Library: "libcudnn 9"}
		c.Mode, c.Variant, c.Expected, c.Measured, c.EndCapture, c.Detail = mode, v, Pass, Fail, end, detail
		return c
	}
	for _, tt := range []struct {
		name  string
		cases []TargetCaptureCase
		want  string
	}{
		{"alike", []TargetCaptureCase{
			mk(hip.CaptureModeGlobal, SameThread, hip.Success, wrong),
			mk(hip.CaptureModeThreadLocal, SameThread, hip.Success, wrong),
			mk(hip.CaptureModeRelaxed, SameThread, hip.Success, wrong),
		}, "global/same-thread, thread-local/same-thread, relaxed/same-thread: CUDA_SUCCESS (0) " + wrong},
		{"two reasons", []TargetCaptureCase{
			mk(hip.CaptureModeGlobal, SameThread, hip.ErrStreamCaptureInvalidated, "query refused"),
			mk(hip.CaptureModeThreadLocal, SameThread, hip.Success, wrong),
			mk(hip.CaptureModeRelaxed, SameThread, hip.ErrStreamCaptureInvalidated, "query refused"),
		}, "global/same-thread, relaxed/same-thread: CUDA_ERROR_STREAM_CAPTURE_INVALIDATED (901) query refused; thread-local/same-thread: CUDA_SUCCESS (0) " + wrong},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := report.New("capture", "miotool capture --target=cudnn", time.Time{})
			FillTargetCapture(r, tt.cases, hip.DialectCUDA, time.Time{})
			if r.Verdict != report.Fail || r.Summary != tt.want {
				t.Fatalf("verdict %s summary\n %q\nwant\n %q", r.Verdict, r.Summary, tt.want)
			}
		})
	}
}
