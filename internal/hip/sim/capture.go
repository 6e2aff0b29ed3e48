package sim

import (
	"fmt"
	"slices"
	"syscall"

	"miotool/internal/hip"
)

// capture is one stream capture, from begin until it ends or is torn
// down. Guarded by Device.mu.
type capture struct {
	stream      *stream
	mode        hip.CaptureMode
	originTid   int
	invalidated bool
	ended       bool
	nodes       []*node
}

func (c *capture) status() hip.CaptureStatus {
	if c.invalidated {
		return hip.CaptureStatusInvalidated
	}
	return hip.CaptureStatusActive
}

// graph is a recorded linear graph; an instantiated graph shares its nodes,
// which are never modified after the capture ends.
type graph struct {
	nodes []*node
}

// threadID is the calling OS thread, the identity both runtimes key capture
// state by.
func threadID() int { return syscall.Gettid() }

func validMode(m hip.CaptureMode) bool {
	return m == hip.CaptureModeGlobal || m == hip.CaptureModeThreadLocal || m == hip.CaptureModeRelaxed
}

// threadModeLocked is the interaction mode of an OS thread; global unless
// it exchanged it.
func (d *Device) threadModeLocked(tid int) hip.CaptureMode {
	if m, ok := d.threadModes[tid]; ok {
		return m
	}
	return hip.CaptureModeGlobal
}

// ThreadExchangeCaptureMode sets the calling OS thread's interaction mode
// and returns the previous one.
func (d *Device) ThreadExchangeCaptureMode(mode hip.CaptureMode) (hip.CaptureMode, error) {
	const op = "ThreadExchangeCaptureMode"
	if !validMode(mode) {
		return 0, d.errf(op, hip.ErrInvalidValue, "capture mode %d is unknown (want 0 global, 1 thread-local or 2 relaxed)", int(mode))
	}
	tid := threadID()
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.alive(op); err != nil {
		return 0, err
	}
	prev := d.threadModeLocked(tid)
	if mode == hip.CaptureModeGlobal {
		delete(d.threadModes, tid)
	} else {
		d.threadModes[tid] = mode
	}
	return prev, nil
}

// guardStream looks up a stream and applies the capture rules to a query or
// synchronize of it: capAct if it is capturing (concerning only its own
// capture), otherAct if not (concerning every live capture).
func (d *Device) guardStream(op string, h hip.Stream, capAct, otherAct Action) (*stream, error) {
	tid := threadID()
	d.mu.Lock()
	defer d.mu.Unlock()
	s, err := d.streamLocked(op, h)
	if err != nil {
		return nil, err
	}
	if s.capture != nil {
		return s, d.applyRulesLocked(op, capAct, tid, []*capture{s.capture})
	}
	if s == d.legacy && d.dialect == hip.DialectHIP {
		return s, nil // HIP makes no capture check of the null or legacy stream
	}
	return s, d.applyRulesLocked(op, otherAct, tid, d.captures)
}

// guardEvent does the same for an event: capAct if it was recorded in a
// live capture, uncapAct otherwise. HIP does not check an event that was
// never recorded.
func (d *Device) guardEvent(op string, h hip.Event, capAct, uncapAct Action) (*event, error) {
	tid := threadID()
	d.mu.Lock()
	defer d.mu.Unlock()
	e, err := d.eventLocked(op, h)
	if err != nil {
		return nil, err
	}
	if c := e.captureLocked(); c != nil {
		return e, d.applyRulesLocked(op, capAct, tid, []*capture{c})
	}
	if !e.recorded && d.dialect == hip.DialectHIP {
		return e, nil
	}
	return e, d.applyRulesLocked(op, uncapAct, tid, d.captures)
}

