package streams

import (
	"fmt"
	"testing"

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
