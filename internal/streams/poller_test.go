package streams

import (
	"fmt"
	"testing"
	"time"

	"miotool/internal/hip"
	"miotool/internal/streams/streamtest"
)

// Under the poller policy an abandoned slot's scratch is freed once its
// kernel retires, by the poller on its own thread in relaxed mode, with no
// host function queued and no further call into the tracker; a slot
// abandoned without a done event is polled by its stream.
func TestThePollerReclaimsWithoutACallback(t *testing.T) {
	for _, withDone := range []bool{true, false} {
		t.Run(fmt.Sprintf("done-event=%t", withDone), func(t *testing.T) {
			f := newFixture(t, Options{Policy: Poller, MaxDraining: 2})
			modes := make(chan hip.CaptureMode, 1)
			buf := bufferFunc(4096, func(hip.DevPtr) error {
				m, err := streamtest.ThreadMode(f.sim)
				modes <- m
				return err
			})
			a := f.abandonGated(t, f.acquire(t), buf, withDone)
			if streamtest.Closed(buf.Freed()) {
				t.Fatal("scratch freed while its kernel still runs")
			}
			a.gate.Open()
			streamtest.Recv(t, "scratch freed by the poller", buf.Freed())
			streamtest.Must(t, "free", buf.FreeErr())
			if m := streamtest.Recv(t, "the deallocator's mode", modes); m != hip.CaptureModeRelaxed {
				t.Errorf("deallocator ran in %s mode, want relaxed (the poller's thread)", m)
			}
			f.ticket(t)
			wantCounters(t, f.tr.Counters(), map[string]int64{
				"ReclaimedByPoller": 1, "ReclaimedByBackstop": 0, "ReclaimedByCallback": 0,
				"ScratchFreed": 1, "ScratchBytesPinned": 0, "Draining": 0,
			})
			if n := f.dev.Calls("LaunchHostFunc"); n != 0 {
				t.Errorf("the poller policy queued %d host functions, want none", n)
			}
			if withDone {
				if err := f.sim.EventQuery(a.done); hip.CodeOf(err) != hip.ErrInvalidHandle {
					t.Errorf("done event after the slot retired: %v, want it destroyed", err)
				}
			}
		})
	}
}

// With nothing draining the poller goes to sleep with no deadline (no
// query, no timed wake-up), and an Abandon wakes it again.
func TestThePollerIdlesWhenNothingDrains(t *testing.T) {
	f := newFixture(t, Options{Policy: Poller, MaxDraining: 2})
	idle := make(chan int64, 16)
	f.tr.beforeIdle = func() { idle <- f.tr.Counters().Polls }
	// idleAfter waits for the poller to go idle having polled more than
	// before (it may also idle once at its start, before any slot).
	idleAfter := func(what string, before int64) int64 {
		t.Helper()
		for {
			if polls := streamtest.Recv(t, what, idle); polls > before {
				if d := f.tr.Counters().Draining; d != 0 {
					t.Fatalf("the poller went idle with %d slots draining", d)
				}
				return polls
			}
		}
	}

	first := f.abandonGated(t, f.acquire(t), f.buffer(8), true)
	first.gate.Open()
	streamtest.Recv(t, "first scratch freed", first.buf.Freed())
	polls := idleAfter("the poller idle after the first slot retired", 0)

	second := f.abandonGated(t, f.acquire(t), f.buffer(8), true)
	second.gate.Open()
	streamtest.Recv(t, "second scratch freed: the poller woke for it", second.buf.Freed())
	idleAfter("the poller idle after the second slot retired", polls)
}

// The poller and Acquire's backstop race for the same finished slot
// (callbacks are not involved): each slot is retired once, its pin freed
// once, and the figures add up.
func TestThePollerAndTheBackstopRetireEachSlotOnce(t *testing.T) {
	f := newFixture(t, Options{Policy: Poller, MaxDraining: 1})
	const rounds = 40
	var bufs []*streamtest.Buffer
	for range rounds {
		s := f.acquire(t)
		buf := f.buffer(16)
		bufs = append(bufs, buf)
		f.tr.Pin(s, buf)
		f.k.Tiny(t, s.Stream())
		f.tr.Abandon(s, streamtest.DoneEvent(t, f.sim, s.Stream()))
	}
	streamtest.Must(t, "Close", f.tr.Close())
	for i, b := range bufs {
		if !streamtest.Closed(b.Freed()) || b.FreeAttempts() != 1 {
			t.Errorf("buffer %d: freed %t after %d attempts, want once", i, streamtest.Closed(b.Freed()), b.FreeAttempts())
		}
	}
	c := f.tr.Counters()
	if c.ReclaimedByPoller+c.ReclaimedByBackstop != rounds {
		t.Errorf("ReclaimedByPoller %d + ReclaimedByBackstop %d != %d abandoned", c.ReclaimedByPoller, c.ReclaimedByBackstop, rounds)
	}
	wantCounters(t, c, map[string]int64{"ScratchFreed": rounds, "FreeErrors": 0, "Draining": 0, "ScratchBytesPinned": 0})
}

