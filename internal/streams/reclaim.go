package streams

import (
	"fmt"
	"runtime"
	"sync/atomic"
	"time"

	"miotool/internal/hip"
)

// Hand-off from the runtime's callback thread to the worker.
//
// A host function runs Go on a thread the runtime created. Had it woken the
// worker through a Go channel, the woken goroutine would land on the run
// queue of the P the callback borrowed, and that P parks in syscall state
// when the callback returns to C: the worker then waits for sysmon or a
// steal, ~100 µs on the H200. So the callback wakes the worker through a
// futex word with a raw system call, and the worker, locked to its own OS
// thread, sleeps on that word; nothing between the two needs Go's
// scheduler. From the wake to the free the worker takes no lock the
// callback holds and spins briefly for the tracker lock before it would
// park on it.
//
// Queuing libc's sem_post as the host function itself (no Go on the
// callback thread at all) was weighed and not taken: the wake would carry
// no ticket, so the worker could not tell its slot's own callback from a
// late one without querying events (the poller's job); the runtime
// interface would need a second, C-only kind of host function that the
// simulator cannot run; and entering Go on the callback thread costs far
// less than the driver's own callback delay.

// waker wakes one thread sleeping on a futex word.
type waker struct {
	word     atomic.Uint32 // 1: work is pending
	sleeping atomic.Uint32 // 1 while the thread is in, or entering, its futex wait
}

// signal marks work pending and wakes the thread if it sleeps. It never
// blocks and makes at most one raw system call.
func (w *waker) signal() {
	if w.word.Swap(1) == 0 && w.sleeping.Load() != 0 {
		futexWake(&w.word)
	}
}

// wait returns true once signalled, false after d (d <= 0: only on a
// signal, or spuriously). It first spins on the word for spin, then sleeps.
func (w *waker) wait(spin, d time.Duration) bool {
	return w.waitWatching(spin, d, nil)
}

// waitWatching is wait for a thread that also spins on activity: while it
// spins, a change of *activity (read every few dozen turns, so that the
// writer's cache line is not fought over) restarts the spin; and once it
// has announced that it sleeps it sleeps only if *activity has not changed
// since it last looked. A writer that bumps *activity and then finds
// sleeping clear may therefore skip signal: the thread either sees the
// bump and spins again, or the writer sees it asleep and signals. nil
// watches nothing.
func (w *waker) waitWatching(spin, d time.Duration, activity *atomic.Int64) bool {
	if w.word.Swap(0) != 0 {
		return true
	}
	var seen int64
	if activity != nil {
		seen = activity.Load()
	}
	if spin > 0 {
		end := time.Now().Add(spin)
		for i := 1; ; i++ {
			if w.word.Load() != 0 {
				w.word.Store(0)
				return true
			}
			if i%64 != 0 {
				continue
			}
			now := time.Now()
			if activity != nil {
				if a := activity.Load(); a != seen {
					seen, end = a, now.Add(spin)
				}
			}
			if now.After(end) {
				break
			}
		}
	}
	w.sleeping.Store(1)
	if w.word.Load() == 0 && (activity == nil || activity.Load() == seen) {
		futexWait(&w.word, d)
	}
	w.sleeping.Store(0)
	return w.word.Swap(0) != 0
}

// spinUntil spins on the word until end (a monoNow reading) and returns
// true once signalled, false at end. It never sleeps.
func (w *waker) spinUntil(end int64) bool {
	for i := 0; ; i++ {
		if w.word.Load() != 0 {
			w.word.Store(0)
			return true
		}
		if i%16 == 15 && monoNow() >= end {
			return w.word.Swap(0) != 0
		}
	}
}

// asleep reports whether the thread is in, or entering, its futex wait.
func (w *waker) asleep() bool { return w.sleeping.Load() != 0 }

// stack is a lock-free stack of values; pushAll takes everything at once,
// oldest first. A callback thread may push while the reclaim thread takes.
type stack[T any] struct{ top atomic.Pointer[stackNode[T]] }

type stackNode[T any] struct {
	v    T
	next *stackNode[T]
}

