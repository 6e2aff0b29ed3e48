package capture

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"miotool/internal/conv"
	"miotool/internal/dnn/target"
	"miotool/internal/hip"
	"miotool/internal/hip/osthread"
	"miotool/internal/scenario"
)

// DefaultTargetProblem is the convolution the library capture scenario
// finds and captures when none is given: the capture problem of the GPU
// builtin scenario (naive-timeout-gpu), large enough that MIOpen's naive
// solver overruns its find deadline (3x the best time) by a wide margin.
var DefaultTargetProblem = conv.Problem{N: 32, C: 128, H: 56, W: 56, K: 128, R: 3, S: 3,
	PadH: 1, PadW: 1, StrideH: 1, StrideW: 1, DilH: 1, DilW: 1, Groups: 1}

// TargetOptions configure the #12121 scenario on a library target:
// for each case, a fresh handle on a fresh non-blocking stream runs the
// library's find (MIOpen's on an empty find-db), then the forward
// convolution with the algorithm find chose is captured in the given mode,
// the capture ended, the graph instantiated and launched on another
// stream, and its output compared with the CPU reference.
type TargetOptions struct {
	Target target.Name
	Modes  []hip.CaptureMode
	// Variants: same-thread (find and capture through one handle on one
	// thread) or other-thread (find through a handle on a second thread,
	// which launches a forward while the first thread captures its own).
	// Empty means same-thread.
	Variants []scenario.Variant
	// Problem is what find benchmarks and the capture records
	// (DefaultTargetProblem when zero).
	Problem conv.Problem
	Seed    uint64
	// Repeat runs every case this many times (1 when zero).
	Repeat int
	Log    func(format string, args ...any)
	// Progress, when set, hears how many cases are done out of how many.
	Progress func(done, total int)
	// Open opens the library (target.Open when nil).
	Open target.Opener
}

// TargetCase is one library capture case. Its Case has no Policy (the
// library reclaims its own streams) and Expected Pass: a correct library
// keeps the capture valid and the graph's output right in every mode.
type TargetCase struct {
	Case
	Target  target.Name
	Library string // e.g. "libcudnn 9.14.0 (/usr/lib/x86_64-linux-gnu/libcudnn.so.9.14.0)"
	// Found is find's ranking in this case; Chosen the algorithm captured.
	Found  []target.Algo
	Chosen target.Algo
	// StatusAfterLaunch is the stream's capture state right after the
	// library call, before the capture was ended.
	StatusAfterLaunch hip.CaptureStatus
	// MaxAbsErr is the graph output's largest difference from the CPU
	// reference (when the graph ran).
	MaxAbsErr float64
}

// RunTarget runs the #12121 capture scenario on a library target (miopen
// or cudnn): every requested combination, same-thread when no variant is
// given, with DefaultTargetProblem when no problem is. A missing library or
// a device on the wrong backend is a *target.UnavailableError.
func RunTarget(ctx context.Context, dev hip.Device, opts TargetOptions) ([]TargetCase, error) {
	if opts.Target == target.Builtin {
		return nil, errors.New("the builtin target runs through Run")
	}
	if opts.Problem == (conv.Problem{}) {
		opts.Problem = DefaultTargetProblem
	}
	if err := target.CheckProblem(opts.Problem); err != nil {
		return nil, err
	}
	if len(opts.Modes) == 0 {
		return nil, errors.New("no capture mode given")
	}
	if len(opts.Variants) == 0 {
		opts.Variants = []scenario.Variant{scenario.SameThread}
	}
	lib, err := opts.Open.Open(dev, opts.Target)
	if err != nil {
		return nil, err
	}
	defer lib.Close()
	host := newTargetHost(opts.Problem, opts.Seed)
	logf := opts.Log
	if logf == nil {
		logf = func(string, ...any) {}
	}
	var out []TargetCase
	progress := progressOf(opts.Progress, max(1, opts.Repeat)*len(opts.Variants)*len(opts.Modes))
	for range max(1, opts.Repeat) {
		for _, v := range opts.Variants {
			for _, m := range opts.Modes {
				if err := ctx.Err(); err != nil {
					return out, err
				}
				logf("case %s / %s / %s: find on %s", opts.Target, m, v, opts.Problem)
				c, err := runTargetCase(dev, lib, opts, host, m, v)
				if err != nil {
					return out, fmt.Errorf("%s / %s / %s: %w", opts.Target, m, v, err)
				}
				out = append(out, c)
				progress(len(out))
			}
		}
	}
	return out, nil
}

// targetHost holds a problem's host data and, once computed, its reference.
type targetHost struct {
	p       conv.Problem
	x, w    []float32
	refOnce sync.Once
	ref     []float32
}

