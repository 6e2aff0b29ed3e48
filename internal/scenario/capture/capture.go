// Package capture runs the #12121 scenarios: a graph capture after find
// abandoned a naive evaluation, on miotool's own mechanisms (Run) or on a
// library target (RunTarget), and the replay-only workload that must still
// release the abandoned evaluation's scratch (RunReplay). Each returns the
// cases it measured; internal/cmd/capture and internal/cmd/replay render
// them.
package capture

import (
	"context"
	"errors"
	"fmt"
	"time"

	"miotool/internal/conv"
	"miotool/internal/finder"
	"miotool/internal/handle"
	"miotool/internal/hip"
	"miotool/internal/hip/osthread"
	"miotool/internal/scenario"
	"miotool/internal/streams"
)

// Options configure the #12121 scenario.
type Options struct {
	Modes    []hip.CaptureMode
	Policies []streams.Policy
	Variants []scenario.Variant
	// FindProblem is what find evaluates: large enough that the naive
	// solver overruns its deadline. CaptureProblem is the convolution
	// captured afterwards (the find problem when zero).
	FindProblem    conv.Problem
	CaptureProblem conv.Problem
	// NaiveTimeoutPct as MIOPEN_NAIVE_TIMEOUT (300 when 0 is not meant:
	// callers pass the effective value).
	NaiveTimeoutPct int
	// Samples per solver during find (fewer than find's default keeps the
	// scenario quick; timing quality is not what it checks).
	Samples int
	// MaxDraining is the tracker cap (0: from GPU_MAX_HW_QUEUES).
	MaxDraining int
	Seed        uint64
	// Repeat runs every case this many times (1 when zero).
	Repeat int
	Log    func(format string, args ...any)
	// Progress, when set, hears how many cases are done out of how many,
	// before the first and after each.
	Progress func(done, total int)
}

// Case is one combination and what it did.
type Case struct {
	Mode     hip.CaptureMode
	Policy   streams.Policy
	Variant  scenario.Variant
	Expected scenario.Outcome
	Measured scenario.Outcome
	// EndCapture is the end-capture code (Success when it returned a graph).
	EndCapture hip.Code
	// FirstRefusal is the first runtime call the capture's launch path
	// made that was refused, e.g. "hipStreamQuery: hipErrorStreamCaptureUnsupported (900)".
	FirstRefusal string
	OutputOK     bool
	// NaiveAbandoned and DrainingAtCapture show the precondition held: find
	// abandoned the naive evaluation and its slot was still in the backlog
	// when the capture began.
	NaiveAbandoned    bool
	DrainingAtCapture int
	// FindAttempts is how many finds it took to abandon a naive evaluation.
	FindAttempts int
	Detail       string
	Counters     streams.Counters
	Elapsed      time.Duration
}

// Agrees reports whether the measured outcome is the expected one.
func (c Case) Agrees() bool { return c.Measured == c.Expected }

// Expected is the outcome the runtime's rules predict. The lazy
// policy queries the abandoned stream from the launch path: on the
// capturing thread that is refused in global and thread-local mode; from
// another thread only a global capture is exposed. The guarded and worker
// policies make no refused call.
func Expected(p streams.Policy, m hip.CaptureMode, v scenario.Variant) scenario.Outcome {
	if p != streams.Lazy || m == hip.CaptureModeRelaxed {
		return scenario.Pass
	}
	if v == scenario.OtherThread && m == hip.CaptureModeThreadLocal {
		return scenario.Pass
	}
	return scenario.Fail
}

// ErrInterrupted marks a run that its context ended: the cases come back
// with it, those that finished and, last, the one the interruption
// stopped (Measured Interrupted); the cases after it were not run.
var ErrInterrupted = errors.New("interrupted")

// interrupted is the error a run stopped by ctx returns.
func interrupted(ctx context.Context) error {
	return fmt.Errorf("%w: %w", ErrInterrupted, context.Cause(ctx))
}