func (s *stack[T]) push(v T) {
	n := &stackNode[T]{v: v}
	for {
		old := s.top.Load()
		n.next = old
		if s.top.CompareAndSwap(old, n) {
			return
		}
	}
}

func (s *stack[T]) takeAll() []T {
	n := s.top.Swap(nil)
	var out []T
	for ; n != nil; n = n.next {
		out = append(out, n.v)
	}
	for i, j := 0, len(out)-1; i < j; i, j = i+1, j-1 {
		out[i], out[j] = out[j], out[i]
	}
	return out
}

// reclaimThread is the worker or the poller: a goroutine locked to its own
// OS thread in relaxed capture mode, so that its queries, event destroys
// and frees cannot invalidate anyone's capture. It also frees the pins the
// backstop retires, so that no deallocator runs on Acquire's caller.
type reclaimThread struct {
	t    *Tracker
	wake waker
	// inbox holds abandonments: delivered by their callbacks (worker), or
	// handed over by Abandon to be polled (poller).
	inbox  stack[*abandonment]
	toFree stack[Pin]
	// accepting is true until the thread has taken its last pins; dispose
	// hands pins over only while it holds.
	accepting atomic.Bool
	stopping  atomic.Bool
	done      chan struct{}
	err       error

	spin     time.Duration // see Options.Spin
	maxSleep time.Duration // see Options.PollSleepMax
	// wakeOnAbandon: an Abandon wakes a sleeping worker to spin (Spin on,
	// NoAbandonWake off).
	wakeOnAbandon bool
}

// The poller's pace while slots drain (see runPoller).
const (
	// pollGap is the least time between two rounds of queries in the fast
	// phase; the poller spins on its wake word meanwhile.
	pollGap = time.Microsecond
	// minPollSleep is the poller's shortest sleep after the fast phase.
	minPollSleep = 10 * time.Microsecond
	// pollAgeDivisor: after the fast phase the poller sleeps a sixteenth
	// of the youngest draining slot's age (since its Abandon) between
	// rounds, from minPollSleep up to PollSleepMax.
	pollAgeDivisor = 16
	// abandonLead is how long before an expected Abandon (AbandonBy) the
	// poller wakes from its idle sleep: a timed wake of a sleeping thread
	// comes tens of µs late on a virtual machine.
	abandonLead = 100 * time.Microsecond
)

// pollSleep is the poller's sleep between rounds once the fast phase is
// over: a fixed fraction of how long the youngest draining slot has run on
// past its Abandon, so that the delay from a kernel's end to its reclaim
// stays a small part of its overrun (a 2 ms overrun is seen within ~125
// µs plus the wake) while a long drain costs few wakes.
func pollSleep(age, maxSleep time.Duration) time.Duration {
	return min(max(age/pollAgeDivisor, minPollSleep), maxSleep)
}

func (r *reclaimThread) start(loop func(*reclaimThread)) {
	ready := make(chan struct{})
	r.accepting.Store(true)
	go r.run(loop, ready)
	<-ready
}

// run sets the thread up, runs the policy's loop, and frees what is left.
// The thread's previous mode is restored before it goes back to the pool;
// if that fails the thread stays locked and exits with the goroutine, so
// no other goroutine inherits the relaxed mode.
func (r *reclaimThread) run(loop func(*reclaimThread), ready chan<- struct{}) {
	defer close(r.done)
	runtime.LockOSThread()
	t := r.t
	prev, err := t.dev.ThreadExchangeCaptureMode(hip.CaptureModeRelaxed)
	if err != nil {
		r.err = fmt.Errorf("stream tracker %s thread: set relaxed capture mode: %w", t.policy, err)
	}
	restoreSlack := preciseSleeps()
	if t.trace != nil && t.trace.Started != nil {
		t.trace.Started()
	}
	close(ready)
	loop(r)
	// Pins handed over after this are freed by whoever disposes them.
	r.accepting.Store(false)
	r.freeAll(r.toFree.takeAll())
	restoreSlack()
	if err == nil {
		if _, rerr := t.dev.ThreadExchangeCaptureMode(prev); rerr == nil {
			runtime.UnlockOSThread()
		}
	}
}

