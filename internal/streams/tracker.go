// Package streams is the stream tracker: a pool of disposable streams on
// which find evaluates naive solvers, the abandonment of a stream whose
// evaluation overran its deadline, and the reclaim of abandoned streams and
// the scratch they pin, under one of four policies (three revisions of
// MIOpen's fix for abandoned find streams breaking graph captures, and a
// poller beyond it).
package streams

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"miotool/internal/hip"
)

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
// scratch buffer the evaluation writes to. The last Release frees it. A
// Release that failed left the memory allocated; calling Release again
// retries the free (the tracker does, once, at Close).
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
	ReclaimedByPoller   int64 // retired by the poller on the slot's done event
	ReclaimedByBackstop int64 // retired otherwise: by Acquire, a launch-path sweep, or Close
	ReclaimedByLaunch   int64 // of which by a launch-path sweep (lazy, guarded)
	CallbackQueueFailed int64
	LateCallbacks       int64 // callbacks whose slot was already retired (and perhaps reused)
	ScratchBytesPinned  int64 // bytes held by abandoned slots right now (a shared buffer counts per slot)
	ScratchFreed        int64 // pins released without error (a shared buffer counts per slot)
	FreeErrors          int64 // pin releases and done-event destroys that failed
	// LeakedBytes are the bytes of pins whose free failed and failed again
	// when Close retried it, or that Close could not free because their
	// streams were still busy at its deadline: still on the device.
	LeakedBytes   int64
	WorkerWakeups int64 // wake-ups of the worker or the poller
	// AbandonWakes counts Abandons that found the worker or the poller
	// asleep and woke it: a system call on the caller's thread (see
	// Options.Spin).
	AbandonWakes int64
	Polls        int64 // done-event (or stream) queries made by the poller
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
	pin    Pin          // while lent out
	rec    *abandonment // while draining
	// abandonBy is when the borrower expects to abandon the slot (a
	// monoNow reading; 0: not announced), while lent out. See AbandonBy.
	abandonBy int64
}

// Stream is the slot's stream; valid until the slot is released or abandoned.
func (s *Slot) Stream() hip.Stream { return s.stream }

// abandonment is one Abandon of a slot. It is also the ticket its host
// callback carries: a callback whose abandonment was already retired (by
// the backstop, the slot perhaps lent and abandoned again since) is late
// and retires nothing.
type abandonment struct {
	slot  *Slot
	pin   Pin
	done  hip.Event
	at    int64 // monoNow at Abandon
	state atomic.Int32
}

// Abandonment states. Whoever moves one from draining to claimed retires
// it; the poller holds it in polling while it queries the done event, so
// that nobody destroys the event under the query.
const (
	recDraining int32 = iota
	recPolling
	recClaimed
)

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
	// Spin is how long the reclaim thread spins before it sleeps: the
	// worker on its wake word after its last Abandon, callback or wake;
	// the poller querying every microsecond after a slot arrives or
	// retires, on its wake word once nothing drains, and past an announced
	// Abandon's time (AbandonBy). Zero means DefaultSpin; negative means
	// never spin.
	//
	// For the worker it is a trade between the caller of Abandon and the
	// reclaim's latency. An Abandon that finds the worker spinning costs
	// its caller nothing beyond the enqueue and the bookkeeping, and the
	// callback finds the worker awake (a few µs from callback to free).
	// One that finds it asleep (Spin after its last work) wakes it, one
	// system call on the caller's thread, so that the callback still finds
	// it awake. Without the spin no Abandon ever wakes the worker and the
	// callback does, with the scheduler's wake-up latency (~20 µs on a
	// virtual machine) between callback and free; the worker then uses no
	// CPU between callbacks.
	Spin time.Duration
	// NoAbandonWake keeps Abandon from ever waking a sleeping worker: no
	// system call on the caller's thread, ever, at the price of the reclaim
	// latency of an Abandon that finds the worker asleep: its callback then
	// wakes the worker itself (~20 µs from callback to free on a virtual
	// machine rather than a few). Runs of Abandons within Spin of one
	// another are unaffected, as the worker spins through them.
	NoAbandonWake bool
	// PollSleepMax caps the poller's sleep between queries once its fast
	// phase is over: it sleeps a sixteenth of the drain's age, up to this
	// (DefaultPollSleepMax when zero).
	PollSleepMax time.Duration
	// CloseTimeout bounds Close (DefaultCloseTimeout when zero).
	CloseTimeout time.Duration
	// Trace, when set, is told the moments of the reclaim path, for
	// benchmarks.
	Trace *Trace
}

