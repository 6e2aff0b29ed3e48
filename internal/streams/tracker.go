// Package streams is the stream tracker: a pool of disposable streams on
// which find evaluates naive solvers, the abandonment of a stream whose
// evaluation overran its deadline, and the reclaim of abandoned streams and
// the scratch they pin, under one of three policies (one per revision of
// MIOpen's fix for abandoned find streams breaking graph captures).
package streams

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"miotool/internal/hip"
)

// Policy selects how abandoned streams are reclaimed.
type Policy string

// The reclaim policies.
const (
	// Lazy sweeps abandoned streams from every kernel launch with a stream
	// query and frees their scratch inline. A launch made while any global
	// capture is in flight (or inside its own capture) has its query
	// refused, which invalidates that capture.
	Lazy Policy = "lazy"
	// Guarded keeps the launch-path sweep but skips it while the handle's
	// stream is capturing and runs it in relaxed capture mode, gated by an
	// atomic count of pinned slots. Captures survive, but a workload that
	// only replays graphs never releases the scratch.
	Guarded Policy = "guarded"
	// Worker takes reclaim off the launch path: abandon queues a host
	// callback behind the evaluation's work and a worker thread retires
	// the slot and frees its scratch when the stream reaches it.
	Worker Policy = "worker"
)

// ReclaimsOffLaunchPath reports whether the policy reclaims abandoned
// streams without help from the launch path, so that a workload which only
// replays graphs (and never launches through the library) still gets its
// scratch back.
func (p Policy) ReclaimsOffLaunchPath() bool { return p == Worker }

// Policies lists every policy in the order of the fix's history.
var Policies = []Policy{Lazy, Guarded, Worker}

// ParsePolicy accepts lazy, guarded or worker.
func ParsePolicy(s string) (Policy, error) {
	for _, p := range Policies {
		if string(p) == s {
			return p, nil
		}
	}
	return "", fmt.Errorf("unknown reclaim policy %q (want lazy, guarded or worker)", s)
}

// MaxDrainingFor is the backlog cap of abandoned, still-running streams for
// a hardware-queue count: two queues stay free for the user's own work, and
// at least one stream may drain. hwQueues <= 0 counts as HIP's default.
func MaxDrainingFor(hwQueues int) int {
	if hwQueues <= 0 {
		hwQueues = hip.DefaultHWQueues
	}
	return max(1, hwQueues-2)
}

// DefaultMaxDraining reads GPU_MAX_HW_QUEUES once and derives the cap.
func DefaultMaxDraining() int {
	q, _ := hip.HWQueuesFromEnv()
	return MaxDrainingFor(q)
}

// Pin is what an abandoned slot keeps alive until its stream drains: a
// scratch buffer the evaluation writes to. The last Release frees it.
type Pin interface {
	Bytes() int
	Release() error
}

// Counters are the tracker's figures, printed by the tool.
type Counters struct {
	Acquired            int64
	Released            int64
	Abandoned           int64
	ReclaimedByCallback int64 // retired by the worker on the slot's own callback
	ReclaimedByBackstop int64 // retired without it: by Acquire, a launch-path sweep, or Close
	ReclaimedByLaunch   int64 // of which by a launch-path sweep (lazy, guarded)
	CallbackQueueFailed int64
	LateCallbacks       int64 // callbacks whose ticket no longer matched (slot already retired or reused)
	ScratchBytesPinned  int64 // bytes held by abandoned slots right now (a shared buffer counts per slot)
	ScratchFreed        int64 // pins released without error (a shared buffer counts per slot)
	FreeErrors          int64 // pin releases and done-event destroys that failed
	WorkerWakeups       int64
	// LastAbandonedFor is, for the slot retired last, the time from its
	// Abandon to its retirement: how long the abandoned work went on
	// (plus the reclaim's own delay).
	LastAbandonedFor time.Duration
	Draining         int
	Streams          int
}

type slotState int

const (
	slotFree slotState = iota
	slotInUse
	slotDraining
)

// Slot is one disposable stream lent by Acquire.
type Slot struct {
	stream hip.Stream
	state  slotState
	pin    Pin
	done   hip.Event
	ticket uint64
	// abandonedAt is when Abandon gave the slot up, to measure how long
	// the abandoned work went on.
	abandonedAt time.Time
}

