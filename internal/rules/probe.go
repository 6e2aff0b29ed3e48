package rules

import (
	"context"
	"fmt"
	"runtime"
	"time"

	"miotool/internal/hip"
)

// Spin defaults: long enough that B is still running when the action
// happens. A GPU needs margin for launch latency; the simulator does not.
const (
	DefaultGPUSpin = 300 * time.Millisecond
	DefaultSimSpin = 30 * time.Millisecond
)

// bufferBytes is the size of p and of the action's own allocation.
const bufferBytes = 1 << 20

// DefaultSpin is the spin for a device: DefaultSimSpin on the simulator,
// DefaultGPUSpin on a GPU.
func DefaultSpin(p hip.Props) time.Duration {
	if p.Backend == "sim" {
		return DefaultSimSpin
	}
	return DefaultGPUSpin
}

// Options tune a probe run.
type Options struct {
	// Spin is how long B's spin kernel runs; 0 means DefaultSpin.
	Spin time.Duration
	// Retries is how many times a cell whose action started after B might
	// have finished is measured again with the spin doubled; 0 means 3,
	// a negative value means none.
	Retries int
	// CellTimeout bounds one cell; a cell that takes longer means a call
	// hung, and the probe stops. 0 means 30 s plus eight spins.
	CellTimeout time.Duration
	// Cells restricts the run; nil means Matrix().
	Cells []CellKey
	// Progress, when set, is called after each cell.
	Progress func(done, total int)
}

// Outcome is one measured cell.
type Outcome struct {
	Key CellKey
	// Returns is what the action returned; End is what end-capture returned
	// on the capturing thread afterwards.
	Returns hip.Code
	End     hip.Code
	// SetupErr is set when a set-up call failed; Returns and End are then
	// not measurements.
	SetupErr error
	// Late means the action may have started after B's spin ended, even on
	// the last retry, so a query's answer proves nothing.
	Late bool
	// Spin is the spin of the attempt reported; Attempts counts attempts.
	Spin     time.Duration
	Attempts int
	// Cleanup lists clean-up calls that failed after the cell.
	Cleanup []string
}

// Valid reports whether the outcome is a measurement.
func (o Outcome) Valid() bool { return o.SetupErr == nil && !o.Late }

// Measurement is a probe run.
type Measurement struct {
	Dialect  hip.Dialect
	Props    hip.Props
	Spin     time.Duration
	Outcomes []Outcome
	// Planned is how many cells the run was to measure.
	Planned int
}

// Probe measures each cell on d, one after another. Each cell gets fresh
// streams, events and buffers and is cleaned up fully before the next. An
// error means the probe could not go on (the kernels did not load, a cell
// hung, ctx ended); the cells measured so far are returned with it.
//
// A cell that hangs, or is in flight when ctx ends, is abandoned: Probe
// returns at once, while that cell's calls may still run (a spin of up to
// eight times Options.Spin, or a call that never returns), and leaves what
// they hold to the device's close or the process's exit. Freeing the
// probe's buffer would wait for them, as a runtime's free synchronizes the
// device. An interruption so ends the probe within one check of ctx.
func Probe(ctx context.Context, d hip.Device, opts Options) (*Measurement, error) {
	if opts.Spin <= 0 {
		opts.Spin = DefaultSpin(d.Props())
	}
	switch {
	case opts.Retries == 0:
		opts.Retries = 3
	case opts.Retries < 0:
		opts.Retries = 0
	}
	if opts.CellTimeout <= 0 {
		opts.CellTimeout = 30*time.Second + 8*opts.Spin
	}
	cells := opts.Cells
	if cells == nil {
		cells = Matrix()
	}
	m := &Measurement{Dialect: d.Dialect(), Props: d.Props(), Spin: opts.Spin, Planned: len(cells)}

	p, err := newProber(d)
	if err != nil {
		return m, err
	}
	abandoned := false
	defer func() {
		if !abandoned {
			p.close()
		}
	}()

	for i, key := range cells {
		spin := opts.Spin
		var out Outcome
		for attempt := 1; ; attempt++ {
			if err := ctx.Err(); err != nil {
				return m, err
			}
			// A cell whose calls hang shows up as a timeout; if the timeout
			// scales with the spin, retries do not shorten it.
			out, err = p.runCell(ctx, key, spin, opts.CellTimeout+8*(spin-opts.Spin))
			if err != nil {
				abandoned = true
				return m, err
			}
			out.Attempts = attempt
			if !out.Late || out.SetupErr != nil || attempt > opts.Retries {
				break
			}
			spin *= 2
		}
		m.Outcomes = append(m.Outcomes, out)
		if opts.Progress != nil {
			opts.Progress(i+1, len(cells))
		}
	}
	return m, nil
}

