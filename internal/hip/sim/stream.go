package sim

import (
	"errors"
	"fmt"
	"sync"
	"time"

	"miotool/internal/hip"
)

// hwQueue is one hardware queue. Every task queued on a stream bound to it
// takes a ticket, and the queue serves tickets strictly in order, one at a
// time, as a shared ring whose packets carry the barrier bit: streams that
// share a queue run one after another, in submission order.
type hwQueue struct {
	index int
	// streams and nextTicket are guarded by Device.mu, under which every
	// task is queued.
	streams    int
	nextTicket uint64

	mu      sync.Mutex
	cond    *sync.Cond
	serving uint64 // the ticket allowed to run now
}

func newHWQueue(index int) *hwQueue {
	q := &hwQueue{index: index}
	q.cond = sync.NewCond(&q.mu)
	return q
}

// acquire blocks until ticket is served.
func (q *hwQueue) acquire(ticket uint64) {
	q.mu.Lock()
	for q.serving != ticket {
		q.cond.Wait()
	}
	q.mu.Unlock()
}

// release passes the queue to the next ticket.
func (q *hwQueue) release() { q.releaseN(1) }

// releaseN passes the queue on past n tickets: the one held and the n-1
// after it, which a fused run of tasks took at once.
func (q *hwQueue) releaseN(n int) {
	q.mu.Lock()
	q.serving += uint64(n)
	q.cond.Broadcast()
	q.mu.Unlock()
}

// nodeKind is the kind of one unit of stream work.
type nodeKind int

const (
	nodeKernel nodeKind = iota
	nodeMemset
	nodeHtoD
	nodeDtoH
	nodeDtoD
	nodeRecord
	nodeHostFunc
	nodeWait
)

// node is one unit of stream work, and also one graph node: a captured
// node is replayed by queueing it again, so it holds everything by value
// (kernel arguments included) except the host slices and functions, which
// the caller keeps alive.
type node struct {
	kind        nodeKind
	name        string // kernel name, for fault messages
	kernel      string // the entry point, as its source names it
	twin        hip.GoKernel
	fusion      *hip.Fusion // the kernel source's, if any
	grid, block hip.Dim3
	args        []hip.KernelArg
	dst, src    hip.DevPtr
	value       byte
	bytes       int
	host        []byte
	event       *event
	fn          func()
}

// task is a node queued on a stream, with what this one execution needs.
type task struct {
	node *node
	// gen and done belong to a record: the event generation it completes
	// and the channel closed when it has.
	gen  uint64
	done chan struct{}
	// wait, for a wait node, is closed when the awaited record completes.
	wait <-chan struct{}
	// ticket is the task's turn on the stream's hardware queue (not used
	// by waits, which do not occupy the queue).
	ticket uint64
}

// stream is a FIFO served by its own goroutine.
type stream struct {
	id    hip.Stream
	flags hip.StreamFlags
	dev   *Device
	queue *hwQueue

	// capture is the stream's live capture; guarded by Device.mu.
	capture *capture

	mu      sync.Mutex
	cond    *sync.Cond // broadcast on every change of tasks, pending or closed
	tasks   []task
	pending int // queued plus running
	closed  bool
}

// pushLocked queues tasks, giving each its ticket on the stream's hardware
// queue. The caller holds Device.mu, so tickets follow submission order.
func (s *stream) pushLocked(tasks ...task) {
	for i := range tasks {
		if tasks[i].node.kind != nodeWait {
			tasks[i].ticket = s.queue.nextTicket
			s.queue.nextTicket++
		}
	}
	s.mu.Lock()
	s.tasks = append(s.tasks, tasks...)
	s.pending += len(tasks)
	s.cond.Broadcast()
	s.mu.Unlock()
}

func (s *stream) busy() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.pending > 0
}

func (s *stream) waitIdle() {
	s.mu.Lock()
	for s.pending > 0 {
		s.cond.Wait()
	}
	s.mu.Unlock()
}

// shutdown lets the worker drain what is queued and exit.
func (s *stream) shutdown() {
	s.mu.Lock()
	s.closed = true
	s.cond.Broadcast()
	s.mu.Unlock()
}

func (s *stream) serve() {
	defer s.dev.workerExited(s)
	for {
		s.mu.Lock()
		for len(s.tasks) == 0 && !s.closed {
			s.cond.Wait()
		}
		if len(s.tasks) == 0 {
			s.mu.Unlock()
			return
		}
		t := s.tasks[0]
		var behind []task
		if t.node.kind == nodeKernel && t.node.fusion != nil && !s.dev.noFusion.Load() {
			behind = s.fusableLocked()
		}
		s.tasks[0] = task{}
		s.tasks = s.tasks[1:]
		s.mu.Unlock()

		ran := 1
		if len(behind) > 0 {
			ran = s.executeFused(t, behind)
		} else {
			s.execute(t)
		}

		s.mu.Lock()
		// The tasks a fused run took are still at the front: only this
		// goroutine takes tasks.
		clear(s.tasks[:ran-1])
		s.tasks = s.tasks[ran-1:]
		s.pending -= ran
		s.cond.Broadcast()
		s.mu.Unlock()
	}
}