// Stream is the slot's stream; valid until the slot is released or abandoned.
func (s *Slot) Stream() hip.Stream { return s.stream }

// ErrClosed is returned by Acquire after Close.
var ErrClosed = errors.New("stream tracker is closed")

// Options configure a Tracker.
type Options struct {
	Policy Policy
	// MaxDraining caps abandoned, still-running slots; 0 derives it from
	// GPU_MAX_HW_QUEUES.
	MaxDraining int
	// RetestEvery is the backstop re-test period of a waiting Acquire
	// (10 ms when zero).
	RetestEvery time.Duration
}

// Tracker owns the disposable streams of one handle.
type Tracker struct {
	dev         hip.Device
	policy      Policy
	maxDraining int
	retest      time.Duration

	mu       sync.Mutex
	slots    []*Slot
	draining int
	tickets  uint64
	closed   bool
	// retired signals Acquire waiters that a slot left the backlog.
	retired chan struct{}

	// pinned counts slots that pin scratch; the guarded launch path reads
	// it without the lock.
	pinned      atomic.Int64
	pinnedBytes atomic.Int64
	lastDrained atomic.Int64 // nanoseconds; see Counters.LastAbandonedFor

	c counters
	// firstRefusal is the first error a launch-path sweep met, kept so a
	// report can name the call that broke a capture.
	refusalMu    sync.Mutex
	firstRefusal error

	// abandons counts Abandon calls between marking a slot draining and
	// queuing its callback; Close waits for them so that every callback that
	// will ever be queued is behind the streams it synchronizes.
	abandons sync.WaitGroup

	// Worker state. The host callback only appends a ticket and pokes the
	// worker; everything else happens on the worker's own thread.
	workerOnce sync.Once
	cbMu       sync.Mutex
	delivered  []delivery
	toFree     []Pin
	// workerAlive is true from the worker's start until it has taken the
	// last of toFree; dispose hands pins over only while it holds.
	workerAlive bool
	wake        chan struct{}
	stop        chan struct{}
	workerDone  chan struct{}
	workerErr   error

	// afterDrain, set by tests before the first Abandon, is told after each
	// batch the worker handled: whether each delivered ticket was late, and
	// how many pins (done events included) it released.
	afterDrain func(late []bool, pins int)
}

// delivery is one callback's news: the slot it was queued on and the ticket
// of the abandonment it belongs to.
type delivery struct {
	slot   *Slot
	ticket uint64
}

type counters struct {
	acquired, released, abandoned, byCallback, byBackstop, byLaunch atomic.Int64
	queueFailed, late, freed, freeErrors, wakeups                   atomic.Int64
}

// New makes a tracker for dev.
func New(dev hip.Device, opts Options) (*Tracker, error) {
	if dev == nil {
		return nil, errors.New("stream tracker needs a device, got nil")
	}
	switch opts.Policy {
	case Lazy, Guarded, Worker:
	case "":
		opts.Policy = Worker
	default:
		return nil, fmt.Errorf("unknown reclaim policy %q", opts.Policy)
	}
	if opts.MaxDraining < 0 {
		return nil, fmt.Errorf("backlog cap MaxDraining must be positive (or 0 for the %s default), got %d", hip.EnvHWQueues, opts.MaxDraining)
	}
	if opts.MaxDraining == 0 {
		opts.MaxDraining = DefaultMaxDraining()
	}
	if opts.RetestEvery <= 0 {
		opts.RetestEvery = 10 * time.Millisecond
	}
	t := &Tracker{
		dev:         dev,
		policy:      opts.Policy,
		maxDraining: opts.MaxDraining,
		retest:      opts.RetestEvery,
		retired:     make(chan struct{}),
		wake:        make(chan struct{}, 1),
		stop:        make(chan struct{}),
		workerDone:  make(chan struct{}),
	}
	return t, nil
}

// Policy is the tracker's reclaim policy.
func (t *Tracker) Policy() Policy { return t.policy }

