package streams

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"miotool/internal/hip"
	"miotool/internal/streams/streamtest"
)

// An abandoned evaluation's scratch is freed once its kernel retires, with
// no further call into the tracker: the host callback and the worker do it.
func TestScratchIsReleasedOnceItsKernelRetiresWithNoFurtherCall(t *testing.T) {
	f := newFixture(t, Options{Policy: Worker, MaxDraining: 2})
	a := f.abandonGated(t, f.acquire(t), f.buffer(4096), true)
	wantCounters(t, f.tr.Counters(), map[string]int64{"Draining": 1, "ScratchBytesPinned": 4096, "Abandoned": 1})
	if streamtest.Closed(a.buf.Freed()) {
		t.Fatal("scratch freed while its kernel still runs")
	}

	a.gate.Open()
	streamtest.Recv(t, "scratch freed after the kernel retired", a.buf.Freed())
	if late := f.ticket(t); late {
		t.Error("the only callback was counted late")
	}
	wantCounters(t, f.tr.Counters(), map[string]int64{
		"ReclaimedByCallback": 1, "ReclaimedByBackstop": 0, "ScratchFreed": 1,
		"ScratchBytesPinned": 0, "Draining": 0, "FreeErrors": 0,
	})
	if err := f.sim.EventQuery(a.done); hip.CodeOf(err) != hip.ErrInvalidHandle {
		t.Errorf("done event after the slot retired: %v, want it destroyed (invalid handle)", err)
	}
	if n := f.dev.Calls("Free"); n != 0 {
		t.Errorf("the tracker called the runtime's free %d times for a pin it does not own", n)
	}
}

// The worker and the poller query and free on their own OS thread in
// relaxed capture mode, so a release leaves a global-mode capture on
// another thread valid. Without the relaxed mode the free is refused and
// the capture invalidated.
func TestReleaseLeavesAnUnrelatedGlobalCaptureValid(t *testing.T) {
	for _, tc := range []struct {
		policy  Policy
		dialect hip.Dialect
	}{{Worker, hip.DialectHIP}, {Worker, hip.DialectCUDA}, {Poller, hip.DialectHIP}, {Poller, hip.DialectCUDA}} {
		t.Run(string(tc.policy)+"/"+string(tc.dialect), func(t *testing.T) {
			policy := tc.policy
			f := newFixtureOn(t, tc.dialect, Options{Policy: policy, MaxDraining: 2})
			buf := streamtest.NewBuffer(t, f.sim, 1024) // freed by the runtime's free
			a := f.abandonGated(t, f.acquire(t), buf, true)

			capThread := streamtest.StartThread(t)
			var capStream hip.Stream
			capThread.Do(t, "begin a global capture", func() {
				var err error
				capStream, err = f.sim.StreamCreate(hip.StreamNonBlocking)
				streamtest.Must(t, "create the capture stream", err)
				streamtest.Must(t, "begin capture", f.sim.StreamBeginCapture(capStream, hip.CaptureModeGlobal))
				f.k.Tiny(t, capStream)
			})

			a.gate.Open()
			streamtest.Recv(t, "scratch freed during the capture", buf.Freed())
			if err := buf.FreeErr(); err != nil {
				t.Errorf("the worker's free was refused during another thread's global capture: %v", err)
			}
			capThread.Do(t, "end the capture", func() {
				g, err := f.sim.StreamEndCapture(capStream)
				if err != nil {
					t.Errorf("end capture after a release on the worker: %v (want success)", err)
					return
				}
				_ = f.sim.GraphDestroy(g)
			})
			f.ticket(t)
			by := "ReclaimedByCallback"
			if policy == Poller {
				by = "ReclaimedByPoller"
			}
			wantCounters(t, f.tr.Counters(), map[string]int64{"FreeErrors": 0, "ScratchFreed": 1, by: 1})
		})
	}
}

// A callback that arrives after the backstop retired its slot, and after
// the slot was lent and abandoned again, must not retire the new
// abandonment: its ticket no longer matches.
func TestALateCallbackDoesNotRetireALaterReuseOfItsStream(t *testing.T) {
	f := newFixture(t, Options{Policy: Worker, MaxDraining: 1})
	release := f.hold(t)
	first := f.abandonGated(t, f.acquire(t), f.buffer(100), true)
	f.retire(t, first) // kernel and done event complete; the callback is held

	reuse := f.acquire(t) // at the cap: the backstop retires the first abandonment
	if reuse != first.slot || reuse.Stream() != first.stream {
		t.Fatalf("Acquire lent a different slot (%p, stream %d), want the retired one (%p, stream %d)",
			reuse, reuse.Stream(), first.slot, first.stream)
	}
	second := f.abandonGated(t, reuse, f.buffer(200), true)
	streamtest.Recv(t, "first scratch freed by the worker", first.buf.Freed())

	release() // the first callback runs now: late
	if late := f.ticket(t); !late {
		t.Fatal("the first abandonment's callback retired the second abandonment of its stream")
	}
	if streamtest.Closed(second.buf.Freed()) {
		t.Fatal("the second abandonment's scratch was freed while its kernel runs")
	}
	wantCounters(t, f.tr.Counters(), map[string]int64{
		"LateCallbacks": 1, "Draining": 1, "ScratchBytesPinned": 200, "ReclaimedByBackstop": 1, "ReclaimedByCallback": 0,
	})

	second.gate.Open()
	if late := f.ticket(t); late {
		t.Error("the second abandonment's own callback was counted late")
	}
	streamtest.Recv(t, "second scratch freed", second.buf.Freed())
	wantCounters(t, f.tr.Counters(), map[string]int64{"LateCallbacks": 1, "ReclaimedByCallback": 1, "Draining": 0})
}