// Planned is how many cases Run runs for opts.
func Planned(opts Options) int {
	return max(1, opts.Repeat) * len(opts.Variants) * len(opts.Policies) * len(opts.Modes)
}

// Run runs every requested combination on dev. When ctx ends, it returns
// the cases so far and an error wrapping ErrInterrupted.
func Run(ctx context.Context, dev hip.Device, opts Options) ([]Case, error) {
	if opts.CaptureProblem == (conv.Problem{}) {
		opts.CaptureProblem = opts.FindProblem
	}
	var out []Case
	progress := progressOf(opts.Progress, Planned(opts))
	for range max(1, opts.Repeat) {
		for _, v := range opts.Variants {
			for _, p := range opts.Policies {
				for _, m := range opts.Modes {
					if ctx.Err() != nil {
						return out, interrupted(ctx)
					}
					c, err := runCase(ctx, dev, opts, p, m, v)
					if err != nil && ctx.Err() != nil {
						c.Measured, c.Detail = scenario.Interrupted, "interrupted while it ran"
						return append(out, c), interrupted(ctx)
					}
					if err != nil {
						return out, fmt.Errorf("%s / %s / %s: %w", p, m, v, err)
					}
					out = append(out, c)
					progress(len(out))
				}
			}
		}
	}
	return out, nil
}

// progressOf tells report (when set) of done cases out of total, starting
// with none.
func progressOf(report func(done, total int), total int) func(done int) {
	if report == nil {
		return func(int) {}
	}
	report(0, total)
	return func(done int) { report(done, total) }
}

func logf(opts Options) func(string, ...any) {
	if opts.Log != nil {
		return opts.Log
	}
	return func(string, ...any) {}
}

// findAttempts bounds how often a scenario repeats its find when the naive
// evaluation happened to finish within its deadline, or was abandoned but
// had already finished and been reclaimed when find returned (a loaded
// machine can slow the fast solver more than the naive one, and a prompt
// reclaim policy such as the poller retires a short overrun at once). Each
// retry is counted in the case, so a precondition that needed help is
// visible, and a case whose precondition never held is INCONCLUSIVE.
const findAttempts = 5

// abandonedFind makes a handle whose find abandoned its naive evaluation
// and left it running, retrying a find whose naive evaluation made its
// deadline or was already reclaimed. It returns the number of finds it ran.
func abandonedFind(ctx context.Context, dev hip.Device, opts Options, p streams.Policy) (*handle.Handle, *finder.Tensors, *finder.Result, int, error) {
	for attempt := 1; ; attempt++ {
		h, err := handle.New(dev, handle.Options{Policy: p, MaxDraining: opts.MaxDraining})
		if err != nil {
			return nil, nil, nil, attempt, err
		}
		ts, err := finder.NewTensors(dev, opts.FindProblem, nil, opts.Seed)
		if err != nil {
			_ = h.Close()
			return nil, nil, nil, attempt, err
		}
		res, err := finder.Find(ctx, h, ts, finder.Options{
			NaiveTimeoutPct: opts.NaiveTimeoutPct,
			Samples:         opts.Samples,
			Verify:          false,
			Log:             logf(opts),
		})
		if err != nil {
			_ = h.Close()
			_ = ts.Free()
			return nil, nil, nil, attempt, fmt.Errorf("find: %w", err)
		}
		stillRunning := res.NaiveAbandoned && h.Tracker().Counters().Draining > 0
		if stillRunning || opts.NaiveTimeoutPct == 0 || attempt == findAttempts {
			return h, ts, res, attempt, nil
		}
		if res.NaiveAbandoned {
			logf(opts)("naive overran its %.4g ms deadline on attempt %d but had finished when find returned; finding again", res.NaiveDeadlineMs, attempt)
		} else {
			logf(opts)("naive made its %.4g ms deadline on attempt %d; finding again", res.NaiveDeadlineMs, attempt)
		}
		if err := errors.Join(h.Close(), ts.Free()); err != nil {
			return nil, nil, nil, attempt, err
		}
	}
}