// MaxDraining is the backlog cap.
func (t *Tracker) MaxDraining() int { return t.maxDraining }

// Counters returns a snapshot of the tracker's figures.
func (t *Tracker) Counters() Counters {
	t.mu.Lock()
	draining, n := t.draining, len(t.slots)
	t.mu.Unlock()
	return Counters{
		Acquired:            t.c.acquired.Load(),
		Released:            t.c.released.Load(),
		Abandoned:           t.c.abandoned.Load(),
		ReclaimedByCallback: t.c.byCallback.Load(),
		ReclaimedByBackstop: t.c.byBackstop.Load(),
		ReclaimedByLaunch:   t.c.byLaunch.Load(),
		CallbackQueueFailed: t.c.queueFailed.Load(),
		LateCallbacks:       t.c.late.Load(),
		ScratchBytesPinned:  t.pinnedBytes.Load(),
		ScratchFreed:        t.c.freed.Load(),
		FreeErrors:          t.c.freeErrors.Load(),
		WorkerWakeups:       t.c.wakeups.Load(),
		LastAbandonedFor:    time.Duration(t.lastDrained.Load()),
		Draining:            draining,
		Streams:             n,
	}
}

// HasPinned reports, without locking, whether any abandoned slot still pins
// scratch. It is the guarded launch path's gate.
func (t *Tracker) HasPinned() bool { return t.pinned.Load() > 0 }

// Acquire lends a clean slot. It first retires finished abandoned slots by
// their done events (the backstop for a callback that is late or lost); at
// the backlog cap it waits for the worker's signal, re-testing every
// RetestEvery. A query answering anything but success or not-ready is the
// device's sticky error: Acquire returns it rather than wait on a backlog
// that cannot drain, and leaves the slot and its scratch where they are
// (an error does not prove the kernel stopped). Acquire returns an error
// wrapping ctx.Err() when ctx ends while it waits.
func (t *Tracker) Acquire(ctx context.Context) (*Slot, error) {
	t.mu.Lock()
	for {
		if t.closed {
			t.mu.Unlock()
			return nil, ErrClosed
		}
		freed, _, err := t.sweepLocked()
		if err != nil {
			t.mu.Unlock()
			t.dispose(freed)
			return nil, err
		}
		if len(freed) > 0 {
			// Under the worker policy Acquire never runs a deallocator: the
			// worker frees. The older policies have no worker, so the
			// caller frees, outside the lock.
			t.mu.Unlock()
			t.dispose(freed)
			t.mu.Lock()
			continue
		}
		if t.draining < t.maxDraining {
			s, err := t.takeFreeLocked()
			t.mu.Unlock()
			if err != nil {
				return nil, err
			}
			t.c.acquired.Add(1)
			return s, nil
		}
		ch := t.retired
		t.mu.Unlock()
		timer := time.NewTimer(t.retest)
		select {
		case <-ch:
		case <-timer.C:
		case <-ctx.Done():
			timer.Stop()
			return nil, fmt.Errorf("waiting for an abandoned stream to drain (%d of %d draining): %w", t.Counters().Draining, t.maxDraining, ctx.Err())
		}
		timer.Stop()
		t.mu.Lock()
	}
}

func (t *Tracker) takeFreeLocked() (*Slot, error) {
	for _, s := range t.slots {
		if s.state == slotFree {
			s.state = slotInUse
			return s, nil
		}
	}
	st, err := t.dev.StreamCreate(hip.StreamNonBlocking)
	if err != nil {
		return nil, fmt.Errorf("create a tracker stream: %w", err)
	}
	s := &Slot{stream: st, state: slotInUse}
	t.slots = append(t.slots, s)
	return s, nil
}

// sweepLocked retires every draining slot whose work has completed: by its
// done event, or, for a slot abandoned without one, by a query of its
// stream. Only success retires; not-ready keeps waiting; anything else is
// the device's sticky error and is returned. The pins of retired slots come
// back for disposal outside the lock, with the number of slots retired.
func (t *Tracker) sweepLocked() ([]Pin, int, error) {
	var freed []Pin
	retired := 0
	for _, s := range t.slots {
		if s.state != slotDraining {
			continue
		}
		var err error
		if s.done != 0 {
			err = t.dev.EventQuery(s.done)
		} else {
			err = t.dev.StreamQuery(s.stream)
		}
		switch {
		case err == nil:
			freed = append(freed, t.retireLocked(s)...)
			retired++
			t.c.byBackstop.Add(1)
		case hip.IsNotReady(err):
		default:
			return freed, retired, fmt.Errorf("abandoned stream's work: %w", err)
		}
	}
	return freed, retired, nil
}