// maxFused bounds the launches one fused run is offered.
const maxFused = 64

// fusableLocked copies the kernel tasks queued right behind the first,
// whose tickets follow its own: no other stream's work and no copy, record,
// wait or host function of this stream comes between them.
func (s *stream) fusableLocked() []task {
	first := s.tasks[0]
	var out []task
	for i := 1; i < len(s.tasks) && i < maxFused; i++ {
		t := s.tasks[i]
		if t.node.kind != nodeKernel || t.ticket != first.ticket+uint64(i) {
			break
		}
		out = append(out, t)
	}
	return out
}

// executeFused offers first and the kernels behind it to first's source's
// Fusion, holding the hardware queue for all of them, and returns how many
// ran: those the Fusion took, or first alone, run as execute runs it. A
// Fusion that panics is a launch failure of first; the device is faulted,
// so what it did not take never runs.
func (s *stream) executeFused(first task, behind []task) int {
	d := s.dev
	s.queue.acquire(first.ticket)
	if d.faulted() {
		s.queue.release()
		return 1
	}
	launches := make([]hip.FusedLaunch, 0, 1+len(behind))
	for _, t := range append([]task{first}, behind...) {
		n := t.node
		launches = append(launches, hip.FusedLaunch{Fusion: n.fusion, Kernel: n.kernel, Grid: n.grid, Block: n.block,
			Args: append([]hip.KernelArg(nil), n.args...)})
	}
	ran, err := d.runFused(first.node.fusion, launches)
	switch {
	case err != nil:
		d.setSticky(faultOf(first.node, err))
		ran = 1
	case ran >= 2 && ran <= len(launches):
		d.fused.Add(int64(ran))
	default:
		ran = 1
		if err := d.run(first.node); err != nil {
			d.setSticky(faultOf(first.node, err))
		}
	}
	s.queue.releaseN(ran)
	return ran
}

// runFused calls a Fusion, turning a panic into a launch failure.
func (d *Device) runFused(f *hip.Fusion, launches []hip.FusedLaunch) (ran int, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = &hip.Error{Op: "LaunchKernel", Code: hip.ErrLaunchFailure, Dialect: d.dialect,
				Detail: fmt.Sprintf("panicked in a fused run of %d launches: %v", len(launches), r)}
		}
	}()
	return f.Run(d.mem, launches), nil
}

// FuseLaunches turns the running of launches fused (hip.Fusion) on, as it
// is when a device opens, or off: tests compare the two, bit for bit.
func (d *Device) FuseLaunches(on bool) { d.noFusion.Store(!on) }

// FusedLaunches is how many kernel launches have run fused so far.
func (d *Device) FusedLaunches() int64 { return d.fused.Load() }

func (d *Device) workerExited(s *stream) {
	d.mu.Lock()
	delete(d.live, s)
	d.mu.Unlock()
	d.workers.Done()
}

func (s *stream) execute(t task) {
	d := s.dev
	n := t.node
	if n.kind == nodeWait {
		// A wait takes no ticket. The awaited record was queued before it,
		// so its ticket is lower than any the stream takes after the wait,
		// and the wait cannot deadlock the queue.
		<-t.wait
		return
	}
	s.queue.acquire(t.ticket)
	defer s.queue.release()
	switch n.kind {
	case nodeRecord:
		d.completeRecord(n.event, t.gen, t.done)
	case nodeHostFunc:
		if d.faulted() || d.faults.takeDrop() {
			return
		}
		d.runner.call(d, n.fn)
	default:
		if d.faulted() {
			return // a faulted device runs no more work
		}
		if err := d.run(n); err != nil {
			d.setSticky(faultOf(n, err))
		}
	}
}

// faultOf turns a failed kernel, memset or copy into the device's fault:
// the code of a runtime error (an illegal address), else a launch failure.
func faultOf(n *node, err error) (hip.Code, string) {
	what := map[nodeKind]string{
		nodeKernel: "kernel " + n.name, nodeMemset: "memset", nodeHtoD: "host-to-device copy",
		nodeDtoH: "device-to-host copy", nodeDtoD: "device-to-device copy",
	}[n.kind]
	var he *hip.Error
	if errors.As(err, &he) {
		detail := he.Detail
		if detail == "" {
			detail = he.Code.Name(he.Dialect)
		}
		return he.Code, what + ": " + detail
	}
	return hip.ErrLaunchFailure, what + ": " + err.Error()
}

