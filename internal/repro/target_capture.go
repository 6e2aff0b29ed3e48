package repro

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"miotool/internal/conv"
	"miotool/internal/hip"
)

// DefaultTargetProblem is the convolution the library capture scenario
// finds and captures when none is given: the capture problem of the GPU
// builtin scenario (naive-timeout-gpu), large enough that MIOpen's naive
// solver overruns its find deadline (3x the best time) by a wide margin.
var DefaultTargetProblem = conv.Problem{N: 32, C: 128, H: 56, W: 56, K: 128, R: 3, S: 3,
	PadH: 1, PadW: 1, StrideH: 1, StrideW: 1, DilH: 1, DilW: 1, Groups: 1}

// TargetCaptureOptions configure the #12121 scenario on a library target:
// for each case, a fresh handle on a fresh non-blocking stream runs the
// library's find (MIOpen's on an empty find-db), then the forward
// convolution with the algorithm find chose is captured in the given mode,
// the capture ended, the graph instantiated and launched on another
// stream, and its output compared with the CPU reference.
type TargetCaptureOptions struct {
	Target Target
	Modes  []hip.CaptureMode
	// Variants: same-thread (find and capture through one handle on one
	// thread) or other-thread (find through a handle on a second thread,
	// which launches a forward while the first thread captures its own).
	// Empty means same-thread.
	Variants []Variant
	// Problem is what find benchmarks and the capture records
	// (DefaultTargetProblem when zero).
	Problem conv.Problem
	Seed    uint64
	// Repeat runs every case this many times (1 when zero).
	Repeat int
	Log    func(format string, args ...any)
}

// TargetCaptureCase is one library capture case. Its CaptureCase has
// Policy PolicyLibrary and Expected Pass: a correct library keeps the
// capture valid and the graph's output right in every mode.
type TargetCaptureCase struct {
	CaptureCase
	Target  Target
	Library string // e.g. "libcudnn 9.14.0 (/usr/lib/x86_64-linux-gnu/libcudnn.so.9.14.0)"
	// Found is find's ranking in this case; Chosen the algorithm captured.
	Found  []TargetAlgo
	Chosen TargetAlgo
	// StatusAfterLaunch is the stream's capture state right after the
	// library call, before the capture was ended.
	StatusAfterLaunch hip.CaptureStatus
	// MaxAbsErr is the graph output's largest difference from the CPU
	// reference (when the graph ran).
	MaxAbsErr float64
}

// RunTargetCapture runs the #12121 capture scenario on a library target
// (miopen or cudnn) in each mode, same-thread, with DefaultTargetProblem.
// A missing library or a device on the wrong backend is a
// *TargetUnavailableError.
func RunTargetCapture(ctx context.Context, dev hip.Device, target string, modes []hip.CaptureMode) ([]TargetCaptureCase, error) {
	t, err := ParseTarget(target)
	if err != nil {
		return nil, err
	}
	return RunTargetCaptureWith(ctx, dev, TargetCaptureOptions{Target: t, Modes: modes, Seed: 1})
}

// RunTargetCaptureWith runs every requested combination.
func RunTargetCaptureWith(ctx context.Context, dev hip.Device, opts TargetCaptureOptions) ([]TargetCaptureCase, error) {
	if opts.Target == TargetBuiltin {
		return nil, errors.New("the builtin target runs through RunCapture")
	}
	if opts.Problem == (conv.Problem{}) {
		opts.Problem = DefaultTargetProblem
	}
	if err := checkTargetProblem(opts.Problem); err != nil {
		return nil, err
	}
	if len(opts.Modes) == 0 {
		return nil, errors.New("no capture mode given")
	}
	if len(opts.Variants) == 0 {
		opts.Variants = []Variant{SameThread}
	}
	lib, err := openTargetLib(opts.Target, dev)
	if err != nil {
		return nil, err
	}
	defer lib.close()
	host := newTargetHost(opts.Problem, opts.Seed)
	logf := opts.Log
	if logf == nil {
		logf = func(string, ...any) {}
	}
	var out []TargetCaptureCase
	for range max(1, opts.Repeat) {
		for _, v := range opts.Variants {
			for _, m := range opts.Modes {
				if err := ctx.Err(); err != nil {
					return out, err
				}
				logf("case %s / %s / %s: find on %s", opts.Target, m, v, opts.Problem)
				c, err := runTargetCaptureCase(dev, lib, opts, host, m, v)
				if err != nil {
					return out, fmt.Errorf("%s / %s / %s: %w", opts.Target, m, v, err)
				}
				out = append(out, c)
			}
		}
	}
	return out, nil
}