// guardLegacyLocked applies the rules to work queued on the legacy
// stream, which concerns every live capture: as the legacy-stream action
// of a non-blocking capture, or of a blocking one. Nothing is queued when
// any refuses.
func (d *Device) guardLegacyLocked(op string) error {
	var nonBlocking, blocking []*capture
	for _, c := range d.captures {
		if c.stream.flags&hip.StreamNonBlocking != 0 {
			nonBlocking = append(nonBlocking, c)
		} else {
			blocking = append(blocking, c)
		}
	}
	tid := threadID()
	err := d.applyRulesLocked(op, ActionLegacyStreamLaunchBlockingCapture, tid, blocking)
	if err2 := d.applyRulesLocked(op, ActionLegacyStreamLaunch, tid, nonBlocking); err == nil {
		err = err2
	}
	return err
}

// guardDevice applies the rules to a device-wide action, which concerns
// every live capture.
func (d *Device) guardDevice(op string, act Action) error {
	tid := threadID()
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.alive(op); err != nil {
		return err
	}
	return d.applyRulesLocked(op, act, tid, d.captures)
}

// applyRulesLocked evaluates a call against every capture it concerns,
// applies the effect of every refusing cell and returns the first refusal.
func (d *Device) applyRulesLocked(op string, act Action, tid int, concerned []*capture) error {
	if len(concerned) == 0 {
		return nil
	}
	tm := d.threadModeLocked(tid)
	var first error
	// Effects may change d.captures, which concerned can alias.
	for _, c := range slices.Clone(concerned) {
		if c.ended {
			continue
		}
		k := Key{Action: act, ThreadMode: tm, CaptureMode: c.mode, SameThread: c.originTid == tid}
		r, ok := d.rules.Lookup(k)
		if !ok || !r.Refused {
			continue
		}
		switch r.Effect {
		case EffectInvalidate:
			c.invalidated = true
		case EffectInvalidateAll:
			for _, o := range d.captures {
				o.invalidated = true
			}
		case EffectTeardown:
			d.dropCaptureLocked(c)
		}
		if first == nil {
			first = d.newErr(op, r.Code, refusalDetail(k, c, r))
		}
	}
	return first
}

func refusalDetail(k Key, c *capture, r Rule) string {
	who := "another thread"
	if k.SameThread {
		who = "this thread"
	}
	what := map[Effect]string{
		EffectNone:          "the capture is left as it was",
		EffectInvalidate:    "the capture is invalidated",
		EffectInvalidateAll: "every capture is invalidated",
		EffectTeardown:      "the capture is torn down",
	}[r.Effect]
	return fmt.Sprintf("%s refused by the %s-mode capture on stream %d begun by %s (caller's mode %s); %s",
		k.Action, c.mode, uintptr(c.stream.id), who, k.ThreadMode, what)
}

// dropCaptureLocked ends a capture without a graph: its stream's status
// goes back to none.
func (d *Device) dropCaptureLocked(c *capture) {
	c.ended = true
	if c.stream.capture == c {
		c.stream.capture = nil
	}
	d.captures = slices.DeleteFunc(d.captures, func(o *capture) bool { return o == c })
}

// StreamBeginCapture starts recording work queued on s into a graph
// instead of running it.
func (d *Device) StreamBeginCapture(h hip.Stream, mode hip.CaptureMode) error {
	const op = "StreamBeginCapture"
	if !validMode(mode) {
		return d.errf(op, hip.ErrInvalidValue, "capture mode %d is unknown (want 0 global, 1 thread-local or 2 relaxed)", int(mode))
	}
	tid := threadID()
	d.mu.Lock()
	defer d.mu.Unlock()
	if h == hip.StreamLegacy {
		return d.newErr(op, hip.ErrStreamCaptureUnsupported, "a capture cannot begin on the legacy stream")
	}
	s, err := d.streamLocked(op, h)
	if err != nil {
		return err
	}
	if c := s.capture; c != nil {
		// HIP refuses only an active capture; an invalidated one is
		// replaced. CUDA requires end capture first.
		if !c.invalidated || d.dialect == hip.DialectCUDA {
			return d.errf(op, hip.ErrIllegalState, "stream %d is already capturing (status %s)", uintptr(h), c.status())
		}
		d.dropCaptureLocked(c)
	}
	c := &capture{stream: s, mode: mode, originTid: tid}
	s.capture = c
	d.captures = append(d.captures, c)
	return nil
}