func newTargetHost(p conv.Problem, seed uint64) *targetHost {
	return &targetHost{p: p, x: conv.RandomTensor(p.InputElements(), seed), w: conv.RandomTensor(p.WeightElements(), seed+1)}
}

func (h *targetHost) reference() []float32 {
	h.refOnce.Do(func() { h.ref = conv.Reference(h.p, h.x, h.w) })
	return h.ref
}

func runTargetCase(dev hip.Device, lib target.Target, opts TargetOptions, host *targetHost, m hip.CaptureMode, v scenario.Variant) (c TargetCase, err error) {
	start := time.Now()
	p := opts.Problem
	c = TargetCase{Case: Case{Mode: m, Variant: v, Expected: scenario.Pass},
		Target: opts.Target, Library: lib.Describe()}
	yBytes := 4 * p.OutputElements()
	var k scenario.FirstError
	defer func() {
		if err == nil {
			err = k.Err
		}
		c.Elapsed = time.Since(start)
	}()

	capT, err := osthread.Start(lib.BindThread)
	if err != nil {
		return c, err
	}
	defer capT.Stop()
	a := &target.Party{Thread: capT}
	b := a
	if v == scenario.OtherThread {
		findT, err := osthread.Start(lib.BindThread)
		if err != nil {
			return c, err
		}
		defer findT.Stop()
		b = &target.Party{Thread: findT}
	}

	// Inputs, shared by both parties.
	var x, w hip.DevPtr
	defer func() {
		for _, ptr := range []hip.DevPtr{x, w} {
			if ptr != 0 {
				k.Add(dev.Free(ptr))
			}
		}
	}()
	if err := capT.Run(func() (err error) {
		x, w, err = uploadInputs(dev, p, host)
		return err
	}); err != nil {
		return c, fmt.Errorf("uploading the inputs: %w", err)
	}

	parties := []*target.Party{a}
	if b != a {
		parties = append(parties, b)
	}
	defer func() {
		for _, tp := range parties {
			k.Add(tp.Thread.Run(func() error { return tp.Teardown(dev) }))
		}
	}()
	for _, tp := range parties {
		if err := tp.Thread.Run(func() error { return tp.Setup(dev, lib, yBytes) }); err != nil {
			return c, err
		}
	}

	// Find on the party that will be the one whose find ran (b), on an
	// empty find-db; the capturing party uses the algorithm it chose.
	if err := b.Thread.Run(func() error {
		var err error
		c.Found, c.Chosen, err = b.FindAndChoose(dev, p, x, w)
		return err
	}); err != nil {
		return c, err
	}
	if a != b {
		if err := a.Thread.Run(func() error { return a.UseAlgo(dev, p, c.Chosen) }); err != nil {
			return c, err
		}
	}
	if err := a.Thread.Run(func() error { return a.ClearOutput(dev, yBytes) }); err != nil {
		return c, err
	}

	if err := c.captureAndCheck(dev, capT, a, b, p, x, w, host); err != nil {
		return c, err
	}
	return c, nil
}

// uploadInputs allocates the case's input and weights and copies them in;
// what was allocated is returned even on an error, for the caller to free.
func uploadInputs(dev hip.Device, p conv.Problem, host *targetHost) (x, w hip.DevPtr, err error) {
	if x, err = dev.Malloc(4 * p.InputElements()); err != nil {
		return 0, 0, err
	}
	if w, err = dev.Malloc(4 * p.WeightElements()); err != nil {
		return x, 0, err
	}
	if err := dev.MemcpyHtoD(x, conv.Float32Bytes(host.x)); err != nil {
		return x, w, err
	}
	return x, w, dev.MemcpyHtoD(w, conv.Float32Bytes(host.w))
}