// TargetNotes are the settings a library target runs with (cuDNN's math
// type, the MIOpen environment), for a result's notes; empty when the
// library cannot be opened for dev.
func TargetNotes(target Target, dev hip.Device) []string {
	lib, err := openTargetLib(target, dev)
	if err != nil {
		return nil
	}
	defer lib.close()
	return lib.notes()
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

// targetParty is one thread's share of a case: its handle, stream, output
// buffer and workspace. Its methods run on its thread.
type targetParty struct {
	thread  *osThread
	stream  hip.Stream
	sess    targetSession
	y       hip.DevPtr
	ws      hip.DevPtr
	wsBytes int64
}

func (tp *targetParty) setup(dev hip.Device, lib targetLib, yBytes int) error {
	var err error
	if tp.stream, err = dev.StreamCreate(hip.StreamNonBlocking); err != nil {
		return err
	}
	if tp.sess, err = lib.newSession(tp.stream); err != nil {
		return err
	}
	tp.y, err = dev.Malloc(yBytes)
	return err
}

// ensureWorkspace grows the workspace to n bytes.
func (tp *targetParty) ensureWorkspace(dev hip.Device, n int64) error {
	if n <= tp.wsBytes {
		return nil
	}
	if tp.ws != 0 {
		if err := dev.Free(tp.ws); err != nil {
			return err
		}
		tp.ws, tp.wsBytes = 0, 0
	}
	p, err := dev.Malloc(int(n))
	if err != nil {
		return fmt.Errorf("allocating a %d-byte workspace: %w", n, err)
	}
	tp.ws, tp.wsBytes = p, n
	return nil
}

func (tp *targetParty) buffers(x, w hip.DevPtr) targetBuffers {
	return targetBuffers{X: x, W: w, Y: tp.y, Workspace: tp.ws, WorkspaceBytes: tp.wsBytes}
}

// teardown releases what setup and ensureWorkspace made; it waits for the
// party's stream first.
func (tp *targetParty) teardown(dev hip.Device) error {
	var k keepFirst
	if tp.stream != 0 {
		// Best effort: after a failed capture some runtimes refuse the
		// wait, and the case already says why.
		_ = dev.StreamSynchronize(tp.stream)
	}
	if tp.sess != nil {
		k.add(tp.sess.close())
	}
	for _, p := range []hip.DevPtr{tp.y, tp.ws} {
		if p != 0 {
			k.add(dev.Free(p))
		}
	}
	if tp.stream != 0 {
		k.add(dev.StreamDestroy(tp.stream))
	}
	*tp = targetParty{thread: tp.thread}
	return k.err
}

// findAndChoose runs find through tp and picks the fastest algorithm that
// ran, with its workspace allocated.
func (tp *targetParty) findAndChoose(dev hip.Device, p conv.Problem, x, w hip.DevPtr) ([]TargetAlgo, TargetAlgo, error) {
	need, err := tp.sess.findWorkspace(p)
	if err != nil {
		return nil, TargetAlgo{}, err
	}
	if err := tp.ensureWorkspace(dev, need); err != nil {
		return nil, TargetAlgo{}, err
	}
	found, err := tp.sess.find(p, tp.buffers(x, w))
	if err != nil {
		return nil, TargetAlgo{}, fmt.Errorf("find: %w", err)
	}
	for _, a := range found {
		if a.OK {
			return found, a, tp.useAlgo(dev, p, a)
		}
	}
	return found, TargetAlgo{}, fmt.Errorf("find returned no algorithm that ran (%s)", algoList(found))
}

// useAlgo allocates the workspace a needs.
func (tp *targetParty) useAlgo(dev hip.Device, p conv.Problem, a TargetAlgo) error {
	need, err := tp.sess.workspace(p, a)
	if err != nil {
		return err
	}
	return tp.ensureWorkspace(dev, need)
}

// clearOutput zeroes y on the party's stream and waits for that stream
// alone: a device-wide wait would also wait for work a library left
// running on streams of its own, which is the precondition of #12121.
func (tp *targetParty) clearOutput(dev hip.Device, bytes int) error {
	if err := dev.MemsetAsync(tp.y, 0, bytes, tp.stream); err != nil {
		return err
	}
	return dev.StreamSynchronize(tp.stream)
}

func runTargetCaptureCase(dev hip.Device, lib targetLib, opts TargetCaptureOptions, host *targetHost, m hip.CaptureMode, v Variant) (c TargetCaptureCase, err error) {
	start := time.Now()
	p := opts.Problem
	c = TargetCaptureCase{CaptureCase: CaptureCase{Mode: m, Policy: PolicyLibrary, Variant: v, Expected: Pass},
		Target: opts.Target, Library: lib.describe()}
	yBytes := 4 * p.OutputElements()
	var k keepFirst
	defer func() {
		if err == nil {
			err = k.err
		}
		c.Elapsed = time.Since(start)
	}()

	capT, err := startOSThread(lib.bindThread)
	if err != nil {
		return c, err
	}
	defer capT.stop()
	a := &targetParty{thread: capT}
	b := a
	if v == OtherThread {
		findT, err := startOSThread(lib.bindThread)
		if err != nil {
			return c, err
		}
		defer findT.stop()
		b = &targetParty{thread: findT}
	}

	// Inputs, shared by both parties.
	var x, w hip.DevPtr
	defer func() {
		for _, ptr := range []hip.DevPtr{x, w} {
			if ptr != 0 {
				k.add(dev.Free(ptr))
			}
		}
	}()
	if err := capT.run(func() error {
		var err error
		if x, err = dev.Malloc(4 * p.InputElements()); err != nil {
			return err
		}
		if w, err = dev.Malloc(4 * p.WeightElements()); err != nil {
			return err
		}
		if err := dev.MemcpyHtoD(x, conv.Float32Bytes(host.x)); err != nil {
			return err
		}
		return dev.MemcpyHtoD(w, conv.Float32Bytes(host.w))
	}); err != nil {
		return c, fmt.Errorf("uploading the inputs: %w", err)
	}

	parties := []*targetParty{a}
	if b != a {
		parties = append(parties, b)
	}
	defer func() {
		for _, tp := range parties {
			k.add(tp.thread.run(func() error { return tp.teardown(dev) }))
		}
	}()
	for _, tp := range parties {
		if err := tp.thread.run(func() error { return tp.setup(dev, lib, yBytes) }); err != nil {
			return c, err
		}
	}

	// Find on the party that will be the one whose find ran (b), on an
	// empty find-db; the capturing party uses the algorithm it chose.
	if err := b.thread.run(func() error {
		var err error
		c.Found, c.Chosen, err = b.findAndChoose(dev, p, x, w)
		return err
	}); err != nil {
		return c, err
	}
	if a != b {
		if err := a.thread.run(func() error { return a.useAlgo(dev, p, c.Chosen) }); err != nil {
			return c, err
		}
	}
	if err := a.thread.run(func() error { return a.clearOutput(dev, yBytes) }); err != nil {
		return c, err
	}

	// The capture: begin, the library's forward, (the other thread's
	// forward), end, all on the capturing thread except the other launch.
	var runErr, duringErr, endErr error
	var graph hip.Graph
	if err := capT.run(func() error {
		if err := dev.StreamBeginCapture(a.stream, m); err != nil {
			return fmt.Errorf("begin capture: %w", err)
		}
		runErr = a.sess.forward(p, c.Chosen, a.buffers(x, w))
		c.StatusAfterLaunch, _ = dev.StreamIsCapturing(a.stream)
		return nil
	}); err != nil {
		return c, err
	}
	if a != b {
		duringErr = b.thread.run(func() error { return b.sess.forward(p, c.Chosen, b.buffers(x, w)) })
	}
	_ = capT.run(func() error {
		graph, endErr = dev.StreamEndCapture(a.stream)
		return nil
	})
	c.EndCapture = hip.CodeOf(endErr)
	if endErr != nil && !errors.As(endErr, new(*hip.Error)) {
		return c, endErr
	}
	if runErr != nil {
		c.FirstRefusal = runErr.Error()
	}
	if duringErr != nil {
		c.Detail = joinDetail(c.Detail, "other thread's forward: "+duringErr.Error())
	}
	if c.StatusAfterLaunch == hip.CaptureStatusInvalidated {
		c.Detail = joinDetail(c.Detail, "the capture was invalidated during the library call")
	}
	if endErr != nil {
		c.Detail = joinDetail(c.Detail, "end capture: "+endErr.Error())
	} else {
		replayErr := capT.run(func() error { return c.replay(dev, graph, a.y, host) })
		if replayErr != nil {
			var he *hip.Error
			if !errors.As(replayErr, &he) {
				return c, replayErr
			}
			c.Detail = joinDetail(c.Detail, replayErr.Error())
		}
	}
	if a != b {
		if msg := b.thread.run(func() error { return checkOutput(dev, b, host) }); msg != nil {
			c.Detail = joinDetail(c.Detail, "other thread's output: "+msg.Error())
		}
	}
	if c.EndCapture == hip.Success && runErr == nil && c.OutputOK {
		c.Measured = Pass
	} else {
		c.Measured = Fail
	}
	return c, nil
}

// replay instantiates the graph, launches it on a fresh stream, waits and
// checks y against the reference. Runtime failures come back as
// *hip.Error for the case's detail.
func (c *TargetCaptureCase) replay(dev hip.Device, g hip.Graph, y hip.DevPtr, host *targetHost) error {
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
	got, err := readFloats(dev, y, host.p.OutputElements())
	if err != nil {
		return err
	}
	chk := conv.Check(host.p, got, host.reference())
	c.MaxAbsErr = chk.MaxAbs
	if err := libraryCheck(host.p, got, host.reference()); err != nil {
		c.Detail = joinDetail(c.Detail, "graph output: "+err.Error())
		return nil
	}
	c.OutputOK = true
	if !chk.OK {
		c.Detail = joinDetail(c.Detail, fmt.Sprintf("graph output verified by MIOpenDriver's RMS criterion (RMS %.2g <= %.2g; %d elements past the element-wise tolerance, as FFT and Winograd algorithms round)", chk.RMS, conv.DriverRMSTolerance, chk.Bad))
	}
	return nil
}

// checkOutput waits for tp's stream and compares its y with the reference.
func checkOutput(dev hip.Device, tp *targetParty, host *targetHost) error {
	if err := dev.StreamSynchronize(tp.stream); err != nil {
		return err
	}
	got, err := readFloats(dev, tp.y, host.p.OutputElements())
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

func readFloats(dev hip.Device, p hip.DevPtr, n int) ([]float32, error) {
	buf := make([]byte, 4*n)
	if err := dev.MemcpyDtoH(buf, p); err != nil {
		return nil, err
	}
	return conv.BytesFloat32(buf)
}