// StreamEndCapture ends the capture on s and returns its graph. A capture
// that was invalidated ends with (0, ErrStreamCaptureInvalidated); either
// way the stream's status is none afterwards. A non-relaxed capture must
// be ended on the thread that began it: what a wrong-thread end does is in
// the rule table.
func (d *Device) StreamEndCapture(h hip.Stream) (hip.Graph, error) {
	const op = "StreamEndCapture"
	tid := threadID()
	d.mu.Lock()
	defer d.mu.Unlock()
	s, err := d.streamLocked(op, h)
	if err != nil {
		return 0, err
	}
	c := s.capture
	if c == nil {
		return 0, d.errf(op, hip.ErrIllegalState, "stream %d is not capturing", uintptr(h))
	}
	if err := d.applyRulesLocked(op, ActionEndCaptureOtherThread, tid, []*capture{c}); err != nil {
		return 0, err
	}
	d.dropCaptureLocked(c)
	if c.invalidated {
		return 0, d.errf(op, hip.ErrStreamCaptureInvalidated,
			"the capture on stream %d was invalidated by an earlier call (that call's error names it)", uintptr(h))
	}
	g := hip.Graph(d.newHandleLocked())
	d.graphs[g] = &graph{nodes: c.nodes}
	return g, nil
}

// StreamIsCapturing reports the capture status of s.
func (d *Device) StreamIsCapturing(h hip.Stream) (hip.CaptureStatus, error) {
	const op = "StreamIsCapturing"
	d.mu.Lock()
	defer d.mu.Unlock()
	s, err := d.streamLocked(op, h)
	if err != nil {
		return hip.CaptureStatusNone, err
	}
	if s.capture == nil {
		return hip.CaptureStatusNone, nil
	}
	return s.capture.status(), nil
}

// GraphInstantiate makes an executable graph.
func (d *Device) GraphInstantiate(g hip.Graph) (hip.GraphExec, error) {
	const op = "GraphInstantiate"
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.alive(op); err != nil {
		return 0, err
	}
	gr, ok := d.graphs[g]
	if !ok {
		return 0, d.errf(op, hip.ErrInvalidHandle, "graph %d does not exist", uintptr(g))
	}
	ge := hip.GraphExec(d.newHandleLocked())
	d.execs[ge] = &graph{nodes: gr.nodes}
	return ge, nil
}

// GraphLaunch queues the graph's nodes on s, in order. Launched into a
// capturing stream, they are recorded into that capture.
func (d *Device) GraphLaunch(ge hip.GraphExec, h hip.Stream) error {
	const op = "GraphLaunch"
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.alive(op); err != nil {
		return err
	}
	gr, ok := d.execs[ge]
	if !ok {
		return d.errf(op, hip.ErrInvalidHandle, "executable graph %d does not exist", uintptr(ge))
	}
	s, err := d.streamLocked(op, h)
	if err != nil {
		return err
	}
	return d.submitLocked(op, s, gr.nodes...)
}

// GraphExecDestroy releases an executable graph.
func (d *Device) GraphExecDestroy(ge hip.GraphExec) error {
	const op = "GraphExecDestroy"
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.alive(op); err != nil {
		return err
	}
	if _, ok := d.execs[ge]; !ok {
		return d.errf(op, hip.ErrInvalidHandle, "executable graph %d does not exist", uintptr(ge))
	}
	delete(d.execs, ge)
	return nil
}

// GraphDestroy releases a graph; graphs instantiated from it stay valid.
func (d *Device) GraphDestroy(g hip.Graph) error {
	const op = "GraphDestroy"
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.alive(op); err != nil {
		return err
	}
	if _, ok := d.graphs[g]; !ok {
		return d.errf(op, hip.ErrInvalidHandle, "graph %d does not exist", uintptr(g))
	}
	delete(d.graphs, g)
	return nil
}