// run executes a kernel, memset or copy. A bad address is an illegal
// address; a kernel that panics is a launch failure.
func (d *Device) run(n *node) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = &hip.Error{Op: "LaunchKernel", Code: hip.ErrLaunchFailure, Dialect: d.dialect,
				Detail: fmt.Sprintf("panicked: %v", r)}
		}
	}()
	switch n.kind {
	case nodeKernel:
		args := append([]hip.KernelArg(nil), n.args...)
		return n.twin(d.mem, n.grid, n.block, args)
	case nodeMemset:
		b, err := d.mem.Bytes(n.dst, n.bytes)
		if err != nil {
			return err
		}
		fill(b, n.value)
	case nodeHtoD:
		b, err := d.mem.Bytes(n.dst, n.bytes)
		if err != nil {
			return err
		}
		copy(b, n.host)
	case nodeDtoH:
		b, err := d.mem.Bytes(n.src, n.bytes)
		if err != nil {
			return err
		}
		copy(n.host, b)
	case nodeDtoD:
		src, err := d.mem.Bytes(n.src, n.bytes)
		if err != nil {
			return err
		}
		dst, err := d.mem.Bytes(n.dst, n.bytes)
		if err != nil {
			return err
		}
		copy(dst, src)
	}
	return nil
}

// StreamCreate creates a stream and binds it to the hardware queue with the
// fewest streams (the lowest index on ties), as ROCclr does at its cap.
func (d *Device) StreamCreate(flags hip.StreamFlags) (hip.Stream, error) {
	const op = "StreamCreate"
	if flags&^hip.StreamNonBlocking != 0 {
		return 0, d.errf(op, hip.ErrInvalidValue, "stream flags %#x are unknown (want 0 or %#x)", uint32(flags), uint32(hip.StreamNonBlocking))
	}
	if err := d.injectedCallFailure(op, 0); err != nil {
		return 0, err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.alive(op); err != nil {
		return 0, err
	}
	q := d.queues[0]
	for _, c := range d.queues[1:] {
		if c.streams < q.streams {
			q = c
		}
	}
	q.streams++
	return d.startStreamLocked(hip.Stream(d.newHandleLocked()), flags, q).id, nil
}

// startStreamLocked makes a stream and starts its goroutine.
func (d *Device) startStreamLocked(id hip.Stream, flags hip.StreamFlags, q *hwQueue) *stream {
	s := &stream{id: id, flags: flags, dev: d, queue: q}
	s.cond = sync.NewCond(&s.mu)
	d.streams[s.id] = s
	d.live[s] = struct{}{}
	d.workers.Add(1)
	go s.serve()
	return s
}

// legacyQueue is the index of the legacy stream's hardware queue, one of
// its own: the streams a program creates are spread over the others as if
// it were not there.
const legacyQueue = -1

// legacyLocked is hip.StreamLegacy, made on first use. It is blocking.
func (d *Device) legacyLocked() *stream {
	if d.legacy == nil {
		d.legacy = d.startStreamLocked(hip.StreamLegacy, 0, newHWQueue(legacyQueue))
	}
	return d.legacy
}

// StreamDestroy releases a stream. Work already queued still runs; a
// capture in progress is ended and its graph discarded.
func (d *Device) StreamDestroy(h hip.Stream) error {
	const op = "StreamDestroy"
	d.mu.Lock()
	defer d.mu.Unlock()
	if h == hip.StreamLegacy {
		return d.newErr(op, hip.ErrInvalidHandle, "the legacy stream cannot be destroyed")
	}
	s, err := d.streamLocked(op, h)
	if err != nil {
		return err
	}
	if s.capture != nil {
		d.dropCaptureLocked(s.capture)
	}
	delete(d.streams, h)
	s.queue.streams--
	s.shutdown()
	return nil
}

// StreamQueue is the index of the hardware queue a stream is bound to.
func (d *Device) StreamQueue(h hip.Stream) (int, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	s, err := d.streamLocked("StreamGetQueue", h)
	if err != nil {
		return 0, err
	}
	return s.queue.index, nil
}

func (d *Device) streamLocked(op string, h hip.Stream) (*stream, error) {
	if err := d.alive(op); err != nil {
		return nil, err
	}
	if h == 0 {
		return nil, d.newErr(op, hip.ErrInvalidHandle, "stream 0: the simulator does not model the null stream (hip.StreamLegacy is the legacy stream)")
	}
	if h == hip.StreamLegacy {
		return d.legacyLocked(), nil
	}
	s, ok := d.streams[h]
	if !ok {
		return nil, d.errf(op, hip.ErrInvalidHandle, "stream %d does not exist", uintptr(h))
	}
	return s, nil
}

// StreamQuery returns nil when all work queued on s is done, ErrNotReady
// while any operation is queued or running.
func (d *Device) StreamQuery(h hip.Stream) error {
	const op = "StreamQuery"
	s, err := d.guardStream(op, h, ActionQueryCapturingStream, ActionQueryOtherStream)
	if err != nil {
		return err
	}
	if err := d.stickyErr(op); err != nil {
		return err
	}
	if err := d.injectedQueryFailure(op); err != nil {
		return err
	}
	if s.busy() {
		return d.newErr(op, hip.ErrNotReady, "")
	}
	return nil
}

// StreamSynchronize blocks until everything queued on s has run.
func (d *Device) StreamSynchronize(h hip.Stream) error {
	const op = "StreamSynchronize"
	s, err := d.guardStream(op, h, ActionSyncCapturingStream, ActionSyncOtherStream)
	if err != nil {
		return err
	}
	if err := d.stickyErr(op); err != nil {
		return err
	}
	s.waitIdle()
	return d.stickyErr(op)
}

// DeviceSynchronize blocks until every stream of the device has drained.
func (d *Device) DeviceSynchronize() error {
	const op = "DeviceSynchronize"
	if err := d.alive(op); err != nil {
		return err
	}
	if err := d.guardDevice(op, ActionDeviceSync); err != nil {
		return err
	}
	if err := d.stickyErr(op); err != nil {
		return err
	}
	d.drainAll()
	return d.stickyErr(op)
}

// drainAll waits until every stream of the device (destroyed ones still
// running included) has nothing queued.
func (d *Device) drainAll() {
	d.mu.Lock()
	live := make([]*stream, 0, len(d.live))
	for s := range d.live {
		live = append(live, s)
	}
	d.mu.Unlock()
	for _, s := range live {
		s.waitIdle()
	}
}

// StreamWaitEvent makes later work on s wait until the event's latest
// record has completed.
func (d *Device) StreamWaitEvent(h hip.Stream, eh hip.Event) error {
	const op = "StreamWaitEvent"
	d.mu.Lock()
	defer d.mu.Unlock()
	s, err := d.streamLocked(op, h)
	if err != nil {
		return err
	}
	e, err := d.eventLocked(op, eh)
	if err != nil {
		return err
	}
	if err := d.stickyErr(op); err != nil {
		return err
	}
	if c := s.capture; c != nil {
		if c.invalidated {
			return d.errf(op, hip.ErrStreamCaptureInvalidated, "the capture on stream %d was invalidated by an earlier call", uintptr(h))
		}
		if e.captureLocked() != c {
			return d.errf(op, hip.ErrStreamCaptureIsolation,
				"event %d was not recorded in the capture on stream %d", uintptr(eh), uintptr(h))
		}
		// The record is an earlier node of the same linear graph, so the
		// order is already kept.
		return nil
	}
	if e.captureLocked() != nil {
		return d.errf(op, hip.ErrNotSupported,
			"event %d was recorded in an active capture; joining a capture from another stream is not modelled", uintptr(eh))
	}
	if !e.recorded || e.done {
		return nil
	}
	s.pushLocked(task{node: &node{kind: nodeWait}, wait: e.doneCh})
	return nil
}

// submit records nodes into s's capture, or queues them for execution.
func (d *Device) submit(opName string, h hip.Stream, nodes ...*node) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	s, err := d.streamLocked(opName, h)
	if err != nil {
		return err
	}
	return d.submitLocked(opName, s, nodes...)
}