// prober holds what every cell shares: the kernels, a scratch buffer the
// tiny kernel writes, and the host data of the synchronous copy.
type prober struct {
	d       hip.Device
	module  hip.Module
	spin    hip.Function
	tiny    hip.Function
	scratch hip.DevPtr
	host    []byte
}

func newProber(d hip.Device) (*prober, error) {
	p := &prober{d: d, host: make([]byte, bufferBytes)}
	var err error
	if p.module, err = d.ModuleLoad(Kernels()); err != nil {
		return nil, fmt.Errorf("loading the probe kernels: %w", err)
	}
	if p.spin, err = d.ModuleGetFunction(p.module, SpinKernel); err == nil {
		p.tiny, err = d.ModuleGetFunction(p.module, TinyKernel)
	}
	if err == nil {
		p.scratch, err = d.Malloc(256)
	}
	if err != nil {
		_ = d.ModuleUnload(p.module)
		return nil, fmt.Errorf("preparing the probe: %w", err)
	}
	return p, nil
}

func (p *prober) close() {
	_ = p.d.Free(p.scratch)
	_ = p.d.ModuleUnload(p.module)
}

// runCell runs one cell on a goroutine locked to its own OS thread (the
// capturing thread) and waits for it at most timeout.
func (p *prober) runCell(ctx context.Context, key CellKey, spin, timeout time.Duration) (Outcome, error) {
	done := make(chan Outcome, 1)
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		done <- p.cell(key, spin)
	}()
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	select {
	case out := <-done:
		return out, nil
	case <-timer.C:
		return Outcome{}, fmt.Errorf("cell %s did not finish within %v: a call hung, so the device state is unknown and the probe stops", key, timeout)
	case <-ctx.Done():
		return Outcome{}, ctx.Err()
	}
}

// cellState is what one cell created, for clean-up.
type cellState struct {
	a, b      hip.Stream
	evA, evB  hip.Event
	p, extra  hip.DevPtr
	graphs    []hip.Graph
	capturing bool

	// pinned is h, allocated before the capture; hostExtra what the
	// action allocated. pages is m, unmap gives it back, registered says
	// it is registered. module is mod. legacy says work went to the
	// legacy stream.
	pinned, hostExtra []byte
	pages             []byte
	unmap             func() error
	registered        bool
	module            hip.Module
	legacy            bool
}

