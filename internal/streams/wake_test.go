package streams

import (
	"runtime"
	"testing"
	"time"

	"miotool/internal/streams/streamtest"
)

// untilWorkerAsleep waits until the worker has gone to sleep on its wake
// word (it does so Spin after its last work).
func (f *fixture) untilWorkerAsleep(t *testing.T) {
	t.Helper()
	r := f.tr.startThread()
	for deadline := time.Now().Add(streamtest.Limit); !r.wake.asleep(); runtime.Gosched() {
		if time.Now().After(deadline) {
			t.Fatalf("the worker did not go to sleep within %v", streamtest.Limit)
		}
	}
}

// Whether an Abandon wakes the worker (a system call on its caller's
// thread) depends on the worker's state and the options: a spinning worker
// has seen the Abandon and needs no wake; a sleeping one is woken when
// there is a spin to wake it into, unless NoAbandonWake leaves that to the
// callback, as no spin does.
// Either way both slots come home by their own callbacks.
func TestAnAbandonWakesTheWorkerOnlyWhenItSleepsAndSpinIsOn(t *testing.T) {
	for _, c := range []struct {
		name      string
		spin      time.Duration
		noWake    bool  // Options.NoAbandonWake
		sleepHere bool  // let the worker fall asleep before the second Abandon
		wakes     int64 // by the second Abandon
	}{
		// A minute: the worker spins until Close stops it.
		{"spinning worker", time.Minute, false, false, 0},
		{"sleeping worker", time.Millisecond, false, true, 1},
		{"sleeping worker, no spin", -1, false, true, 0},
		{"sleeping worker, no wake from Abandon", time.Millisecond, true, true, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			// A worker seen asleep can still be awake again by the time the
			// second Abandon looks (a futex wait may return early, and it
			// then spins Spin before sleeping again), and that Abandon
			// rightly makes no wake. So a wake that is wanted gets a few
			// tries, each on a fresh tracker; one that is not wanted gets
			// one, since no wake is what a spurious return would show.
			tries := 1
			if c.wakes > 0 {
				tries = 5
			}
			var got int64
			for try := 0; try < tries; try++ {
				got = abandonTwice(t, Options{Policy: Worker, MaxDraining: 2, Spin: c.spin, NoAbandonWake: c.noWake}, c.sleepHere)
				if got == c.wakes {
					break
				}
			}
			if got != c.wakes {
				t.Errorf("the second Abandon woke the worker %d times (in each of %d tries), want %d", got, tries, c.wakes)
			}
		})
	}
}

// abandonTwice abandons two gated slots on a new tracker, letting the
// worker fall asleep between them when sleepHere, and returns how many
// times the second Abandon woke the worker. Both slots must come home by
// their own callbacks.
func abandonTwice(t *testing.T, o Options, sleepHere bool) int64 {
	t.Helper()
	f := newFixture(t, o)
	first := f.abandonGated(t, f.acquire(t), f.buffer(64), true)
	if sleepHere {
		f.untilWorkerAsleep(t)
	}
	slot := f.acquire(t)
	before := f.tr.Counters().AbandonWakes
	second := f.abandonGated(t, slot, f.buffer(64), true)
	wakes := f.tr.Counters().AbandonWakes - before
	for _, a := range []abandoned{first, second} {
		a.gate.Open()
		streamtest.Recv(t, "scratch freed after the kernel retired", a.buf.Freed())
		if late := f.ticket(t); late {
			t.Error("a slot's own callback was counted late")
		}
	}
	wantCounters(t, f.tr.Counters(), map[string]int64{
		"ReclaimedByCallback": 2, "ReclaimedByBackstop": 0, "ScratchFreed": 2, "Draining": 0,
	})
	return wakes
}

// Close waits for an Abandon in flight through the counter's slow path
// too: a wait that began while calls were in flight is released by the
// last one to finish, and one that begins with none in flight returns at
// once.
func TestInflightWaitSeesTheLastDone(t *testing.T) {
	var f inflight
	never := make(chan time.Time)
	if !f.wait(never) {
		t.Fatal("a wait with nothing in flight did not return true")
	}
	f.add()
	f.add()
	waiting := make(chan struct{})
	f.mu.Lock()
	f.waiting = waiting
	f.mu.Unlock()
	got := make(chan bool, 1)
	go func() { got <- f.wait(never) }()
	streamtest.Recv(t, "the wait to find calls in flight", waiting)
	f.done()
	select {
	case <-got:
		t.Fatal("the wait returned with a call still in flight")
	default:
	}
	f.done()
	if !streamtest.Recv(t, "the wait released by the last done", got) {
		t.Fatal("the wait reported calls in flight")
	}
	expired := make(chan time.Time, 1)
	f.add()
	expired <- time.Now()
	if f.wait(expired) {
		t.Fatal("a wait past its deadline with a call in flight reported none")
	}
	f.done()
}