func runCase(ctx context.Context, dev hip.Device, opts Options, p streams.Policy, m hip.CaptureMode, v scenario.Variant) (Case, error) {
	start := time.Now()
	c := Case{Mode: m, Policy: p, Variant: v, Expected: Expected(p, m, v)}
	logf(opts)("case %s / %s / %s: find on %s", p, m, v, opts.FindProblem.Key())
	fh, fts, res, attempts, err := abandonedFind(ctx, dev, opts, p)
	if err != nil {
		return c, err
	}
	c.FindAttempts = attempts
	c.NaiveAbandoned = res.NaiveAbandoned
	c.DrainingAtCapture = fh.Tracker().Counters().Draining

	// The captured convolution: its solver is the one find chose.
	sol, _ := conv.SolverByName(res.Chosen)
	if sol == nil || !sol.IsApplicable(opts.CaptureProblem) {
		sol = fastestApplicable(opts.CaptureProblem)
	}
	cts, err := finder.NewTensors(dev, opts.CaptureProblem, nil, opts.Seed+7)
	if err != nil {
		_ = fh.Close()
		_ = fts.Free()
		return c, err
	}
	capHandle := fh
	if v == scenario.OtherThread {
		if capHandle, err = handle.New(dev, handle.Options{Policy: p, MaxDraining: opts.MaxDraining}); err != nil {
			return c, err
		}
	}
	other := func() error {
		findSol, _ := conv.SolverByName(res.Chosen)
		if findSol == nil {
			findSol = fastestApplicable(opts.FindProblem)
		}
		return runSolver(fh, findSol, fts, fts.Y)
	}
	outcome := captureAndReplay(dev, capHandle, sol, cts, m, v, other)
	if r := fh.Tracker().FirstSweepRefusal(); r != nil {
		outcome.detail = scenario.JoinDetail("launch-path sweep refused: "+r.Error(), outcome.detail)
	}
	c.EndCapture, c.FirstRefusal, c.OutputOK, c.Detail = outcome.end, outcome.firstRefusal, outcome.outputOK, outcome.detail
	switch {
	case outcome.setupErr != nil:
		return c, outcome.setupErr
	case !c.NaiveAbandoned || c.DrainingAtCapture == 0:
		c.Measured = scenario.Inconclusive
		c.Detail = "find did not leave an abandoned naive evaluation (make the find problem larger or the timeout smaller); " + c.Detail
	case outcome.end == hip.Success && outcome.outputOK:
		c.Measured = scenario.Pass
	default:
		c.Measured = scenario.Fail
	}
	var first error
	keep := func(err error) {
		if err != nil && first == nil {
			first = err
		}
	}
	if capHandle != fh {
		keep(capHandle.Close())
	}
	keep(fh.Close())
	keep(fts.Free())
	keep(cts.Free())
	c.Counters = fh.Tracker().Counters()
	c.Elapsed = time.Since(start)
	return c, first
}

func fastestApplicable(p conv.Problem) *conv.Solver {
	for _, s := range conv.Solvers() {
		if !s.IsNaive() && s.IsApplicable(p) {
			return s
		}
	}
	for _, s := range conv.Solvers() {
		if s.IsApplicable(p) {
			return s
		}
	}
	return nil
}

type captureOutcome struct {
	end          hip.Code
	firstRefusal string
	outputOK     bool
	detail       string
	setupErr     error
}