// A callback for a slot the backstop already retired is counted late and
// changes nothing.
func TestACallbackForASlotRetiredByTheBackstopIsCountedLate(t *testing.T) {
	f := newFixture(t, Options{Policy: Worker, MaxDraining: 1})
	release := f.hold(t)
	a := f.abandonGated(t, f.acquire(t), f.buffer(64), true)
	f.retire(t, a)

	s := f.acquire(t)
	streamtest.Recv(t, "scratch freed after the backstop", a.buf.Freed())
	f.tr.Release(s)
	release()
	if late := f.ticket(t); !late {
		t.Fatal("the callback of a slot retired by the backstop was not late")
	}
	wantCounters(t, f.tr.Counters(), map[string]int64{
		"LateCallbacks": 1, "ReclaimedByBackstop": 1, "ReclaimedByCallback": 0, "Draining": 0, "ScratchFreed": 1,
	})
}

// A dropped callback's slot comes home through its done event at the next
// Acquire, and its scratch is then freed by the worker, not by Acquire: the
// deallocator is still blocked when Acquire returns, and it runs in the
// worker's relaxed mode.
func TestADroppedCallbacksSlotIsReclaimedByItsDoneEventAndFreedByTheWorker(t *testing.T) {
	f := newFixture(t, Options{Policy: Worker, MaxDraining: 1})
	streamtest.Must(t, "drop the next host function", f.sim.Faults().DropHostFuncs(1))
	freeGate := streamtest.NewGate(t)
	modes := make(chan hip.CaptureMode, 1)
	buf := bufferFunc(512, func(hip.DevPtr) error {
		m, err := streamtest.ThreadMode(f.sim)
		if err != nil {
			return err
		}
		modes <- m
		return freeGate.Wait()
	})
	a := f.abandonGated(t, f.acquire(t), buf, true)
	f.retire(t, a)

	got := streamtest.Recv(t, "Acquire at the cap after a dropped callback", f.acquireAsync(context.Background()))
	streamtest.Must(t, "Acquire", got.err)
	if streamtest.Closed(buf.Freed()) {
		t.Fatal("the scratch was freed before its deallocator was let go")
	}
	if m := streamtest.Recv(t, "the deallocator started", modes); m != hip.CaptureModeRelaxed {
		t.Errorf("deallocator ran in %s capture mode, want relaxed (the worker's thread)", m)
	}
	freeGate.Open()
	streamtest.Recv(t, "scratch freed", buf.Freed())
	f.workerReleased(t, 2) // the scratch and the done event
	wantCounters(t, f.tr.Counters(), map[string]int64{
		"ReclaimedByBackstop": 1, "ReclaimedByCallback": 0, "LateCallbacks": 0, "ScratchFreed": 1,
	})
}

// Who runs the deallocator of a slot Acquire's backstop reclaims: the
// worker under the worker policy (relaxed mode, Acquire not waiting for
// it); the caller of Acquire under the older policies, which have no worker.
func TestAcquireLeavesTheDeallocatorToTheWorker(t *testing.T) {
	for _, tc := range []struct {
		policy       Policy
		wantOnWorker bool
	}{
		{Worker, true},
		{Guarded, false},
		{Lazy, false},
	} {
		t.Run(string(tc.policy), func(t *testing.T) {
			f := newFixture(t, Options{Policy: tc.policy, MaxDraining: 1})
			release := f.hold(t) // keep the worker's callback out of the way
			var acquiring atomic.Bool
			type call struct {
				mode      hip.CaptureMode
				duringAcq bool
				modeErr   error
			}
			calls := make(chan call, 1)
			buf := bufferFunc(64, func(hip.DevPtr) error {
				m, err := streamtest.ThreadMode(f.sim)
				calls <- call{mode: m, duringAcq: acquiring.Load(), modeErr: err}
				return nil
			})
			a := f.abandonGated(t, f.acquire(t), buf, true)
			f.retire(t, a)

			acquiring.Store(true)
			s := f.acquire(t)
			acquiring.Store(false)
			c := streamtest.Recv(t, "the deallocator ran", calls)
			streamtest.Must(t, "probe the deallocator's thread mode", c.modeErr)
			if tc.wantOnWorker {
				if c.mode != hip.CaptureModeRelaxed {
					t.Errorf("deallocator ran in %s mode, want relaxed (on the worker)", c.mode)
				}
			} else if !c.duringAcq {
				t.Errorf("the %s policy's deallocator ran outside Acquire, want inline (there is no worker)", tc.policy)
			}
			f.tr.Release(s)
			release()
		})
	}
}