// stop asks the thread to handle what it has and exit.
func (r *reclaimThread) stop() {
	r.stopping.Store(true)
	r.wake.signal()
}

// handOver gives pins to the thread to free; false when it no longer takes
// them (the caller frees them).
func (r *reclaimThread) handOver(ps []Pin) bool {
	if !r.accepting.Load() {
		return false
	}
	for _, p := range ps {
		r.toFree.push(p)
	}
	if !r.accepting.Load() {
		// The thread may have taken its last pins before these arrived:
		// free whatever is still there here. Each pin is taken once.
		r.freeAll(r.toFree.takeAll())
		return true
	}
	r.wake.signal()
	return true
}

func (r *reclaimThread) freeAll(ps []Pin) {
	for _, p := range ps {
		r.t.release(p)
	}
}

// runWorker is the worker policy's loop: sleep until a callback delivers
// an abandonment (or dispose hands pins over), retire what was delivered,
// free. After each batch, and after each Abandon it notices, it spins for
// Spin before it sleeps: a callback arriving soon finds it awake, and so
// does the next of a run of Abandons, which then needs no system call to
// wake it (see queueCallback).
func (r *reclaimThread) runWorker() {
	t := r.t
	for {
		r.workerBatch()
		if r.stopping.Load() {
			r.workerBatch()
			return
		}
		if r.wake.waitWatching(r.spin, 0, &t.c.abandoned) {
			t.woken()
		}
	}
}

// workerBatch retires the slots named by delivered abandonments and frees
// their pins and the pins handed over. An abandonment already retired by
// the backstop (its slot perhaps reused since) is a late callback and
// retires nothing.
func (r *reclaimThread) workerBatch() {
	t := r.t
	delivered := r.inbox.takeAll()
	pins := r.toFree.takeAll()
	if len(delivered) == 0 && len(pins) == 0 {
		return
	}
	if len(delivered) > 0 && t.trace != nil && t.trace.Awake != nil {
		t.trace.Awake()
	}
	var late []bool
	if len(delivered) > 0 {
		late = make([]bool, len(delivered))
		var own []Pin
		t.lockSpinning()
		for i, a := range delivered {
			if !a.state.CompareAndSwap(recDraining, recClaimed) {
				late[i] = true
				t.c.late.Add(1)
				continue
			}
			own = append(own, t.retireLocked(a)...)
			t.c.byCallback.Add(1)
		}
		t.mu.Unlock()
		pins = append(own, pins...)
	}
	r.freeAll(pins)
	if t.afterDrain != nil {
		t.afterDrain(late, len(pins))
	}
}

