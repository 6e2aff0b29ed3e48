package streams

import (
	"runtime"
	"testing"
	"time"

	"miotool/internal/streams/streamtest"
)

// After its fast phase the poller sleeps a sixteenth of the youngest
// slot's age between rounds, never less than minPollSleep nor more than
// PollSleepMax, so that the reclaim's delay stays a small part of the
// overrun without a long drain waking it often.
func TestThePollersSleepFollowsTheDrainsAge(t *testing.T) {
	for _, c := range []struct {
		age, max, want time.Duration
	}{
		{0, time.Millisecond, minPollSleep},
		{100 * time.Microsecond, time.Millisecond, minPollSleep},
		{250 * time.Microsecond, time.Millisecond, 15625 * time.Nanosecond},
		{2 * time.Millisecond, time.Millisecond, 125 * time.Microsecond},
		{16 * time.Millisecond, time.Millisecond, time.Millisecond},
		{time.Hour, time.Millisecond, time.Millisecond},
		{2 * time.Millisecond, 50 * time.Microsecond, 50 * time.Microsecond},
	} {
		if got := pollSleep(c.age, c.max); got != c.want {
			t.Errorf("pollSleep(%v, max %v) = %v, want %v", c.age, c.max, got, c.want)
		}
	}
}

// spinUntil returns true for a signal (set before or during the spin) and
// false at its end with none, clearing the word it reports.
func TestSpinUntilReportsASignalOrItsEnd(t *testing.T) {
	var w waker
	if w.spinUntil(monoNow()) {
		t.Error("spinUntil reported a signal that never came")
	}
	w.signal()
	if !w.spinUntil(monoNow() + int64(streamtest.Limit)) {
		t.Error("spinUntil missed a signal made before it")
	}
	if w.word.Load() != 0 {
		t.Error("spinUntil left the word it reported set")
	}
	done := make(chan bool, 1)
	go func() { done <- w.spinUntil(monoNow() + int64(streamtest.Limit)) }()
	w.signal()
	if !streamtest.Recv(t, "spinUntil's return after a signal", done) {
		t.Error("spinUntil missed a signal made while it spun")
	}
}

// An announced Abandon (AbandonBy) is the poller's idle alarm while the
// slot is lent: the earliest that has not lapsed Spin past its time
// counts; Release and Abandon withdraw theirs, a slot not lent takes none,
// and the policies without a poller ignore it.
func TestAbandonByIsWithdrawnByReleaseAndAbandon(t *testing.T) {
	spin := time.Millisecond
	f := newFixture(t, Options{Policy: Poller, MaxDraining: 4, Spin: spin})
	now := time.Now()
	at := func(d time.Duration) int64 { return int64(now.Add(d).Sub(clockEpoch)) }
	next := func() int64 { return f.tr.nextAbandonBy(int64(now.Sub(clockEpoch)), spin) }

	a, b := f.acquire(t), f.acquire(t)
	if got := next(); got != 0 {
		t.Fatalf("with nothing announced the next Abandon is %d, want none", got)
	}
	f.tr.AbandonBy(a, now.Add(time.Hour))
	f.tr.AbandonBy(b, now.Add(time.Minute))
	if got, want := next(), at(time.Minute); got != want {
		t.Errorf("next announced Abandon %d, want the earlier one, %d", got, want)
	}
	f.tr.Release(b)
	if got, want := next(), at(time.Hour); got != want {
		t.Errorf("after the earlier slot's Release, next %d, want %d", got, want)
	}
	f.tr.AbandonBy(b, now)
	if got := next(); got != at(time.Hour) {
		t.Errorf("an announcement for a released slot counted: next %d", got)
	}
	c := f.acquire(t)
	f.tr.AbandonBy(c, now.Add(-2*spin))
	if got := next(); got != at(time.Hour) {
		t.Errorf("an announcement more than Spin past counted: next %d", got)
	}
	f.tr.Release(c)
	g := f.abandonGated(t, a, f.buffer(8), true)
	if got := next(); got != 0 {
		t.Errorf("after the Abandon, next %d, want none", got)
	}
	g.gate.Open()
	streamtest.Recv(t, "scratch freed by the poller", g.buf.Freed())
	reused := f.acquire(t)
	if got := next(); got != 0 {
		t.Errorf("a slot lent again kept its old announcement: next %d", got)
	}
	f.tr.Release(reused)

	w := newFixture(t, Options{Policy: Worker, MaxDraining: 2})
	s := w.acquire(t)
	w.tr.AbandonBy(s, now)
	if got := w.tr.nextAbandonBy(int64(now.Sub(clockEpoch)), spin); got != 0 {
		t.Errorf("the worker policy took an announcement: %d", got)
	}
	if w.tr.reclaimOnce.Do(func() {}); w.tr.Counters().WorkerWakeups != 0 {
		t.Error("AbandonBy woke the worker")
	}
	w.tr.Release(s)
}