// retireLocked returns a draining slot to the pool. Its pin and its done
// event come back for disposal outside the lock.
func (t *Tracker) retireLocked(s *Slot) []Pin {
	var out []Pin
	if s.pin != nil {
		out = append(out, s.pin)
		t.pinned.Add(-1)
		t.pinnedBytes.Add(-int64(s.pin.Bytes()))
	}
	if s.done != 0 {
		out = append(out, eventPin{t.dev, s.done})
	}
	if !s.abandonedAt.IsZero() {
		t.lastDrained.Store(int64(time.Since(s.abandonedAt)))
	}
	s.pin, s.done, s.ticket, s.state, s.abandonedAt = nil, 0, 0, slotFree, time.Time{}
	t.draining--
	close(t.retired)
	t.retired = make(chan struct{})
	return out
}

// eventPin destroys a done event the tracker took over with Abandon.
type eventPin struct {
	dev hip.Device
	ev  hip.Event
}

func (e eventPin) Bytes() int     { return 0 }
func (e eventPin) Release() error { return e.dev.EventDestroy(e.ev) }

// dispose frees pins: on the worker while it runs (the worker policy),
// else here. The hand-over and the worker's exit share cbMu, so no pin is
// left behind in a queue nobody drains.
func (t *Tracker) dispose(ps []Pin) {
	if len(ps) == 0 {
		return
	}
	if t.policy == Worker {
		t.cbMu.Lock()
		if t.workerAlive {
			t.toFree = append(t.toFree, ps...)
			t.cbMu.Unlock()
			t.poke()
			return
		}
		t.cbMu.Unlock()
	}
	for _, p := range ps {
		t.release(p)
	}
}

func (t *Tracker) release(p Pin) {
	if err := p.Release(); err != nil {
		t.c.freeErrors.Add(1)
		return
	}
	if _, isEvent := p.(eventPin); !isEvent {
		t.c.freed.Add(1)
	}
}

// Pin attaches a buffer the slot's work writes to; the slot keeps it alive
// if abandoned. The tracker takes over the caller's reference. A slot that
// is not lent out (released, abandoned, or never acquired) takes no pin: p
// is released at once rather than swapped under a kernel that may use the
// old one.
func (t *Tracker) Pin(s *Slot, p Pin) {
	t.mu.Lock()
	if s.state != slotInUse {
		t.mu.Unlock()
		t.release(p)
		return
	}
	old := s.pin
	s.pin = p
	t.mu.Unlock()
	if old != nil {
		t.release(old)
	}
}

// Release returns a slot whose work the caller saw finish. It comes back
// clean: pin dropped (outside the lock), no done event, no ticket.
func (t *Tracker) Release(s *Slot) {
	t.mu.Lock()
	if s.state != slotInUse {
		t.mu.Unlock()
		return
	}
	p := s.pin
	s.pin, s.done, s.ticket, s.state = nil, 0, 0, slotFree
	close(t.retired)
	t.retired = make(chan struct{})
	t.mu.Unlock()
	t.c.released.Add(1)
	if p != nil {
		t.release(p)
	}
}