func (d *Device) submitLocked(opName string, s *stream, nodes ...*node) error {
	if err := d.stickyErr(opName); err != nil {
		return err
	}
	if s == d.legacy {
		if err := d.guardLegacyLocked(opName); err != nil {
			return err
		}
	}
	if c := s.capture; c != nil {
		if c.invalidated {
			return d.errf(opName, hip.ErrStreamCaptureInvalidated,
				"the capture on stream %d was invalidated by an earlier call", uintptr(s.id))
		}
		for _, n := range nodes {
			if n.kind == nodeRecord {
				n.event.recordInCaptureLocked(c)
			}
			c.nodes = append(c.nodes, n)
		}
		return nil
	}
	tasks := make([]task, 0, len(nodes))
	for _, n := range nodes {
		t := task{node: n}
		if n.kind == nodeRecord {
			t.gen, t.done = n.event.startRecordLocked()
		}
		tasks = append(tasks, t)
	}
	s.pushLocked(tasks...)
	return nil
}

// completeRecord marks an event's record done, unless a later record
// replaced it meanwhile.
func (d *Device) completeRecord(e *event, gen uint64, done chan struct{}) {
	now := time.Now()
	d.mu.Lock()
	if e.gen == gen {
		e.done = true
		e.at = now
	}
	d.mu.Unlock()
	close(done)
}