// A poller asleep with nothing draining wakes for an announced Abandon
// that comes due and spins for it, and an Abandon then finds it awake;
// with the announcement withdrawn and lapsed it sleeps again with no
// deadline. The announcement is due at once, so no clock decides whether
// the poller spins; Spin is long enough that the Abandon always comes
// while it does.
func TestThePollerWakesForAnAnnouncedAbandon(t *testing.T) {
	f := newFixture(t, Options{Policy: Poller, MaxDraining: 2, Spin: time.Minute})
	announced := make(chan struct{}, 64)
	f.tr.beforeAnnounced = func() { announced <- struct{}{} }
	s := f.acquire(t)
	f.tr.AbandonBy(s, time.Now())
	streamtest.Recv(t, "the poller spinning for the announced Abandon", announced)
	wakes := f.tr.Counters().AbandonWakes
	g := f.abandonGated(t, s, f.buffer(8), true)
	if got := f.tr.Counters().AbandonWakes - wakes; got != 0 {
		t.Errorf("the announced Abandon made %d wakes of the poller, want none: it was spinning", got)
	}
	g.gate.Open()
	streamtest.Recv(t, "scratch freed by the poller", g.buf.Freed())
	wantCounters(t, f.tr.Counters(), map[string]int64{"ReclaimedByPoller": 1, "ReclaimedByBackstop": 0, "Draining": 0})
}

// An announcement far ahead does not keep the poller awake (it sleeps
// until shortly before it), and one withdrawn by Release leaves it asleep
// with no deadline, as with nothing announced.
func TestThePollerSleepsThroughAWithdrawnAnnouncement(t *testing.T) {
	f := newFixture(t, Options{Policy: Poller, MaxDraining: 2, Spin: time.Millisecond})
	idle := make(chan struct{}, 1024)
	announced := make(chan struct{}, 64)
	f.tr.beforeIdle = func() { idle <- struct{}{} }
	f.tr.beforeAnnounced = func() { announced <- struct{}{} }
	s := f.acquire(t)
	f.tr.AbandonBy(s, time.Now().Add(time.Hour))
	f.untilAsleepAgain(t)
	if len(announced) != 0 {
		t.Fatal("the poller spun for an Abandon announced an hour ahead")
	}
	f.tr.Release(s)
	// A withdrawn announcement leaves the alarm set; nothing wakes the
	// poller to cancel it, and none must be set once it next idles: it is
	// woken here (as by any Abandon) and must then sleep without one.
	f.tr.reclaim.wake.signal()
	f.untilAsleepAgain(t)
	for len(idle) > 0 {
		<-idle
	}
	window := time.NewTimer(300 * time.Millisecond)
	defer window.Stop()
	select {
	case <-idle:
		t.Fatal("the poller woke with nothing draining and the announcement withdrawn")
	case <-announced:
		t.Fatal("the poller spun for a withdrawn announcement")
	case <-window.C:
	}
}

// untilAsleepAgain waits until the poller has taken the signal on its wake
// word and gone back to sleep: it clears sleeping before it takes the
// word, so a taken word and a set sleeping flag mean a new sleep.
func (f *fixture) untilAsleepAgain(t *testing.T) {
	t.Helper()
	w := &f.tr.reclaim.wake
	for deadline := time.Now().Add(streamtest.Limit); w.word.Load() != 0 || !w.asleep(); runtime.Gosched() {
		if time.Now().After(deadline) {
			t.Fatalf("the poller did not go back to sleep within %v", streamtest.Limit)
		}
	}
}