// At the cap, Acquire waits for the worker's signal rather than polling:
// with the re-test pushed out to an hour and the callback held, it stays
// blocked after the kernel retires; releasing the callback lets it return.
func TestAcquireAtTheCapWaitsForTheWorkersSignal(t *testing.T) {
	f := newFixture(t, Options{Policy: Worker, MaxDraining: 1, RetestEvery: time.Hour})
	release := f.hold(t)
	a := f.abandonGated(t, f.acquire(t), f.buffer(64), true)

	f.dev.Reset()
	result := f.acquireAsync(context.Background())
	f.dev.WaitReturns(t, "EventQuery", 1) // Acquire's first sweep: not ready, so it waits
	f.tr.mu.Lock()
	waitingOn := f.tr.retired
	f.tr.mu.Unlock()
	f.retire(t, a)
	if streamtest.Closed(result) {
		t.Fatal("Acquire returned with the backlog full and no signal")
	}
	if n := f.dev.Calls("EventQuery"); n != 1 {
		t.Errorf("a waiting Acquire queried %d times, want 1 (it waits on a signal, not a poll)", n)
	}

	release()
	if late := f.ticket(t); late {
		t.Fatal("the held callback was counted late")
	}
	if !streamtest.Closed(waitingOn) {
		t.Fatal("the worker retired the slot without signalling the waiting Acquire")
	}
	got := streamtest.Recv(t, "Acquire after the held callback ran", result)
	streamtest.Must(t, "Acquire", got.err)
	if got.slot != a.slot {
		t.Errorf("Acquire lent %p, want the retired slot %p", got.slot, a.slot)
	}
	wantCounters(t, f.tr.Counters(), map[string]int64{"ReclaimedByCallback": 1, "ReclaimedByBackstop": 0, "LateCallbacks": 0})
}

// At the cap with callbacks held, Acquire still reclaims the slot through
// its done event on its periodic re-test; the callback, released later, is
// late.
func TestAcquireAtTheCapWithCallbacksHeldReclaimsByTheDoneEventOnItsRetest(t *testing.T) {
	f := newFixture(t, Options{Policy: Worker, MaxDraining: 1}) // default 10 ms re-test
	release := f.hold(t)
	a := f.abandonGated(t, f.acquire(t), f.buffer(64), true)

	f.dev.Reset()
	result := f.acquireAsync(context.Background())
	f.dev.WaitReturns(t, "EventQuery", 1)
	a.gate.Open()
	// 300 re-test periods: without the re-test it would wait for ever.
	got := streamtest.RecvWithin(t, "Acquire with the callback held, by its re-test", 3*time.Second, result)
	streamtest.Must(t, "Acquire", got.err)
	streamtest.Recv(t, "scratch freed by the worker", a.buf.Freed())
	wantCounters(t, f.tr.Counters(), map[string]int64{"ReclaimedByBackstop": 1, "ReclaimedByCallback": 0})

	release()
	if late := f.ticket(t); !late {
		t.Error("the held callback retired something after the backstop had")
	}
	f.tr.Release(got.slot)
}

// A query answering anything but success or not-ready is the device's
// sticky error: Acquire returns it instead of waiting on a backlog that can
// never drain, and leaves the slot and its scratch where they are. Slots
// abandoned without a done event are tested by their stream.
func TestAcquireReturnsTheStickyDeviceError(t *testing.T) {
	for _, withDone := range []bool{true, false} {
		t.Run(fmt.Sprintf("done-event=%t", withDone), func(t *testing.T) {
			f := newFixture(t, Options{Policy: Worker, MaxDraining: 1})
			a := f.abandonGated(t, f.acquire(t), f.buffer(64), withDone)
			streamtest.Must(t, "inject a query failure", f.sim.Faults().FailQueries(1, hip.ErrIllegalAddress))

			// Bounded below the test limit: a tracker that waits instead of
			// returning fails here with a context error.
			ctx, cancel := context.WithTimeout(context.Background(), streamtest.Limit/2)
			defer cancel()
			got := streamtest.Recv(t, "Acquire on a faulted device", f.acquireAsync(ctx))
			if got.err == nil || hip.CodeOf(got.err) != hip.ErrIllegalAddress {
				t.Fatalf("Acquire: slot %v, err %v; want the sticky %s", got.slot, got.err, hip.ErrIllegalAddress.Name(hip.DialectHIP))
			}
			if errors.Is(got.err, context.DeadlineExceeded) {
				t.Fatalf("Acquire waited for its context instead of returning the device error: %v", got.err)
			}
			if streamtest.Closed(a.buf.Freed()) {
				t.Error("a query error freed the scratch; the kernel may still be running")
			}
			wantCounters(t, f.tr.Counters(), map[string]int64{"Draining": 1, "ScratchBytesPinned": 64, "ReclaimedByBackstop": 0})

			// Still sticky, still returned.
			got = streamtest.Recv(t, "second Acquire on a faulted device", f.acquireAsync(ctx))
			if hip.CodeOf(got.err) != hip.ErrIllegalAddress {
				t.Errorf("second Acquire: %v, want the sticky error again", got.err)
			}
			a.gate.Open()
			if err := f.tr.Close(); hip.CodeOf(err) != hip.ErrIllegalAddress {
				t.Errorf("Close on a faulted device: %v, want the sticky error", err)
			}
			streamtest.Recv(t, "scratch freed by Close", a.buf.Freed())
		})
	}
}