// cell sets up, acts and ends the capture; it runs on the capturing thread.
func (p *prober) cell(key CellKey, spin time.Duration) (out Outcome) {
	d := p.d
	out = Outcome{Key: key, Spin: spin}
	st := &cellState{}
	defer p.cleanup(st, &out)
	failed := func(what string, err error) bool {
		if err != nil {
			out.SetupErr = fmt.Errorf("%s: %w", what, err)
			return true
		}
		return false
	}

	var err error
	if st.b, err = d.StreamCreate(hip.StreamNonBlocking); failed("creating stream B", err) {
		return
	}
	aFlags := hip.StreamNonBlocking
	if key.Action.blockingCapture() {
		aFlags = 0
	}
	if st.a, err = d.StreamCreate(aFlags); failed("creating stream A", err) {
		return
	}
	if st.evB, err = d.EventCreate(hip.EventDisableTiming); failed("creating event evB", err) {
		return
	}
	if key.Action.needsCapturedEvent() {
		if st.evA, err = d.EventCreate(hip.EventDisableTiming); failed("creating event evA", err) {
			return
		}
	}
	if st.p, err = d.Malloc(bufferBytes); failed("allocating p", err) {
		return
	}
	if failed("preparing the action", p.prepare(key.Action, st)) {
		return
	}
	spinStart := time.Now()
	if failed("launching the spin kernel on B", d.LaunchKernel(p.spin, hip.D1(1), hip.D1(1), 0, st.b, uint64(spin.Nanoseconds()))) {
		return
	}
	if failed("recording evB on B", d.EventRecord(st.evB, st.b)) {
		return
	}
	if failed("beginning the capture on A", d.StreamBeginCapture(st.a, key.Capture)) {
		return
	}
	st.capturing = true
	if failed("launching the tiny kernel into the capture", d.LaunchKernel(p.tiny, hip.D1(1), hip.D1(1), 0, st.a, p.scratch, uint32(1))) {
		return
	}
	if key.Action.needsCapturedEvent() {
		if failed("recording evA inside the capture", d.EventRecord(st.evA, st.a)) {
			return
		}
	}

	code, actStart, err := p.act(key, st)
	if failed("switching the acting thread to "+key.Mode.String()+" mode", err) {
		return
	}
	out.Returns = code
	out.Late = key.Action.spinSensitive() && actStart.Sub(spinStart) >= spin

	g, err := d.StreamEndCapture(st.a)
	out.End = hip.CodeOf(err)
	if g != 0 {
		st.graphs = append(st.graphs, g)
	}
	return out
}

// act makes the cell's call on the capturing thread or on another locked
// OS thread, switching that thread's interaction mode around the call when
// the cell asks for it. It returns the call's code and when it began; err
// is set only when the mode could not be switched.
func (p *prober) act(key CellKey, st *cellState) (hip.Code, time.Time, error) {
	run := func() (code hip.Code, start time.Time, err error) {
		call := func() error {
			start = time.Now()
			code = hip.CodeOf(p.action(key.Action, st))
			return nil
		}
		if key.Mode == hip.CaptureModeGlobal {
			_ = call()
			return code, start, nil
		}
		err = hip.WithCaptureMode(p.d, key.Mode, call)
		return code, start, err
	}
	if !key.Other {
		return run()
	}
	type result struct {
		code  hip.Code
		start time.Time
		err   error
	}
	ch := make(chan result, 1)
	go func() {
		// A locked goroutine never shares the capturing goroutine's thread,
		// which is locked too.
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		c, s, err := run()
		ch <- result{c, s, err}
	}()
	r := <-ch
	return r.code, r.start, r.err
}

// mapHostPages gives m; tests count what it maps and unmaps.
var mapHostPages = hip.MapHostPages

// prepare makes, before the capture, what the action uses: h, m
// (registered, for unregistering it) or mod.
func (p *prober) prepare(a Action, st *cellState) error {
	d := p.d
	var err error
	switch a {
	case HostFree:
		st.pinned, err = d.HostAlloc(bufferBytes)
	case HostRegister, HostUnregister:
		if st.pages, st.unmap, err = mapHostPages(bufferBytes); err == nil && a == HostUnregister {
			err = d.HostRegister(st.pages)
			st.registered = err == nil
		}
	case ModuleUnload:
		st.module, err = d.ModuleLoad(Kernels())
	}
	return err
}

// action makes one call. The channel hand-off in act orders its writes to
// st before the capturing thread reads them.
func (p *prober) action(a Action, st *cellState) error {
	d := p.d
	switch a {
	case QueryCapturingStream:
		return d.StreamQuery(st.a)
	case SyncCapturingStream:
		return d.StreamSynchronize(st.a)
	case QueryOtherStream:
		return d.StreamQuery(st.b)
	case SyncOtherStream:
		return d.StreamSynchronize(st.b)
	case QueryCapturedEvent:
		return d.EventQuery(st.evA)
	case SyncCapturedEvent:
		return d.EventSynchronize(st.evA)
	case QueryUncapturedEvent:
		return d.EventQuery(st.evB)
	case SyncUncapturedEvent:
		return d.EventSynchronize(st.evB)
	case Malloc:
		q, err := d.Malloc(bufferBytes)
		if err == nil {
			st.extra = q
		}
		return err
	case Free:
		err := d.Free(st.p)
		if err == nil {
			st.p = 0
		}
		return err
	case SyncMemset:
		return d.Memset(st.p, 0, bufferBytes)
	case SyncMemcpy:
		return d.MemcpyHtoD(st.p, p.host)
	case DeviceSync:
		return d.DeviceSynchronize()
	case EndCaptureOtherThread:
		g, err := d.StreamEndCapture(st.a)
		if g != 0 {
			st.graphs = append(st.graphs, g)
		}
		return err
	}
	return p.addedAction(a, st)
}