// Abandon gives up a slot whose work is still running. done, when non-zero,
// is an event recorded after the work (the evaluation's stop event); it lets
// Acquire reclaim the slot if the callback is late or lost, and the tracker
// destroys it when the slot retires. Without one, the backstop queries the
// slot's stream instead, which a held callback keeps busy. Under the worker
// policy a host callback carrying a ticket is queued behind the work.
// After Close the tracker frees the pin and the done event at once.
func (t *Tracker) Abandon(s *Slot, done hip.Event) {
	t.mu.Lock()
	if t.closed {
		p := s.pin
		s.pin = nil
		t.mu.Unlock()
		if p != nil {
			t.release(p)
		}
		if done != 0 {
			t.release(eventPin{t.dev, done})
		}
		return
	}
	if s.state != slotInUse {
		t.mu.Unlock()
		return
	}
	t.tickets++
	ticket := t.tickets
	s.state, s.done, s.ticket, s.abandonedAt = slotDraining, done, ticket, time.Now()
	t.draining++
	if s.pin != nil {
		t.pinned.Add(1)
		t.pinnedBytes.Add(int64(s.pin.Bytes()))
	}
	stream := s.stream
	t.abandons.Add(1)
	t.mu.Unlock()
	defer t.abandons.Done()
	t.c.abandoned.Add(1)
	if t.policy != Worker {
		return
	}
	t.startWorker()
	if err := t.dev.LaunchHostFunc(stream, func() { t.onCallback(s, ticket) }); err != nil {
		// The callback will never run; the ticket stays with the slot and
		// the done event (or a stream query) is its way home: Acquire's
		// backstop, or Close.
		t.c.queueFailed.Add(1)
	}
}

// onCallback runs on the runtime's callback thread. It makes no runtime
// call and never blocks: it records the delivery and pokes the worker.
func (t *Tracker) onCallback(s *Slot, ticket uint64) {
	t.cbMu.Lock()
	t.delivered = append(t.delivered, delivery{s, ticket})
	t.cbMu.Unlock()
	t.poke()
}

func (t *Tracker) poke() {
	select {
	case t.wake <- struct{}{}:
	default:
	}
}

func (t *Tracker) startWorker() {
	t.workerOnce.Do(func() {
		ready := make(chan struct{})
		t.cbMu.Lock()
		t.workerAlive = true
		t.cbMu.Unlock()
		go t.work(ready)
		<-ready
	})
}

// work is the worker: its own OS thread, in relaxed capture mode, so its
// event destroys and frees cannot invalidate anyone's capture. The thread's
// previous mode is restored before it goes back to the pool; if that fails
// the thread stays locked and exits with the goroutine, so no other
// goroutine inherits the relaxed mode.
func (t *Tracker) work(ready chan<- struct{}) {
	defer close(t.workerDone)
	runtime.LockOSThread()
	prev, err := t.dev.ThreadExchangeCaptureMode(hip.CaptureModeRelaxed)
	if err != nil {
		t.workerErr = fmt.Errorf("stream tracker worker: set relaxed capture mode: %w", err)
	}
	close(ready)
	for running := true; running; {
		select {
		case <-t.wake:
			t.c.wakeups.Add(1)
		case <-t.stop:
			running = false
		}
		t.drainQueues()
	}
	// Pins handed over after the last drain are freed here; later ones are
	// freed by whoever disposes them.
	t.cbMu.Lock()
	t.workerAlive = false
	t.cbMu.Unlock()
	t.drainQueues()
	if err == nil {
		if _, rerr := t.dev.ThreadExchangeCaptureMode(prev); rerr == nil {
			runtime.UnlockOSThread()
		}
	}
}

// drainQueues retires the slots named by delivered tickets and frees
// pending pins, outside the tracker lock. A ticket that no longer matches
// its slot (retired by the backstop, perhaps reused since) is late and
// retires nothing.
func (t *Tracker) drainQueues() {
	for {
		t.cbMu.Lock()
		batch, pins := t.delivered, t.toFree
		t.delivered, t.toFree = nil, nil
		t.cbMu.Unlock()
		if len(batch) == 0 && len(pins) == 0 {
			return
		}
		var late []bool
		if len(batch) > 0 {
			late = make([]bool, len(batch))
			t.mu.Lock()
			for i, d := range batch {
				if d.slot.state != slotDraining || d.slot.ticket != d.ticket {
					late[i] = true
					t.c.late.Add(1)
					continue
				}
				pins = append(pins, t.retireLocked(d.slot)...)
				t.c.byCallback.Add(1)
			}
			t.mu.Unlock()
		}
		for _, p := range pins {
			t.release(p)
		}
		if t.afterDrain != nil {
			t.afterDrain(late, len(pins))
		}
	}
}