// Defaults of Options.
const (
	// DefaultSpin covers the driver's own delay in starting a host
	// callback after a kernel ends (~60-140 µs on the H200), so a callback
	// for work that ends soon after its Abandon finds the worker awake, and
	// the next Abandon of a run finds it spinning; it costs at most that
	// much of one core after each Abandon or callback.
	DefaultSpin         = 250 * time.Microsecond
	DefaultPollSleepMax = time.Millisecond
	DefaultCloseTimeout = 30 * time.Second
)

// Trace receives the reclaim path's moments. Each func runs on the thread
// named and must be quick.
type Trace struct {
	// CallbackEntered is called first thing in the worker policy's host
	// callback, on the runtime's callback thread.
	CallbackEntered func()
	// Awake is called when the reclaim thread has work for a draining
	// slot: the worker woken by a callback's delivery, the poller seeing a
	// done event complete.
	Awake func()
	// Woken is called on the reclaim thread each time it finds its wake
	// word set, spinning or back from a sleep: an Abandon's hand-over (the
	// poller), a callback's or an Abandon's wake (the worker).
	Woken func()
	// Started is called on the reclaim thread (worker or poller), locked
	// to its OS thread, once it is set up: a benchmark can learn which
	// thread's CPU time is the reclaim's own.
	Started func()
}

// Tracker owns the disposable streams of one handle.
type Tracker struct {
	dev          hip.Device
	policy       Policy
	behaviour    behaviour
	maxDraining  int
	retest       time.Duration
	closeTimeout time.Duration
	trace        *Trace

	mu      sync.Mutex
	slots   []*Slot
	closed  bool
	retired chan struct{} // signals Acquire waiters that a slot left the backlog

	// draining counts draining slots; changed under mu, read without it
	// by the reclaim thread.
	draining atomic.Int64
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

	// failed holds pins whose free failed, for Close to retry.
	failedMu sync.Mutex
	failed   []Pin

	// abandons counts Abandon calls between marking a slot draining and
	// queuing its callback; Close waits for them so that every callback that
	// will ever be queued is behind the streams it synchronizes.
	abandons inflight

	reclaimOnce sync.Once
	reclaim     *reclaimThread // nil under lazy and guarded

	// afterDrain, set by tests before the first Abandon, is told after each
	// batch the reclaim thread handled: whether each delivered abandonment
	// was late, and how many pins (done events included) it released.
	afterDrain func(late []bool, pins int)
	// beforeIdle, set by tests, is called when the poller, with nothing
	// draining, begins its idle wait (a spin, then a sleep with no
	// deadline, or one until shortly before an announced Abandon).
	beforeIdle func()
	// beforeAnnounced, set by tests, is called when the idle poller begins
	// to spin for an announced Abandon (AbandonBy).
	beforeAnnounced func()
}

type counters struct {
	acquired, released, abandoned, byCallback, byPoller, byBackstop, byLaunch atomic.Int64
	queueFailed, late, freed, freeErrors, leaked, wakeups, polls              atomic.Int64
	abandonWakes                                                              atomic.Int64
}