// A waiting Acquire returns when its context is cancelled or times out,
// with an error that wraps the context's.
func TestAcquireHonoursItsContext(t *testing.T) {
	for _, tc := range []struct {
		name      string
		ctx       func() (context.Context, context.CancelFunc)
		cancelNow bool // cancel once Acquire waits; otherwise the deadline ends it
		want      error
	}{
		{"cancelled", func() (context.Context, context.CancelFunc) { return context.WithCancel(context.Background()) }, true, context.Canceled},
		{"deadline", func() (context.Context, context.CancelFunc) {
			return context.WithTimeout(context.Background(), time.Millisecond)
		}, false, context.DeadlineExceeded},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, Options{Policy: Worker, MaxDraining: 1, RetestEvery: time.Hour})
			a := f.abandonGated(t, f.acquire(t), f.buffer(64), true)
			ctx, cancel := tc.ctx()
			defer cancel()
			f.dev.Reset()
			result := f.acquireAsync(ctx)
			f.dev.WaitReturns(t, "EventQuery", 1)
			if tc.cancelNow {
				cancel()
			}
			got := streamtest.Recv(t, "Acquire after its context ended", result)
			if !errors.Is(got.err, tc.want) {
				t.Fatalf("Acquire: slot %v, err %v; want an error wrapping %v", got.slot, got.err, tc.want)
			}
			wantCounters(t, f.tr.Counters(), map[string]int64{"Acquired": 1, "Draining": 1})
			a.gate.Open()
		})
	}
}

// Two abandoned slots pinning one buffer: it is freed only when both have
// retired.
func TestSharedScratchIsFreedOnlyWhenBothSlotsRetire(t *testing.T) {
	f := newFixture(t, Options{Policy: Worker, MaxDraining: 2})
	buf := f.buffer(1000)
	a := f.abandonGated(t, f.acquire(t), buf.Retain(), true)
	b := f.abandonGated(t, f.acquire(t), buf, true)

	a.gate.Open()
	if late := f.ticket(t); late {
		t.Fatal("first callback late")
	}
	if streamtest.Closed(buf.Freed()) || buf.Refs() != 1 {
		t.Fatalf("shared scratch after one slot retired: freed %t, refs %d; want alive with 1 ref",
			streamtest.Closed(buf.Freed()), buf.Refs())
	}
	wantCounters(t, f.tr.Counters(), map[string]int64{"Draining": 1, "ScratchBytesPinned": 1000})

	b.gate.Open()
	streamtest.Recv(t, "shared scratch freed after both retired", buf.Freed())
	f.ticket(t)
	wantCounters(t, f.tr.Counters(), map[string]int64{"Draining": 0, "ScratchBytesPinned": 0, "ReclaimedByCallback": 2})
}

// Release returns a slot clean (no pin, no done event, no ticket) and the
// next Acquire reuses its stream; a retired slot is clean too, so a stale
// done event cannot make its next abandonment look finished.
func TestReleaseReturnsASlotCleanAndReuseTakesNoNewStream(t *testing.T) {
	f := newFixture(t, Options{Policy: Worker, MaxDraining: 2})
	s := f.acquire(t)
	buf := f.buffer(32)
	f.tr.Pin(s, buf)
	f.tr.Release(s)
	if !streamtest.Closed(buf.Freed()) {
		t.Error("Release kept the pin alive")
	}
	if s.pin != nil || s.rec != nil || s.state != slotFree {
		t.Errorf("released slot: pin %v, abandonment %v, state %d; want clean and free", s.pin, s.rec, s.state)
	}

	again := f.acquire(t)
	if again != s {
		t.Fatalf("Acquire after Release lent %p, want the released slot %p", again, s)
	}
	a := f.abandonGated(t, again, nil, true)
	a.gate.Open()
	f.ticket(t)
	if s.pin != nil || s.rec != nil || s.state != slotFree {
		t.Errorf("retired slot: pin %v, abandonment %v, state %d; want clean and free", s.pin, s.rec, s.state)
	}

	// The slot's old done event is gone; abandon it again without one while
	// a kernel runs: it must stay draining.
	third := f.acquire(t)
	if third != s {
		t.Fatalf("third Acquire lent %p, want %p", third, s)
	}
	running := f.abandonGated(t, third, nil, false)
	other := f.acquire(t)
	wantCounters(t, f.tr.Counters(), map[string]int64{"Draining": 1, "Streams": 2})
	f.tr.Release(other)
	running.gate.Open()
	f.ticket(t)
	if n := f.dev.Calls("StreamCreate"); n != 2 {
		t.Errorf("StreamCreate called %d times, want 2 (one reused slot, one second slot)", n)
	}
}