// SweepFromLaunch is the lazy policy's launch-path reclaim: poll every
// abandoned stream with a stream query and free the scratch of those that
// finished, inline. It returns the first refused query, which is how a
// capture in flight learns of it (the refusal invalidates the capture).
func (t *Tracker) SweepFromLaunch() error {
	t.mu.Lock()
	var freed []Pin
	var first error
	for _, s := range t.slots {
		if s.state != slotDraining {
			continue
		}
		err := t.dev.StreamQuery(s.stream)
		switch {
		case err == nil:
			freed = append(freed, t.retireLocked(s)...)
			t.c.byBackstop.Add(1)
			t.c.byLaunch.Add(1)
		case hip.IsNotReady(err):
		default:
			if first == nil {
				first = err
			}
		}
	}
	t.mu.Unlock()
	for _, p := range freed {
		t.release(p)
	}
	t.noteRefusal(first)
	return first
}

func (t *Tracker) noteRefusal(err error) {
	if err == nil {
		return
	}
	t.refusalMu.Lock()
	if t.firstRefusal == nil {
		t.firstRefusal = err
	}
	t.refusalMu.Unlock()
}

// FirstSweepRefusal is the first error a launch-path sweep met, if any.
func (t *Tracker) FirstSweepRefusal() error {
	t.refusalMu.Lock()
	defer t.refusalMu.Unlock()
	return t.firstRefusal
}

// SweepGuarded is the guarded policy's launch-path reclaim: nothing at all
// unless some slot pins scratch (one atomic load), skipped while the
// handle's stream is capturing, and otherwise done by done event in relaxed
// capture mode so that a capture on another stream or thread survives.
func (t *Tracker) SweepGuarded(handleStream hip.Stream) error {
	if !t.HasPinned() {
		return nil
	}
	st, err := t.dev.StreamIsCapturing(handleStream)
	if err != nil {
		t.noteRefusal(err)
		return err
	}
	if st != hip.CaptureStatusNone {
		return nil
	}
	return hip.WithCaptureMode(t.dev, hip.CaptureModeRelaxed, func() error {
		t.mu.Lock()
		freed, retired, err := t.sweepLocked()
		t.mu.Unlock()
		t.c.byLaunch.Add(int64(retired))
		for _, p := range freed {
			t.release(p)
		}
		t.noteRefusal(err)
		return err
	})
}

// Close tears the tracker down: it synchronizes every owned stream, lets
// every queued callback run, joins the worker, frees what is still pinned
// and destroys the streams. It returns the first error met. Acquire calls
// waiting at the cap return ErrClosed; a later Abandon frees what it is
// given.
func (t *Tracker) Close() error {
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		return nil
	}
	t.closed = true
	close(t.retired)
	t.retired = make(chan struct{})
	slots := append([]*Slot(nil), t.slots...)
	t.mu.Unlock()

	var first error
	keep := func(err error) {
		if err != nil && first == nil {
			first = err
		}
	}
	// An Abandon that got in before closed was set queues its callback
	// before the streams are synchronized.
	t.abandons.Wait()
	for _, s := range slots {
		keep(t.dev.StreamSynchronize(s.stream))
	}
	t.cbMu.Lock()
	started := t.workerAlive
	t.cbMu.Unlock()
	if started {
		// A host function holds its stream until it returns, so with every
		// stream drained each callback that will ever run has run; the
		// worker handles what they delivered before it exits. A callback the
		// runtime dropped never arrives: its slot is retired below.
		close(t.stop)
		<-t.workerDone
		keep(t.workerErr)
	}
	t.mu.Lock()
	var pins []Pin
	for _, s := range t.slots {
		if s.state == slotDraining {
			pins = append(pins, t.retireLocked(s)...)
			t.c.byBackstop.Add(1)
		} else if s.pin != nil {
			pins = append(pins, s.pin)
			s.pin = nil
		}
	}
	t.slots = nil
	t.mu.Unlock()
	for _, p := range pins {
		t.release(p)
	}
	for _, s := range slots {
		keep(t.dev.StreamDestroy(s.stream))
	}
	return first
}