// A poller asleep since its last slot went home is woken by the next
// Abandon itself. Nothing else could start its poll here: the idle sleep
// has no deadline, the test makes no Acquire and no launch after the
// Abandon, and the tracker is not closed until the scratch is back.
func TestAColdAbandonWakesTheSleepingPoller(t *testing.T) {
	f := newFixture(t, Options{Policy: Poller, MaxDraining: 2, Spin: time.Millisecond})
	first := f.abandonGated(t, f.acquire(t), f.buffer(8), true)
	first.gate.Open()
	streamtest.Recv(t, "first scratch freed", first.buf.Freed())
	f.untilWorkerAsleep(t)

	slot := f.acquire(t)
	before := f.tr.Counters()
	second := f.abandonGated(t, slot, f.buffer(8), true)
	second.gate.Open()
	streamtest.Recv(t, "second scratch freed by the poller the Abandon woke", second.buf.Freed())
	after := f.tr.Counters()
	if got := after.AbandonWakes - before.AbandonWakes; got != 1 {
		t.Errorf("the Abandon made %d wakes of the sleeping poller, want 1", got)
	}
	if after.WorkerWakeups <= before.WorkerWakeups {
		t.Errorf("the poller's wake-ups went from %d to %d: it did not wake for the Abandon", before.WorkerWakeups, after.WorkerWakeups)
	}
	wantCounters(t, after, map[string]int64{"ReclaimedByPoller": 2, "ReclaimedByBackstop": 0, "Draining": 0})
}

// After its last slot went home the poller spins on its wake word for
// Spin before it sleeps, so an Abandon soon after finds it awake and makes
// no system call; one after Spin finds it asleep and wakes it. Both slots
// come home by the poller.
func TestAnAbandonWakesThePollerOnlyOnceItSleeps(t *testing.T) {
	for _, c := range []struct {
		name      string
		spin      time.Duration
		sleepHere bool
		wakes     int64
	}{
		// A minute: the poller spins until Close stops it.
		{"spinning poller", time.Minute, false, 0},
		{"sleeping poller", time.Millisecond, true, 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			// A poller seen asleep may be awake again by the time the
			// Abandon looks (a futex wait can return early; it then spins
			// before sleeping again), and that Abandon rightly makes no
			// wake: a wake that is wanted gets a few tries, each on a fresh
			// tracker.
			tries := 1
			if c.wakes > 0 {
				tries = 5
			}
			var got int64
			for try := 0; try < tries; try++ {
				if got = pollerAbandonTwice(t, c.spin, c.sleepHere); got == c.wakes {
					break
				}
			}
			if got != c.wakes {
				t.Errorf("the second Abandon woke the poller %d times (in each of %d tries), want %d", got, tries, c.wakes)
			}
		})
	}
}

// pollerAbandonTwice abandons one gated slot and, once it is home (and the
// poller asleep, when sleepHere), another; it returns how many times the
// second Abandon woke the poller.
func pollerAbandonTwice(t *testing.T, spin time.Duration, sleepHere bool) int64 {
	t.Helper()
	f := newFixture(t, Options{Policy: Poller, MaxDraining: 2, Spin: spin})
	first := f.abandonGated(t, f.acquire(t), f.buffer(8), true)
	first.gate.Open()
	streamtest.Recv(t, "first scratch freed", first.buf.Freed())
	if sleepHere {
		f.untilWorkerAsleep(t)
	}
	slot := f.acquire(t)
	before := f.tr.Counters().AbandonWakes
	second := f.abandonGated(t, slot, f.buffer(8), true)
	wakes := f.tr.Counters().AbandonWakes - before
	second.gate.Open()
	streamtest.Recv(t, "second scratch freed", second.buf.Freed())
	wantCounters(t, f.tr.Counters(), map[string]int64{"ReclaimedByPoller": 2, "ReclaimedByBackstop": 0})
	return wakes
}