// runPoller is the poller policy's loop. While slots drain it queries
// their done events (a stream query for a slot abandoned without one):
// in a fast phase for Spin after a slot arrives or retires, a round every
// pollGap, spinning on its wake word in between; then with sleeps of a
// sixteenth of the youngest slot's age since its Abandon (pollSleep),
// from 10 µs up to PollSleepMax. With nothing draining it idles (see
// idle): it spins on its wake word for Spin, then sleeps until an Abandon
// wakes it, or until shortly before an Abandon the caller announced
// (AbandonBy); with none announced the sleep has no deadline. It never
// touches the launch path.
//
// Why it spins before it idles: a poller that slept the moment its last
// slot retired made every Abandon a cold wake, and a thread woken by
// futexWake runs when the scheduler gets to it: within a few µs on an
// awake core, 30-75 µs later on a virtual machine whose vCPU went idle.
// The spin keeps a run of Abandons, each soon after the last slot went
// home, from paying the wake; AbandonBy keeps an isolated one from paying
// it; an unannounced Abandon after an idle period still does
// (BenchmarkHops/poller-isolated).
//
// Why the fast phase leaves a gap between rounds, and why the slow phase
// paces by age rather than by a back-off: on the H200 one run of
// BenchmarkHops/poller in ten reclaimed 41 µs after the kernel's end where
// the nine others took 4, tightly (p90 44.5 µs) for all 300 iterations.
// That run's figures rule out what this loop could do by itself: the
// poller was awake (its last wake, by the Abandon, came 40.5 µs before the
// kernel's end), it takes no sleep within Spin of an arrival, its timer
// slack is 1 ns (preciseSleeps), and it learns nothing from one drain to
// the next (every arrival restarts the fast phase). Nor was the GPU late:
// the host function the benchmark queued behind the same done event ran
// earlier in that run (56 µs p50) than in any other. What is left is the
// query itself: from the wake to the done event seen took 81 µs, two
// periods of ~40.5 µs where a query normally takes ~0.6 µs, and ~40 µs is
// what a futex sleep and wake costs on that virtual machine, as when a
// query blocks on a lock in the driver held by another thread there (the
// only other one at the time worked on the benchmark's host function; the
// poller policy queues none). A run keeps its threads where they landed,
// so such blocking sticks to a run. A poller querying back to back holds
// the driver's lock most of the time and meets any other user of it at
// nearly every query; with pollGap between rounds it holds it about a
// third as often, for at most pollGap of latency. BenchmarkHops reports
// each reclaim's queries and their mean period (polls, ns-per-poll), and
// runs the poller with and without the benchmark's host function, so a
// slow run shows whether its queries blocked. In the slow phase the old
// doubling back-off polled 1 ms apart by the time a 2 ms overrun ended,
// reclaiming ~700 µs after the kernel, 3.5 times the worker's callback;
// pacing by age bounds the delay to a sixteenth of the overrun plus the
// wake.
func (r *reclaimThread) runPoller() {
	t := r.t
	var active []*abandonment
	lastChange := monoNow()
	for {
		if in := r.inbox.takeAll(); len(in) > 0 {
			active = append(active, in...)
			lastChange = monoNow()
		}
		if ps := r.toFree.takeAll(); len(ps) > 0 {
			r.freeAll(ps)
			if t.afterDrain != nil {
				t.afterDrain(nil, len(ps))
			}
		}
		if r.stopping.Load() {
			// Close has synchronized the streams: what it polls now has
			// finished, and is retired as the poller's own.
			r.pollOnce(active)
			return
		}
		if len(active) == 0 {
			if t.beforeIdle != nil {
				t.beforeIdle()
			}
			if r.idle() {
				t.woken()
			}
			continue
		}
		var retired int
		active, retired = r.pollOnce(active)
		now := monoNow()
		if retired > 0 {
			lastChange = now
		}
		if len(active) == 0 {
			continue
		}
		if now-lastChange < int64(r.spin) {
			if r.wake.spinUntil(now + int64(pollGap)) {
				t.woken()
			}
			continue
		}
		youngest := active[0].at
		for _, a := range active[1:] {
			youngest = max(youngest, a.at)
		}
		if r.wake.wait(0, pollSleep(time.Duration(now-youngest), r.maxSleep)) {
			t.woken()
		}
	}
}

// idle is the poller's wait with nothing draining; it returns true once
// signalled. It spins on the wake word for Spin and then sleeps: with no
// deadline, unless a slot lent out has an announced Abandon (AbandonBy),
// in which case it sleeps until abandonLead before the earliest and then
// spins until that Abandon arrives or Spin past its time, when the
// announcement lapses. An Abandon always signals the word (handToPoller),
// and so does AbandonBy, so the spin needs to watch nothing else.
func (r *reclaimThread) idle() bool {
	t := r.t
	now := monoNow()
	due := t.nextAbandonBy(now, r.spin)
	if due == 0 {
		return r.wake.wait(r.spin, 0)
	}
	wakeAt := due - int64(abandonLead)
	if now >= wakeAt {
		if t.beforeAnnounced != nil {
			t.beforeAnnounced()
		}
		return r.wake.spinUntil(due + int64(r.spin))
	}
	if spin := int64(r.spin); wakeAt-now <= spin {
		return r.wake.spinUntil(wakeAt)
	}
	return r.wake.wait(r.spin, time.Duration(wakeAt-now)-r.spin)
}