// Close synchronizes every owned stream (in use or draining), lets the
// callbacks run, joins the worker, frees every pin and done event and
// destroys the streams. A later Acquire fails; a later Abandon frees what
// it is given.
func TestCloseSynchronizesRetiresAndFreesEverything(t *testing.T) {
	f := newFixture(t, Options{Policy: Worker, MaxDraining: 3})
	var early atomic.Int32
	gates := map[string]*streamtest.Gate{}
	freeAfter := func(name string) func(hip.DevPtr) error {
		return func(hip.DevPtr) error {
			if !streamtest.Closed(gates[name].C()) {
				early.Add(1)
			}
			return nil
		}
	}
	abandonedBuf := bufferFunc(10, freeAfter("abandoned"))
	inUseBuf := bufferFunc(20, freeAfter("in-use"))

	drain := f.acquire(t)
	inUse := f.acquire(t)
	idle := f.acquire(t)
	f.tr.Release(idle)
	gates["abandoned"] = f.k.Hold(t, drain.Stream())
	gates["in-use"] = f.k.Hold(t, inUse.Stream())
	done := streamtest.DoneEvent(t, f.sim, drain.Stream())
	f.tr.Pin(drain, abandonedBuf)
	f.tr.Pin(inUse, inUseBuf)
	f.tr.Abandon(drain, done)
	streams := []hip.Stream{drain.Stream(), inUse.Stream(), idle.Stream()}

	closed := make(chan error, 1)
	go func() { closed <- f.tr.Close() }()
	f.dev.WaitCalls(t, "StreamSynchronize", 1)
	gates["abandoned"].Open()
	gates["in-use"].Open()
	streamtest.Must(t, "Close", streamtest.Recv(t, "Close", closed))

	if n := early.Load(); n != 0 {
		t.Errorf("%d pins were freed before their kernels finished", n)
	}
	for _, b := range []*streamtest.Buffer{abandonedBuf, inUseBuf} {
		if !streamtest.Closed(b.Freed()) {
			t.Errorf("pin of %d bytes not freed by Close", b.Bytes())
		}
	}
	if late, ok := f.handled(); !ok || late {
		t.Errorf("the abandoned slot's callback was not handled before Close returned (late %t, handled %t)", late, ok)
	}
	if !streamtest.Closed(f.tr.reclaim.done) {
		t.Error("Close returned before the worker exited")
	}
	wantCounters(t, f.tr.Counters(), map[string]int64{
		"ReclaimedByCallback": 1, "Draining": 0, "Streams": 0, "ScratchBytesPinned": 0, "ScratchFreed": 2, "FreeErrors": 0,
	})
	for _, s := range streams {
		if err := f.sim.StreamQuery(s); hip.CodeOf(err) != hip.ErrInvalidHandle {
			t.Errorf("stream %d after Close: %v, want destroyed", s, err)
		}
	}
	if err := f.sim.EventQuery(done); hip.CodeOf(err) != hip.ErrInvalidHandle {
		t.Errorf("done event after Close: %v, want destroyed", err)
	}

	if _, err := f.tr.Acquire(context.Background()); !errors.Is(err, ErrClosed) {
		t.Errorf("Acquire after Close: %v, want ErrClosed", err)
	}
	late := f.buffer(5)
	lateDone := streamtest.DoneEvent(t, f.sim, f.mustStream(t))
	f.tr.Pin(inUse, late)
	f.tr.Abandon(inUse, lateDone)
	if !streamtest.Closed(late.Freed()) {
		t.Error("a pin handed over after Close was kept")
	}
	if err := f.sim.EventQuery(lateDone); hip.CodeOf(err) != hip.ErrInvalidHandle {
		t.Errorf("done event handed over after Close: %v, want destroyed", err)
	}
	if err := f.tr.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
}

func (f *fixture) mustStream(t *testing.T) hip.Stream {
	t.Helper()
	s, err := f.sim.StreamCreate(hip.StreamNonBlocking)
	streamtest.Must(t, "create a stream", err)
	t.Cleanup(func() { _ = f.sim.StreamDestroy(s) })
	return s
}

// Close does not hang when a callback was dropped: the slot retires through
// Close's own sweep.
func TestCloseDoesNotHangOnADroppedCallback(t *testing.T) {
	f := newFixture(t, Options{Policy: Worker, MaxDraining: 1})
	streamtest.Must(t, "drop the next host function", f.sim.Faults().DropHostFuncs(1))
	a := f.abandonGated(t, f.acquire(t), f.buffer(8), true)
	f.retire(t, a)
	closed := make(chan error, 1)
	go func() { closed <- f.tr.Close() }()
	streamtest.Must(t, "Close", streamtest.Recv(t, "Close with a dropped callback", closed))
	if !streamtest.Closed(a.buf.Freed()) {
		t.Error("Close left the scratch of a slot whose callback was dropped")
	}
	wantCounters(t, f.tr.Counters(), map[string]int64{"ReclaimedByCallback": 0, "ReclaimedByBackstop": 1, "Draining": 0})
}

// Close waits for a held callback (a host function holds its stream) and
// returns once it is released, with the callback handled by the worker.
func TestCloseWaitsForAHeldThenReleasedCallback(t *testing.T) {
	f := newFixture(t, Options{Policy: Worker, MaxDraining: 1})
	release := f.hold(t)
	a := f.abandonGated(t, f.acquire(t), f.buffer(8), true)
	f.retire(t, a)
	f.dev.Reset()
	closed := make(chan error, 1)
	go func() { closed <- f.tr.Close() }()
	f.dev.WaitCalls(t, "StreamSynchronize", 1)
	if streamtest.Closed(closed) {
		t.Fatal("Close returned while a callback was held on its stream")
	}
	release()
	streamtest.Must(t, "Close", streamtest.Recv(t, "Close after the callback was released", closed))
	if late, ok := f.handled(); !ok || late {
		t.Errorf("the held callback was not handled as the slot's own before Close returned (late %t, handled %t)", late, ok)
	}
	wantCounters(t, f.tr.Counters(), map[string]int64{"ReclaimedByCallback": 1, "ReclaimedByBackstop": 0, "ScratchFreed": 1})
}