// captureAndCheck captures the library's forward on a's stream (b's
// forward during it when b is another party), ends the capture, replays
// the graph, and sets what the case measured. An error is the tool's, not
// the case's.
func (c *TargetCase) captureAndCheck(dev hip.Device, capT *osthread.Thread, a, b *target.Party, p conv.Problem, x, w hip.DevPtr, host *targetHost) error {
	m := c.Mode
	// The capture: begin, the library's forward, (the other thread's
	// forward), end, all on the capturing thread except the other launch.
	var runErr, duringErr, endErr error
	var graph hip.Graph
	if err := capT.Run(func() error {
		if err := dev.StreamBeginCapture(a.Stream, m); err != nil {
			return fmt.Errorf("begin capture: %w", err)
		}
		runErr = a.Session.Forward(p, c.Chosen, a.Buffers(x, w))
		c.StatusAfterLaunch, _ = dev.StreamIsCapturing(a.Stream)
		return nil
	}); err != nil {
		return err
	}
	if a != b {
		duringErr = b.Thread.Run(func() error { return b.Session.Forward(p, c.Chosen, b.Buffers(x, w)) })
	}
	_ = capT.Run(func() error {
		graph, endErr = dev.StreamEndCapture(a.Stream)
		return nil
	})
	c.EndCapture = hip.CodeOf(endErr)
	if endErr != nil && !errors.As(endErr, new(*hip.Error)) {
		return endErr
	}
	if runErr != nil {
		c.FirstRefusal = runErr.Error()
	}
	if duringErr != nil {
		c.Detail = scenario.JoinDetail(c.Detail, "other thread's forward: "+duringErr.Error())
	}
	if c.StatusAfterLaunch == hip.CaptureStatusInvalidated {
		c.Detail = scenario.JoinDetail(c.Detail, "the capture was invalidated during the library call")
	}
	if endErr != nil {
		c.Detail = scenario.JoinDetail(c.Detail, "end capture: "+endErr.Error())
	} else {
		replayErr := capT.Run(func() error { return c.replay(dev, graph, a.Y, host) })
		if replayErr != nil {
			var he *hip.Error
			if !errors.As(replayErr, &he) {
				return replayErr
			}
			c.Detail = scenario.JoinDetail(c.Detail, replayErr.Error())
		}
	}
	if a != b {
		if msg := b.Thread.Run(func() error { return checkOutput(dev, b, host) }); msg != nil {
			c.Detail = scenario.JoinDetail(c.Detail, "other thread's output: "+msg.Error())
		}
	}
	if c.EndCapture == hip.Success && runErr == nil && c.OutputOK {
		c.Measured = scenario.Pass
	} else {
		c.Measured = scenario.Fail
	}
	return nil
}

// replay instantiates the graph, launches it on a fresh stream, waits and
// checks y against the reference. Runtime failures come back as
// *hip.Error for the case's detail.
func (c *TargetCase) replay(dev hip.Device, g hip.Graph, y hip.DevPtr, host *targetHost) error {
	defer dev.GraphDestroy(g)
	exec, err := dev.GraphInstantiate(g)
	if err != nil {
		return fmt.Errorf("instantiate: %w", err)
	}
	defer dev.GraphExecDestroy(exec)
	rs, err := dev.StreamCreate(hip.StreamNonBlocking)
	if err != nil {
		return err
	}
	defer dev.StreamDestroy(rs)
	if err := dev.GraphLaunch(exec, rs); err != nil {
		return fmt.Errorf("graph launch: %w", err)
	}
	if err := dev.StreamSynchronize(rs); err != nil {
		return fmt.Errorf("graph run: %w", err)
	}
	got, err := target.ReadFloats(dev, y, host.p.OutputElements())
	if err != nil {
		return err
	}
	chk := conv.Check(host.p, got, host.reference())
	c.MaxAbsErr = chk.MaxAbs
	if err := libraryCheck(host.p, got, host.reference()); err != nil {
		c.Detail = scenario.JoinDetail(c.Detail, "graph output: "+err.Error())
		return nil
	}
	c.OutputOK = true
	if !chk.OK {
		c.Detail = scenario.JoinDetail(c.Detail, fmt.Sprintf("graph output verified by MIOpenDriver's RMS criterion (RMS %.2g <= %.2g; %d elements past the element-wise tolerance, as FFT and Winograd algorithms round)", chk.RMS, conv.DriverRMSTolerance, chk.Bad))
	}
	return nil
}

// checkOutput waits for tp's stream and compares its y with the reference.
func checkOutput(dev hip.Device, tp *target.Party, host *targetHost) error {
	if err := dev.StreamSynchronize(tp.Stream); err != nil {
		return err
	}
	got, err := target.ReadFloats(dev, tp.Y, host.p.OutputElements())
	if err != nil {
		return err
	}
	return libraryCheck(host.p, got, host.reference())
}

// libraryCheck accepts a library's output by MIOpenDriver's own criterion
// when the element-wise tolerance fails: FFT and Winograd algorithms, which
// a library's find may pick, round differently from a direct sum, and
// MIOpenDriver verifies them by the RMS error, not the largest deviation.
func libraryCheck(p conv.Problem, got, want []float32) error {
	chk := conv.Check(p, got, want)
	if chk.OK || chk.NonFinite == 0 && chk.Elements > 0 && chk.RMS <= conv.DriverRMSTolerance {
		return nil
	}
	return errors.New(chk.String())
}