// pollOnce queries every active abandonment once and retires the finished
// ones. An abandonment is marked polling while its event is queried, so
// the backstop neither claims it nor destroys the event meanwhile; one the
// backstop already claimed is dropped. It returns the abandonments still
// draining and how many it retired.
func (r *reclaimThread) pollOnce(active []*abandonment) ([]*abandonment, int) {
	t := r.t
	keep := active[:0]
	var ready []*abandonment
	for _, a := range active {
		if !a.state.CompareAndSwap(recDraining, recPolling) {
			continue // claimed by the backstop
		}
		var err error
		if a.done != 0 {
			err = t.dev.EventQuery(a.done)
		} else {
			err = t.dev.StreamQuery(a.slot.stream)
		}
		t.c.polls.Add(1)
		if err == nil {
			ready = append(ready, a)
			continue
		}
		// Not ready, or the device's sticky error, which Acquire reports:
		// keep polling at the backed-off pace.
		a.state.Store(recDraining)
		keep = append(keep, a)
	}
	clear(active[len(keep):])
	if len(ready) == 0 {
		return keep, 0
	}
	if t.trace != nil && t.trace.Awake != nil {
		t.trace.Awake()
	}
	var pins []Pin
	t.lockSpinning()
	for _, a := range ready {
		a.state.Store(recClaimed)
		pins = append(pins, t.retireLocked(a)...)
		t.c.byPoller.Add(1)
	}
	t.mu.Unlock()
	r.freeAll(pins)
	if t.afterDrain != nil {
		t.afterDrain(make([]bool, len(ready)), len(pins))
	}
	return keep, len(ready)
}

// queueCallback is the worker policy's step of Abandon: a host function
// behind the slot's work delivers the abandonment to the worker. A worker
// that spins has already seen this Abandon (Abandon counts it first, and
// the worker watches the count) and spins on; only a sleeping one is woken
// here, after the enqueue, so that the callback finds it spinning. That
// wake is one system call on the caller's thread, paid only by an Abandon
// that comes after the worker went to sleep (Spin after its last work);
// with Spin negative or NoAbandonWake it is never paid, and the callback
// wakes the worker itself.
func (t *Tracker) queueCallback(a *abandonment) {
	r := t.startThread()
	if err := t.dev.LaunchHostFunc(a.slot.stream, func() { t.onCallback(a) }); err != nil {
		// The callback will never run; the done event (or a stream query)
		// is the slot's way home: Acquire's backstop, or Close.
		t.c.queueFailed.Add(1)
		return
	}
	if r.wakeOnAbandon && r.wake.asleep() {
		t.c.abandonWakes.Add(1)
		r.wake.signal()
	}
}

// onCallback runs on the runtime's callback thread. It makes no runtime
// call, takes no lock and never blocks: it pushes the abandonment and
// wakes the worker.
func (t *Tracker) onCallback(a *abandonment) {
	if t.trace != nil && t.trace.CallbackEntered != nil {
		t.trace.CallbackEntered()
	}
	r := t.reclaim
	r.inbox.push(a)
	r.wake.signal()
}

// handToPoller is the poller policy's step of Abandon: the slot goes into
// the poller's inbox, and a sleeping poller is woken (one system call on
// the caller's thread) to spin on it; one still spinning since its last
// work sees the inbox at once.
func (t *Tracker) handToPoller(a *abandonment) {
	r := t.startThread()
	r.inbox.push(a)
	if r.wake.asleep() {
		t.c.abandonWakes.Add(1)
	}
	r.wake.signal()
}

// woken counts a wake of the reclaim thread (its wake word found set) and
// tells the trace.
func (t *Tracker) woken() {
	t.c.wakeups.Add(1)
	if t.trace != nil && t.trace.Woken != nil {
		t.trace.Woken()
	}
}

// lockSpinning takes the tracker lock, spinning for a short while before
// it would park: the reclaim thread's way from a wake to a free should not
// wait on the scheduler to hand it the lock. Critical sections are short.
func (t *Tracker) lockSpinning() {
	const spinFor = 50 * time.Microsecond
	var end time.Time
	for i := 0; ; i++ {
		if t.mu.TryLock() {
			return
		}
		if i%32 == 31 {
			if end.IsZero() {
				end = time.Now().Add(spinFor)
			} else if time.Now().After(end) {
				break
			}
		}
	}
	t.mu.Lock()
}