// Close does not hang after a sticky error: the runtime skips the callback,
// synchronize fails at once, and Close still frees and destroys everything,
// returning the device's error.
func TestCloseAfterAStickyError(t *testing.T) {
	f := newFixture(t, Options{Policy: Worker, MaxDraining: 1})
	a := f.abandonGated(t, f.acquire(t), f.buffer(8), true)
	streamtest.Must(t, "inject a query failure", f.sim.Faults().FailQueries(1, hip.ErrIllegalAddress))
	if err := f.sim.EventQuery(a.marker); hip.CodeOf(err) != hip.ErrIllegalAddress {
		t.Fatalf("fault injection did not take: %v", err)
	}
	a.gate.Open()
	closed := make(chan error, 1)
	go func() { closed <- f.tr.Close() }()
	err := streamtest.Recv(t, "Close on a faulted device", closed)
	if hip.CodeOf(err) != hip.ErrIllegalAddress {
		t.Errorf("Close: %v, want the sticky error", err)
	}
	if !streamtest.Closed(a.buf.Freed()) {
		t.Error("Close left the scratch on a faulted device")
	}
	wantCounters(t, f.tr.Counters(), map[string]int64{"Draining": 0, "Streams": 0, "ReclaimedByBackstop": 1})
}

// Many goroutines acquire, pin, abandon (with and without done events) and
// release at once, with some callbacks dropped; afterwards every figure
// adds up and every pin was freed exactly once.
func TestConcurrentFindsKeepTheCountersConsistent(t *testing.T) {
	const goroutines, rounds, capacity = 8, 25, 2
	f := newFixture(t, Options{Policy: Worker, MaxDraining: capacity})
	streamtest.Must(t, "drop some host functions", f.sim.Faults().DropHostFuncs(5))
	var frees, pins atomic.Int64
	var maxDraining atomic.Int64
	ctx, cancel := context.WithTimeout(context.Background(), streamtest.Limit)
	defer cancel()

	errs := make(chan error, goroutines)
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			for i := range rounds {
				s, err := f.tr.Acquire(ctx)
				if err != nil {
					errs <- fmt.Errorf("goroutine %d round %d: %w", g, i, err)
					return
				}
				pins.Add(1)
				f.tr.Pin(s, bufferFunc(16, func(hip.DevPtr) error { frees.Add(1); return nil }))
				if err := f.sim.LaunchKernel(f.k.TinyFunc(), hip.D1(1), hip.D1(1), 0, s.Stream()); err != nil {
					errs <- err
					return
				}
				switch (g + i) % 3 {
				case 0:
					if err := f.sim.StreamSynchronize(s.Stream()); err != nil {
						errs <- err
						return
					}
					f.tr.Release(s)
				case 1:
					ev, err := f.sim.EventCreate(hip.EventDisableTiming)
					if err == nil {
						err = f.sim.EventRecord(ev, s.Stream())
					}
					if err != nil {
						errs <- err
						return
					}
					f.tr.Abandon(s, ev)
				case 2:
					f.tr.Abandon(s, 0)
				}
				c := f.tr.Counters()
				for {
					m := maxDraining.Load()
					if int64(c.Draining) <= m || maxDraining.CompareAndSwap(m, int64(c.Draining)) {
						break
					}
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	streamtest.Must(t, "Close", f.tr.Close())

	c := f.tr.Counters()
	if c.Acquired != goroutines*rounds {
		t.Errorf("Acquired = %d, want %d", c.Acquired, goroutines*rounds)
	}
	if c.Released+c.Abandoned != c.Acquired {
		t.Errorf("Released %d + Abandoned %d != Acquired %d", c.Released, c.Abandoned, c.Acquired)
	}
	if c.ReclaimedByCallback+c.ReclaimedByBackstop != c.Abandoned {
		t.Errorf("ReclaimedByCallback %d + ReclaimedByBackstop %d != Abandoned %d", c.ReclaimedByCallback, c.ReclaimedByBackstop, c.Abandoned)
	}
	if c.LateCallbacks > c.ReclaimedByBackstop {
		t.Errorf("LateCallbacks %d > ReclaimedByBackstop %d: a late callback without a backstop retire", c.LateCallbacks, c.ReclaimedByBackstop)
	}
	if c.ScratchFreed != pins.Load() || frees.Load() != pins.Load() {
		t.Errorf("ScratchFreed %d, deallocator calls %d, pins %d; want all equal", c.ScratchFreed, frees.Load(), pins.Load())
	}
	wantCounters(t, c, map[string]int64{"FreeErrors": 0, "ScratchBytesPinned": 0, "Draining": 0, "Streams": 0})
	// Acquire lends only below the cap, and each goroutine abandons at most
	// the one slot it holds.
	if m := maxDraining.Load(); m > capacity-1+goroutines {
		t.Errorf("saw %d slots draining, more than the cap allows (%d)", m, capacity-1+goroutines)
	}
}

// The worker frees outside the tracker lock: a deallocator that calls into
// the tracker does not deadlock.
func TestADeallocatorThatCallsTheTrackerDoesNotDeadlock(t *testing.T) {
	f := newFixture(t, Options{Policy: Worker, MaxDraining: 1})
	results := make(chan error, 1)
	buf := bufferFunc(64, func(hip.DevPtr) error {
		done := make(chan Counters, 1)
		go func() { done <- f.tr.Counters() }()
		timer := time.NewTimer(streamtest.Limit / 2)
		defer timer.Stop()
		select {
		case <-done:
			results <- nil
		case <-timer.C:
			results <- errors.New("the tracker's Counters blocked inside the deallocator: it runs under the tracker lock")
		}
		return nil
	})
	a := f.abandonGated(t, f.acquire(t), buf, true)
	a.gate.Open()
	streamtest.Must(t, "deallocator calling the tracker", streamtest.Recv(t, "the deallocator ran", results))
	streamtest.Recv(t, "scratch freed", buf.Freed())
}

// A slow deallocator on the worker does not hold up Acquire on another
// goroutine.
func TestASlowDeallocatorDoesNotBlockAcquire(t *testing.T) {
	f := newFixture(t, Options{Policy: Worker, MaxDraining: 1})
	freeGate := streamtest.NewGate(t)
	entered := make(chan struct{})
	buf := bufferFunc(64, func(hip.DevPtr) error {
		close(entered)
		return freeGate.Wait()
	})
	a := f.abandonGated(t, f.acquire(t), buf, true)
	a.gate.Open()
	streamtest.Recv(t, "the deallocator started", entered)

	ctx, cancel := context.WithTimeout(context.Background(), streamtest.Limit/2)
	defer cancel()
	result := f.acquireAsync(ctx)
	timer := time.NewTimer(streamtest.Limit / 2)
	defer timer.Stop()
	select {
	case got := <-result:
		streamtest.Must(t, "Acquire while the deallocator runs", got.err)
		f.tr.Release(got.slot)
	case <-timer.C:
		t.Fatal("Acquire blocked behind a slow deallocator")
	}
	freeGate.Open()
	streamtest.Recv(t, "scratch freed", buf.Freed())
}

// A failed free is counted and the tracker carries on: the next
// abandonment is reclaimed and freed normally.
func TestAFailedFreeIsCountedAndDoesNotWedgeTheTracker(t *testing.T) {
	f := newFixture(t, Options{Policy: Worker, MaxDraining: 1})
	streamtest.Must(t, "fail the next free", f.sim.Faults().FailFrees(1, hip.ErrInvalidValue))
	first := f.abandonGated(t, f.acquire(t), streamtest.NewBuffer(t, f.sim, 256), true)
	first.gate.Open()
	streamtest.Recv(t, "first free attempted", first.buf.Freed())
	if hip.CodeOf(first.buf.FreeErr()) != hip.ErrInvalidValue {
		t.Fatalf("first free: %v, want the injected failure", first.buf.FreeErr())
	}
	f.ticket(t)
	wantCounters(t, f.tr.Counters(), map[string]int64{"FreeErrors": 1, "ScratchFreed": 0, "Draining": 0, "ScratchBytesPinned": 0})

	second := f.abandonGated(t, f.acquire(t), streamtest.NewBuffer(t, f.sim, 256), true)
	second.gate.Open()
	streamtest.Recv(t, "second scratch freed", second.buf.Freed())
	streamtest.Must(t, "second free", second.buf.FreeErr())
	f.ticket(t)
	wantCounters(t, f.tr.Counters(), map[string]int64{"FreeErrors": 1, "ScratchFreed": 1, "ReclaimedByCallback": 2})
}

// When the host callback cannot be queued, the slot stays reclaimable: by
// its done event, or without one by a query of its stream, at the next
// Acquire; the worker still frees its scratch.
func TestAbandonWhenTheCallbackCannotBeQueuedKeepsTheSlotReclaimable(t *testing.T) {
	for _, withDone := range []bool{true, false} {
		t.Run(fmt.Sprintf("done-event=%t", withDone), func(t *testing.T) {
			f := newFixture(t, Options{Policy: Worker, MaxDraining: 1})
			f.dev.FailHostFuncs(1)
			a := f.abandonGated(t, f.acquire(t), f.buffer(128), withDone)
			wantCounters(t, f.tr.Counters(), map[string]int64{"CallbackQueueFailed": 1, "Draining": 1})
			f.retire(t, a)
			s := f.acquire(t)
			streamtest.Recv(t, "scratch freed after the backstop", a.buf.Freed())
			wantCounters(t, f.tr.Counters(), map[string]int64{"ReclaimedByBackstop": 1, "ReclaimedByCallback": 0, "Draining": 0})
			f.tr.Release(s)
		})
	}
}

// The worker puts its OS thread's capture mode back before the thread
// returns to the pool, so no later goroutine runs in relaxed mode unawares.
func TestTheWorkerRestoresItsThreadsCaptureMode(t *testing.T) {
	f := newFixture(t, Options{Policy: Worker, MaxDraining: 1})
	a := f.abandonGated(t, f.acquire(t), f.buffer(8), true)
	a.gate.Open()
	f.ticket(t)
	streamtest.Must(t, "Close", f.tr.Close())

	changes := f.dev.ModeChanges()
	var worker *streamtest.ModeChange
	for i := range changes {
		if changes[i].Mode == hip.CaptureModeRelaxed {
			worker = &changes[i]
			break
		}
	}
	if worker == nil {
		t.Fatalf("the worker never entered relaxed mode (exchanges: %+v)", changes)
	}
	last := *worker
	for _, c := range changes {
		if c.TID == worker.TID {
			last = c
		}
	}
	if last.Mode != worker.Prev {
		t.Errorf("worker thread %d ended in %s mode, want its original %s (exchanges: %+v)", worker.TID, last.Mode, worker.Prev, changes)
	}
}

// Pin on a slot that is not lent out takes nothing: the pin is released at
// once instead of replacing one a running kernel may still use.
func TestPinOnASlotNotLentOutReleasesThePin(t *testing.T) {
	f := newFixture(t, Options{Policy: Worker, MaxDraining: 2})
	kept := f.buffer(10)
	a := f.abandonGated(t, f.acquire(t), kept, true)
	stray := f.buffer(20)
	f.tr.Pin(a.slot, stray)
	if !streamtest.Closed(stray.Freed()) {
		t.Error("Pin on a draining slot kept the new pin")
	}
	if streamtest.Closed(kept.Freed()) {
		t.Error("Pin on a draining slot freed the pin its kernel uses")
	}
	wantCounters(t, f.tr.Counters(), map[string]int64{"ScratchBytesPinned": 10})
	a.gate.Open()
	streamtest.Recv(t, "scratch freed", kept.Freed())
}

// The lazy policy's launch-path sweep queries abandoned streams from the
// caller's thread: during another thread's global capture the query is
// refused, the capture invalidated and the refusal remembered.
func TestSweepFromLaunchIsRefusedDuringAGlobalCapture(t *testing.T) {
	f := newFixture(t, Options{Policy: Lazy, MaxDraining: 2})
	a := f.abandonGated(t, f.acquire(t), f.buffer(64), true)
	f.retire(t, a)

	capThread := streamtest.StartThread(t)
	capStream := f.mustStream(t)
	capThread.Do(t, "begin a global capture", func() {
		streamtest.Must(t, "begin capture", f.sim.StreamBeginCapture(capStream, hip.CaptureModeGlobal))
	})
	sweeper := streamtest.StartThread(t)
	var err error
	sweeper.Do(t, "launch-path sweep", func() { err = f.tr.sweepFromLaunch() })
	if hip.CodeOf(err) != hip.ErrStreamCaptureUnsupported {
		t.Errorf("sweep during a global capture: %v, want the refusal", err)
	}
	if f.tr.FirstSweepRefusal() == nil {
		t.Error("the refusal was not remembered")
	}
	capThread.Do(t, "end the capture", func() {
		if _, err := f.sim.StreamEndCapture(capStream); hip.CodeOf(err) != hip.ErrStreamCaptureInvalidated {
			t.Errorf("end capture: %v, want invalidated", err)
		}
	})
	// The lazy sweep asks the stream, which is idle only once its last
	// operation has returned, a moment after the marker completes.
	streamtest.Must(t, "synchronize the abandoned stream", f.sim.StreamSynchronize(a.stream))
	sweeper.Do(t, "sweep after the capture", func() { err = f.tr.sweepFromLaunch() })
	streamtest.Must(t, "sweep after the capture", err)
	if !streamtest.Closed(a.buf.Freed()) {
		t.Error("the lazy sweep did not free the finished slot's scratch inline")
	}
	wantCounters(t, f.tr.Counters(), map[string]int64{"ReclaimedByLaunch": 1, "ReclaimedByBackstop": 1, "Draining": 0})
}

// The guarded launch-path sweep takes no lock and makes no runtime call
// while nothing is pinned, skips while the handle's stream captures, and
// otherwise reclaims in relaxed mode, counting slots (not pins).
func TestSweepGuardedIsGatedSkipsWhileCapturingAndCountsSlots(t *testing.T) {
	f := newFixture(t, Options{Policy: Guarded, MaxDraining: 2})
	handleStream := f.mustStream(t)

	f.dev.Reset()
	f.tr.mu.Lock()
	result := make(chan error, 1)
	go func() { result <- f.tr.sweepGuarded(handleStream) }()
	timer := time.NewTimer(streamtest.Limit / 2)
	select {
	case err := <-result:
		streamtest.Must(t, "SweepGuarded with nothing pinned", err)
	case <-timer.C:
		f.tr.mu.Unlock()
		streamtest.Recv(t, "SweepGuarded after the lock was let go", result)
		t.Fatal("SweepGuarded with nothing pinned waited for the tracker lock")
	}
	timer.Stop()
	f.tr.mu.Unlock()
	if calls := f.dev.Snapshot(); len(calls) != 0 {
		t.Errorf("SweepGuarded with nothing pinned made runtime calls: %v", calls)
	}

	a := f.abandonGated(t, f.acquire(t), f.buffer(64), true)
	f.retire(t, a)
	th := streamtest.StartThread(t)
	th.Do(t, "capture on the handle's stream", func() {
		streamtest.Must(t, "begin capture", f.sim.StreamBeginCapture(handleStream, hip.CaptureModeThreadLocal))
		f.dev.Reset()
		streamtest.Must(t, "SweepGuarded while capturing", f.tr.sweepGuarded(handleStream))
		if n := f.dev.Calls("EventQuery") + f.dev.Calls("StreamQuery"); n != 0 {
			t.Errorf("SweepGuarded queried %d times while the handle's stream captured", n)
		}
		wantCounters(t, f.tr.Counters(), map[string]int64{"Draining": 1, "ReclaimedByLaunch": 0})
		g, err := f.sim.StreamEndCapture(handleStream)
		streamtest.Must(t, "end capture", err)
		_ = f.sim.GraphDestroy(g)
	})

	th.Do(t, "sweep after the capture", func() {
		streamtest.Must(t, "SweepGuarded", f.tr.sweepGuarded(handleStream))
	})
	if !streamtest.Closed(a.buf.Freed()) {
		t.Error("the guarded sweep did not free the finished slot's scratch")
	}
	wantCounters(t, f.tr.Counters(), map[string]int64{"ReclaimedByLaunch": 1, "ReclaimedByBackstop": 1, "Draining": 0})
}