// addedAction makes the calls of pinned host memory, module unload and
// work on the legacy stream.
func (p *prober) addedAction(a Action, st *cellState) error {
	d := p.d
	switch a {
	case HostAlloc:
		b, err := d.HostAlloc(bufferBytes)
		if err == nil {
			st.hostExtra = b
		}
		return err
	case HostFree:
		err := d.HostFree(st.pinned)
		if err == nil {
			st.pinned = nil
		}
		return err
	case HostRegister:
		err := d.HostRegister(st.pages)
		st.registered = err == nil
		return err
	case HostUnregister:
		err := d.HostUnregister(st.pages)
		st.registered = err != nil
		return err
	case ModuleUnload:
		err := d.ModuleUnload(st.module)
		if err == nil {
			st.module = 0
		}
		return err
	case LegacyStreamLaunch, LegacyStreamLaunchBlockingCapture:
		st.legacy = true
		return d.LaunchKernel(p.tiny, hip.D1(1), hip.D1(1), 0, hip.StreamLegacy, p.scratch, uint32(2))
	}
	return fmt.Errorf("unknown action %q", a)
}

// cleanup ends a capture left open, waits for B and destroys everything
// the cell made, noting each call that fails. Fresh streams per cell are
// the recovery for a stream a cell left unusable.
func (p *prober) cleanup(st *cellState, out *Outcome) {
	d := p.d
	note := func(what string, err error) {
		if err != nil {
			out.Cleanup = append(out.Cleanup, what+": "+err.Error())
		}
	}
	if st.a != 0 && st.capturing {
		status, err := d.StreamIsCapturing(st.a)
		note("asking whether A still captures", err)
		if err == nil && status != hip.CaptureStatusNone {
			g, err := d.StreamEndCapture(st.a)
			if g != 0 {
				st.graphs = append(st.graphs, g)
			}
			// Ending an invalidated capture answers 901; that is no failure.
			if err != nil && hip.CodeOf(err) != hip.ErrStreamCaptureInvalidated {
				note("ending the capture left open on A", err)
			}
		}
	}
	if st.b != 0 {
		note("synchronizing B", d.StreamSynchronize(st.b))
	}
	p.cleanupAdded(st, note)
	for _, g := range st.graphs {
		note("destroying a graph", d.GraphDestroy(g))
	}
	for _, e := range []hip.Event{st.evA, st.evB} {
		if e != 0 {
			note("destroying an event", d.EventDestroy(e))
		}
	}
	for _, q := range []hip.DevPtr{st.extra, st.p} {
		if q != 0 {
			note("freeing a buffer", d.Free(q))
		}
	}
	for _, s := range []hip.Stream{st.a, st.b} {
		if s != 0 {
			note("destroying a stream", d.StreamDestroy(s))
		}
	}
}

// cleanupAdded gives back what prepare and addedAction took, noting each
// call that fails.
func (p *prober) cleanupAdded(st *cellState, note func(what string, err error)) {
	d := p.d
	if st.legacy {
		note("synchronizing the legacy stream", d.StreamSynchronize(hip.StreamLegacy))
	}
	for _, b := range [][]byte{st.pinned, st.hostExtra} {
		if b != nil {
			note("freeing pinned host memory", d.HostFree(b))
		}
	}
	if st.registered {
		err := d.HostUnregister(st.pages)
		note("unregistering host memory", err)
		st.registered = err != nil
	}
	if st.unmap != nil && !st.registered {
		// Registered memory that would not unregister stays mapped: the
		// runtime may still touch it.
		note("unmapping host memory", st.unmap())
	}
	if st.module != 0 {
		note("unloading a module", d.ModuleUnload(st.module))
	}
}