// New makes a tracker for dev.
func New(dev hip.Device, opts Options) (*Tracker, error) {
	if dev == nil {
		return nil, errors.New("stream tracker needs a device, got nil")
	}
	if opts.Policy == "" {
		opts.Policy = Worker
	}
	b, ok := behaviours[opts.Policy]
	if !ok {
		_, err := ParsePolicy(string(opts.Policy))
		return nil, err
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
	switch {
	case opts.Spin == 0:
		opts.Spin = DefaultSpin
	case opts.Spin < 0:
		opts.Spin = 0
	}
	if opts.PollSleepMax <= 0 {
		opts.PollSleepMax = DefaultPollSleepMax
	}
	if opts.CloseTimeout <= 0 {
		opts.CloseTimeout = DefaultCloseTimeout
	}
	t := &Tracker{
		dev:          dev,
		policy:       opts.Policy,
		behaviour:    b,
		maxDraining:  opts.MaxDraining,
		retest:       opts.RetestEvery,
		closeTimeout: opts.CloseTimeout,
		trace:        opts.Trace,
		retired:      make(chan struct{}),
	}
	if b.loop != nil {
		t.reclaim = &reclaimThread{t: t, done: make(chan struct{}), spin: opts.Spin, maxSleep: max(opts.PollSleepMax, minPollSleep),
			wakeOnAbandon: opts.Spin > 0 && !opts.NoAbandonWake}
	}
	return t, nil
}

// startThread starts the reclaim thread on first use and returns it.
func (t *Tracker) startThread() *reclaimThread {
	t.reclaimOnce.Do(func() { t.reclaim.start(t.behaviour.loop) })
	return t.reclaim
}

// Policy is the tracker's reclaim policy.
func (t *Tracker) Policy() Policy { return t.policy }

// MaxDraining is the backlog cap.
func (t *Tracker) MaxDraining() int { return t.maxDraining }

// Counters returns a snapshot of the tracker's figures.
func (t *Tracker) Counters() Counters {
	t.mu.Lock()
	draining, n := t.draining.Load(), len(t.slots)
	t.mu.Unlock()
	return Counters{
		Acquired:            t.c.acquired.Load(),
		Released:            t.c.released.Load(),
		Abandoned:           t.c.abandoned.Load(),
		ReclaimedByCallback: t.c.byCallback.Load(),
		ReclaimedByPoller:   t.c.byPoller.Load(),
		ReclaimedByBackstop: t.c.byBackstop.Load(),
		ReclaimedByLaunch:   t.c.byLaunch.Load(),
		CallbackQueueFailed: t.c.queueFailed.Load(),
		LateCallbacks:       t.c.late.Load(),
		ScratchBytesPinned:  t.pinnedBytes.Load(),
		ScratchFreed:        t.c.freed.Load(),
		FreeErrors:          t.c.freeErrors.Load(),
		LeakedBytes:         t.c.leaked.Load(),
		WorkerWakeups:       t.c.wakeups.Load(),
		AbandonWakes:        t.c.abandonWakes.Load(),
		Polls:               t.c.polls.Load(),
		LastAbandonedFor:    time.Duration(t.lastDrained.Load()),
		Draining:            int(draining),
		Streams:             n,
	}
}

// HasPinned reports, without locking, whether any abandoned slot still pins
// scratch. It is the guarded launch path's gate.
func (t *Tracker) HasPinned() bool { return t.pinned.Load() > 0 }

// Acquire lends a clean slot. It first retires finished abandoned slots by
// their done events (the backstop for a callback that is late or lost); at
// the backlog cap it waits for the reclaim's signal, re-testing every
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
			// Under worker and poller Acquire never runs a deallocator:
			// the reclaim thread frees. The older policies have none, so
			// the caller frees, outside the lock.
			t.mu.Unlock()
			t.dispose(freed)
			t.mu.Lock()
			continue
		}
		if int(t.draining.Load()) < t.maxDraining {
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
			s.state, s.abandonBy = slotInUse, 0
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
// the device's sticky error and is returned. A slot the poller is querying
// right now is left to it. The pins of retired slots come back for
// disposal outside the lock, with the number of slots retired.
func (t *Tracker) sweepLocked() ([]Pin, int, error) {
	var freed []Pin
	retired := 0
	for _, s := range t.slots {
		if s.state != slotDraining || s.rec.state.Load() != recDraining {
			continue
		}
		var err error
		if s.rec.done != 0 {
			err = t.dev.EventQuery(s.rec.done)
		} else {
			err = t.dev.StreamQuery(s.stream)
		}
		switch {
		case err == nil:
			if s.rec.state.CompareAndSwap(recDraining, recClaimed) {
				freed = append(freed, t.retireLocked(s.rec)...)
				retired++
				t.c.byBackstop.Add(1)
			}
		case hip.IsNotReady(err):
		default:
			return freed, retired, fmt.Errorf("abandoned stream's work: %w", err)
		}
	}
	return freed, retired, nil
}

// retireLocked returns a claimed abandonment's slot to the pool. Its pin
// and its done event come back, in that order, for disposal outside the
// lock.
func (t *Tracker) retireLocked(a *abandonment) []Pin {
	var out []Pin
	if a.pin != nil {
		out = append(out, a.pin)
		t.pinned.Add(-1)
		t.pinnedBytes.Add(-int64(a.pin.Bytes()))
	}
	if a.done != 0 {
		out = append(out, eventPin{t.dev, a.done})
	}
	t.lastDrained.Store(monoNow() - a.at)
	s := a.slot
	s.rec, s.state = nil, slotFree
	t.draining.Add(-1)
	t.signalLocked()
	return out
}

// signalLocked wakes every Acquire waiting at the cap.
func (t *Tracker) signalLocked() {
	close(t.retired)
	t.retired = make(chan struct{})
}

// eventPin destroys a done event the tracker took over with Abandon.
type eventPin struct {
	dev hip.Device
	ev  hip.Event
}

func (e eventPin) Bytes() int     { return 0 }
func (e eventPin) Release() error { return e.dev.EventDestroy(e.ev) }

// dispose frees pins: on the reclaim thread while it runs (worker,
// poller), else here.
func (t *Tracker) dispose(ps []Pin) {
	if len(ps) == 0 {
		return
	}
	if t.reclaim != nil && t.reclaim.handOver(ps) {
		return
	}
	for _, p := range ps {
		t.release(p)
	}
}

// release frees one pin; a failure is counted and the pin kept for Close
// to retry.
func (t *Tracker) release(p Pin) {
	if err := p.Release(); err != nil {
		t.c.freeErrors.Add(1)
		t.failedMu.Lock()
		t.failed = append(t.failed, p)
		t.failedMu.Unlock()
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
// clean: pin dropped (outside the lock), no abandonment.
func (t *Tracker) Release(s *Slot) {
	t.mu.Lock()
	if s.state != slotInUse {
		t.mu.Unlock()
		return
	}
	p := s.pin
	s.pin, s.state, s.abandonBy = nil, slotFree, 0
	t.signalLocked()
	t.mu.Unlock()
	t.c.released.Add(1)
	if p != nil {
		t.release(p)
	}
}

// Abandon gives up a slot whose work is still running. done, when non-zero,
// is an event recorded after the work (the evaluation's stop event); it lets
// Acquire (and the poller) reclaim the slot, and the tracker destroys it
// when the slot retires. Without one, a query of the slot's stream stands
// in, which a held callback keeps busy. Under the worker policy a host
// callback is queued behind the work; under the poller policy the slot is
// handed to the poller. After Close the tracker frees the pin and the done
// event at once.
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
	a := &abandonment{slot: s, pin: s.pin, done: done, at: monoNow()}
	s.pin, s.rec, s.state, s.abandonBy = nil, a, slotDraining, 0
	t.draining.Add(1)
	if a.pin != nil {
		t.pinned.Add(1)
		t.pinnedBytes.Add(int64(a.pin.Bytes()))
	}
	t.abandons.add()
	t.mu.Unlock()
	// Counted before the policy's step: the worker watches this count (see
	// queueCallback).
	t.c.abandoned.Add(1)
	if f := t.behaviour.abandoned; f != nil {
		f(t, a)
	}
	t.abandons.done()
}

// AbandonBy announces that the borrower of s will abandon it at about at
// unless its work ends first: an evaluation's deadline. Under the poller
// policy the poller, asleep with nothing draining, wakes abandonLead
// before at and spins on its wake word until the Abandon comes, or until
// Spin past at, so that the Abandon finds it awake rather than paying the
// cold wake of a sleeping thread (30-75 µs on a virtual machine) while the
// abandoned kernel may already have ended. It costs the poller one timed
// wake and up to abandonLead + Spin of spinning per announcement that
// comes due; Release or Abandon withdraws it; nothing announced, the
// poller's idle sleep keeps no deadline. The call wakes a sleeping poller
// (one system call) so that it sets its alarm. Other policies ignore it;
// so does a slot not lent out.
func (t *Tracker) AbandonBy(s *Slot, at time.Time) {
	if t.policy != Poller {
		return
	}
	t.mu.Lock()
	if t.closed || s.state != slotInUse {
		t.mu.Unlock()
		return
	}
	s.abandonBy = max(int64(at.Sub(clockEpoch)), 1)
	t.mu.Unlock()
	t.startThread().wake.signal()
}

// nextAbandonBy is the earliest announced Abandon of a lent slot that has
// not lapsed (is not more than spin past now), or 0.
func (t *Tracker) nextAbandonBy(now int64, spin time.Duration) int64 {
	var next int64
	t.mu.Lock()
	for _, s := range t.slots {
		if s.state != slotInUse || s.abandonBy == 0 || s.abandonBy+int64(spin) <= now {
			continue
		}
		if next == 0 || s.abandonBy < next {
			next = s.abandonBy
		}
	}
	t.mu.Unlock()
	return next
}

// monoNow is a monotonic clock reading in nanoseconds: one clock read,
// where time.Now makes two.
func monoNow() int64 { return int64(time.Since(clockEpoch)) }

var clockEpoch = time.Now()

// inflight counts Abandon calls in flight, with a deadline-bounded wait
// for none. Abandon's add and done are one atomic add each; the mutex and
// the channel are only for a waiter (Close).
type inflight struct {
	n       atomic.Int64
	waiters atomic.Bool // set, under mu, by the first wait to find calls in flight

	mu   sync.Mutex
	idle chan struct{} // closed when n drops to zero while someone waits
	// waiting, set by tests, is closed when a wait finds calls in flight.
	waiting chan struct{}
}

func (f *inflight) add() { f.n.Add(1) }

// done is add's pair. A waiter announces itself before it reads n, and
// done decrements n before it looks for a waiter, so one of the two sees
// the other: a wait never misses the last done.
func (f *inflight) done() {
	if f.n.Add(-1) != 0 || !f.waiters.Load() {
		return
	}
	f.mu.Lock()
	if f.idle != nil && f.n.Load() == 0 {
		close(f.idle)
		f.idle = nil
	}
	f.mu.Unlock()
}

// wait reports whether no call is in flight by the deadline.
func (f *inflight) wait(deadline <-chan time.Time) bool {
	f.mu.Lock()
	f.waiters.Store(true)
	if f.n.Load() == 0 {
		f.mu.Unlock()
		return true
	}
	if f.idle == nil {
		f.idle = make(chan struct{})
	}
	idle := f.idle
	if f.waiting != nil {
		close(f.waiting)
		f.waiting = nil
	}
	f.mu.Unlock()
	select {
	case <-idle:
		return true
	case <-deadline:
		return false
	}
}

// Close tears the tracker down: it waits for Abandon calls in flight,
// synchronizes every owned stream, lets every queued callback run, stops
// the reclaim thread, frees what is still pinned (retrying frees that
// failed before) and destroys the streams. A kernel or callback that never
// returns cannot hang it: at CloseTimeout it stops waiting, leaves the
// streams still busy and what they pin alone (a kernel may still write to
// it), and returns an error naming them. Otherwise it returns the first
// error met, or one naming bytes whose free failed twice. Acquire calls
// waiting at the cap return ErrClosed; a later Abandon frees what it is
// given.
func (t *Tracker) Close() error {
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		return nil
	}
	t.closed = true
	t.signalLocked()
	slots := append([]*Slot(nil), t.slots...)
	t.mu.Unlock()

	var first error
	keep := func(err error) {
		if err != nil && first == nil {
			first = err
		}
	}
	timer := time.NewTimer(t.closeTimeout)
	defer timer.Stop()
	var stuck []string

	// An Abandon that got in before closed was set queues its callback
	// before the streams are synchronized.
	if !t.abandons.wait(timer.C) {
		stuck = append(stuck, "an Abandon still queuing its callback")
	}
	busy := map[*Slot]bool{}
	if len(stuck) == 0 {
		var err error
		busy, err = t.synchronize(slots, timer.C)
		keep(err)
	} else {
		for _, s := range slots {
			busy[s] = true
		}
	}
	if r := t.reclaim; r != nil && r.accepting.Load() {
		// A host function holds its stream until it returns, so with every
		// stream drained each callback that will ever run has run; the
		// worker handles what they delivered before it exits. A callback
		// the runtime dropped never arrives: its slot is retired below.
		r.stop()
		select {
		case <-r.done:
			keep(r.err)
		case <-timer.C:
			stuck = append(stuck, fmt.Sprintf("the %s thread (a deallocator that does not return?)", t.policy))
		}
	}

	pins, left, leftBytes := t.settleSlots(busy)
	for _, p := range pins {
		t.release(p)
	}
	for _, s := range slots {
		if !busy[s] {
			keep(t.dev.StreamDestroy(s.stream))
		}
	}
	if err := t.retryFailedFrees(); err != nil {
		keep(err)
	}
	if len(left) > 0 {
		t.c.leaked.Add(leftBytes)
		stuck = append(stuck, busyStreams(left, leftBytes))
	}
	if len(stuck) > 0 {
		return fmt.Errorf("stream tracker teardown stopped waiting after %v: %s", t.closeTimeout, strings.Join(stuck, "; "))
	}
	return first
}

// settleSlots takes, at teardown, what every slot that is not busy still
// pins (retiring a draining slot as the backstop would), and keeps the
// busy slots, whose pins a kernel may still write to, with their bytes.
func (t *Tracker) settleSlots(busy map[*Slot]bool) (pins []Pin, left []*Slot, leftBytes int64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, s := range t.slots {
		if busy[s] {
			left = append(left, s)
			if s.rec != nil && s.rec.pin != nil {
				leftBytes += int64(s.rec.pin.Bytes())
			} else if s.pin != nil {
				leftBytes += int64(s.pin.Bytes())
			}
			continue
		}
		if s.state == slotDraining && s.rec.state.CompareAndSwap(recDraining, recClaimed) {
			pins = append(pins, t.retireLocked(s.rec)...)
			t.c.byBackstop.Add(1)
		} else if s.pin != nil {
			pins = append(pins, s.pin)
			s.pin = nil
		}
	}
	t.slots = left
	return pins, left, leftBytes
}

// busyStreams names the streams still busy at teardown and what they pin.
func busyStreams(left []*Slot, leftBytes int64) string {
	names := make([]string, len(left))
	for i, s := range left {
		names[i] = fmt.Sprintf("stream %#x", uintptr(s.stream))
	}
	return fmt.Sprintf("%d stream(s) still busy (%s), pinning %d bytes left allocated",
		len(left), strings.Join(names, ", "), leftBytes)
}

// synchronize synchronizes the slots' streams until deadline and returns
// the slots whose streams had not drained by then, with the first error.
// A synchronize still blocked at the deadline is left to return on its
// own.
func (t *Tracker) synchronize(slots []*Slot, deadline <-chan time.Time) (map[*Slot]bool, error) {
	type result struct {
		s   *Slot
		err error
	}
	results := make(chan result, len(slots))
	for _, s := range slots {
		go func() { results <- result{s, t.dev.StreamSynchronize(s.stream)} }()
	}
	busy := make(map[*Slot]bool, len(slots))
	for _, s := range slots {
		busy[s] = true
	}
	var first error
	for range slots {
		select {
		case r := <-results:
			delete(busy, r.s)
			if r.err != nil && first == nil {
				first = r.err
			}
		case <-deadline:
			return busy, first
		}
	}
	return busy, first
}

// retryFailedFrees tries once more every free that failed; what fails
// again stays on the device and is reported.
func (t *Tracker) retryFailedFrees() error {
	t.failedMu.Lock()
	failed := t.failed
	t.failed = nil
	t.failedMu.Unlock()
	var leaked int64
	var first error
	for _, p := range failed {
		if err := p.Release(); err != nil {
			t.c.freeErrors.Add(1)
			leaked += int64(p.Bytes())
			if first == nil {
				first = err
			}
			continue
		}
		if _, isEvent := p.(eventPin); !isEvent {
			t.c.freed.Add(1)
		}
	}
	if first == nil {
		return nil
	}
	t.c.leaked.Add(leaked)
	return fmt.Errorf("stream tracker: %d bytes could not be freed, even on a retry at teardown: %w", leaked, first)
}