// captureAndReplay captures sol through capHandle (captureWith), then
// instantiates the graph, launches it on another stream and checks its
// output against the reference.
func captureAndReplay(dev hip.Device, capHandle *handle.Handle, sol *conv.Solver, ts *finder.Tensors, m hip.CaptureMode, v scenario.Variant, otherLaunch func() error) captureOutcome {
	var out captureOutcome
	var during func() error
	if v == scenario.OtherThread {
		during = otherLaunch
	}
	cr, err := captureWith(dev, capHandle, sol, ts, m, during)
	if err != nil {
		out.setupErr = err
		return out
	}
	out.end = cr.end
	if cr.runErr != nil {
		out.firstRefusal = cr.runErr.Error()
	}
	if cr.duringErr != nil {
		out.detail = "other thread's launch: " + cr.duringErr.Error()
	}
	if cr.end != hip.Success {
		out.detail = scenario.JoinDetail(out.detail, "end capture: "+cr.endErr.Error())
		return out
	}
	defer dev.GraphDestroy(cr.graph)
	exec, err := dev.GraphInstantiate(cr.graph)
	if err != nil {
		out.detail = scenario.JoinDetail(out.detail, "instantiate: "+err.Error())
		return out
	}
	defer dev.GraphExecDestroy(exec)
	rs, err := dev.StreamCreate(hip.StreamNonBlocking)
	if err != nil {
		out.setupErr = err
		return out
	}
	defer dev.StreamDestroy(rs)
	if err := dev.GraphLaunch(exec, rs); err != nil {
		out.detail = scenario.JoinDetail(out.detail, "graph launch: "+err.Error())
		return out
	}
	if err := dev.StreamSynchronize(rs); err != nil {
		out.detail = scenario.JoinDetail(out.detail, "graph run: "+err.Error())
		return out
	}
	got, err := ts.Output()
	if err != nil {
		out.setupErr = err
		return out
	}
	chk := ts.Check(got)
	out.outputOK = chk.OK
	if !chk.OK {
		out.detail = scenario.JoinDetail(out.detail, "graph output: "+chk.String())
	}
	return out
}

type captureResult struct {
	graph     hip.Graph // zero unless end is Success
	end       hip.Code
	endErr    error
	runErr    error // from the captured launches
	duringErr error // from the launch made on another thread
}

// captureWith captures sol through h on a fresh non-blocking stream in mode
// m, on a goroutine locked to its OS thread. When during is set it runs on
// a second locked thread while the capture is open, and the capture ends
// after it returns. Only failures to set the scenario up are errors.
func captureWith(dev hip.Device, h *handle.Handle, sol *conv.Solver, ts *finder.Tensors, m hip.CaptureMode, during func() error) (captureResult, error) {
	var cr captureResult
	if err := ts.ClearOutput(); err != nil {
		return cr, err
	}
	cs, err := dev.StreamCreate(hip.StreamNonBlocking)
	if err != nil {
		return cr, err
	}
	defer dev.StreamDestroy(cs)
	prev := h.Stream()
	h.SetStream(cs)
	defer h.SetStream(prev)

	capT, err := osthread.Start(nil)
	if err != nil {
		return cr, err
	}
	defer capT.Stop()
	if err := capT.Run(func() error {
		if err := dev.StreamBeginCapture(cs, m); err != nil {
			return fmt.Errorf("begin capture: %w", err)
		}
		cr.runErr = runSolver(h, sol, ts, ts.Y)
		return nil
	}); err != nil {
		return cr, err
	}
	if during != nil {
		cr.duringErr = osthread.Run(during)
	}
	_ = capT.Run(func() error {
		cr.graph, cr.endErr = dev.StreamEndCapture(cs)
		cr.end = hip.CodeOf(cr.endErr)
		return nil
	})
	if cr.endErr != nil && !errors.As(cr.endErr, new(*hip.Error)) {
		return cr, cr.endErr
	}
	return cr, nil
}

// runSolver launches sol's kernels through h.Run onto the handle's stream.
func runSolver(h *handle.Handle, sol *conv.Solver, ts *finder.Tensors, y hip.DevPtr) error {
	for _, l := range sol.Plan(ts.Problem, conv.Buffers{X: ts.X, W: ts.W, Y: y, Workspace: ts.Workspace}) {
		f, err := h.Function(conv.Source(), l.Kernel)
		if err != nil {
			return err
		}
		if err := h.Run(f, l.Grid, l.Block, l.SharedMem, l.Args...); err != nil {
			return err
		}
	}
	return nil
}
