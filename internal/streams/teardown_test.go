package streams

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"miotool/internal/hip"
	"miotool/internal/streams/streamtest"
)

// closeAsync starts Close and returns where its error arrives.
func (f *fixture) closeAsync() <-chan error {
	out := make(chan error, 1)
	go func() { out <- f.tr.Close() }()
	return out
}

// A kernel or a host callback that never returns cannot hang Close: at its
// deadline it returns an error naming the stream still busy and the bytes
// it pins, and frees nothing that the kernel may still write to.
func TestCloseIsBoundedByItsDeadline(t *testing.T) {
	for _, tc := range []struct {
		name     string
		policy   Policy
		callback bool // the callback never returns (else the kernel)
	}{
		{"worker/callback", Worker, true},
		{"worker/kernel", Worker, false},
		{"poller/kernel", Poller, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, Options{Policy: tc.policy, MaxDraining: 1, CloseTimeout: 100 * time.Millisecond})
			if tc.callback {
				f.hold(t)
			}
			a := f.abandonGated(t, f.acquire(t), f.buffer(4096), true)
			if tc.callback {
				f.retire(t, a)
			}
			err := streamtest.Recv(t, "Close with work that never returns", f.closeAsync())
			if err == nil {
				t.Fatal("Close returned no error with a stream still busy")
			}
			stream := fmt.Sprintf("stream %#x", uintptr(a.stream))
			for _, want := range []string{stream, "4096 bytes", "still busy"} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("Close: %v; want it to name %q", err, want)
				}
			}
			if streamtest.Closed(a.buf.Freed()) {
				t.Error("Close freed scratch pinned by a stream still busy")
			}
			wantCounters(t, f.tr.Counters(), map[string]int64{"LeakedBytes": 4096, "ScratchFreed": 0})
		})
	}
}

// The handle's failed free is retried at teardown; a block whose free
// fails again stays on the device and Close says how many bytes.
func TestCloseRetriesAFailedFreeOrReportsTheLeak(t *testing.T) {
	for _, tc := range []struct {
		name      string
		failures  int
		wantErr   bool
		wantBytes int64 // device bytes in use after Close
	}{
		{"retry succeeds", 1, false, 0},
		{"retry fails too", 2, true, 256},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, Options{Policy: Worker, MaxDraining: 1})
			streamtest.Must(t, "fail frees", f.sim.Faults().FailFrees(tc.failures, hip.ErrInvalidValue))
			buf := streamtest.NewBuffer(t, f.sim, 256)
			a := f.abandonGated(t, f.acquire(t), buf, true)
			a.gate.Open()
			streamtest.Recv(t, "the first free attempted", buf.Freed())
			f.ticket(t)
			err := f.tr.Close()
			if (err != nil) != tc.wantErr || (err != nil && !strings.Contains(err.Error(), "256 bytes")) {
				t.Errorf("Close: %v; want an error naming 256 bytes: %t", err, tc.wantErr)
			}
			if n, _ := f.sim.MemoryInUse(); n != tc.wantBytes {
				t.Errorf("%d device bytes in use after Close, want %d", n, tc.wantBytes)
			}
			if got := buf.FreeAttempts(); got != 2 {
				t.Errorf("free attempted %d times, want 2 (once, then the retry at Close)", got)
			}
			leaked := int64(0)
			if tc.wantErr {
				leaked = 256
				// Let the device end the test clean.
				streamtest.Must(t, "free the leaked block", f.sim.Free(buf.Ptr()))
			}
			wantCounters(t, f.tr.Counters(), map[string]int64{"LeakedBytes": leaked, "FreeErrors": int64(tc.failures)})
		})
	}
}

// With host callbacks delayed (late, not held), every abandonment is still
// retired exactly once, by its own callback or by the backstop when the
// callback comes too late, and every pin is freed once.
func TestDelayedCallbacksRetireEachSlotOnce(t *testing.T) {
	f := newFixture(t, Options{Policy: Worker, MaxDraining: 1})
	streamtest.Must(t, "delay host functions", f.sim.Faults().DelayHostFuncs(2*time.Millisecond))
	const rounds = 20
	var bufs []*streamtest.Buffer
	for range rounds {
		s := f.acquire(t)
		buf := f.buffer(32)
		bufs = append(bufs, buf)
		f.tr.Pin(s, buf)
		f.k.Tiny(t, s.Stream())
		f.tr.Abandon(s, streamtest.DoneEvent(t, f.sim, s.Stream()))
	}
	streamtest.Must(t, "Close", f.tr.Close())
	for i, b := range bufs {
		if b.FreeAttempts() != 1 {
			t.Errorf("buffer %d freed %d times, want once", i, b.FreeAttempts())
		}
	}
	c := f.tr.Counters()
	if c.ReclaimedByCallback+c.ReclaimedByBackstop != rounds {
		t.Errorf("ReclaimedByCallback %d + ReclaimedByBackstop %d != %d", c.ReclaimedByCallback, c.ReclaimedByBackstop, rounds)
	}
	if c.LateCallbacks != c.ReclaimedByBackstop {
		t.Errorf("LateCallbacks %d != ReclaimedByBackstop %d: every delayed callback arrives, late or not", c.LateCallbacks, c.ReclaimedByBackstop)
	}
	wantCounters(t, c, map[string]int64{"ScratchFreed": rounds, "Draining": 0, "CallbackQueueFailed": 0})
}

// Close does not overtake an Abandon that is still queuing its callback:
// with the runtime's enqueue held inside Abandon, Close neither
// synchronizes a stream, nor stops the worker, nor returns; once the
// enqueue goes through, the callback is handled as the slot's own.
func TestCloseWaitsForAnAbandonInFlight(t *testing.T) {
	f := newFixture(t, Options{Policy: Worker, MaxDraining: 1})
	s := f.acquire(t)
	buf := f.buffer(64)
	f.tr.Pin(s, buf)
	f.k.Tiny(t, s.Stream())
	done := streamtest.DoneEvent(t, f.sim, s.Stream())
	f.tr.startThread() // the worker runs before Close begins
	entered, release := f.dev.HoldHostFuncEnqueue(t)
	var wg sync.WaitGroup
	wg.Go(func() { f.tr.Abandon(s, done) })
	streamtest.Recv(t, "Abandon inside the runtime's enqueue", entered)

	waiting := make(chan struct{})
	f.tr.abandons.mu.Lock()
	f.tr.abandons.waiting = waiting
	f.tr.abandons.mu.Unlock()
	synced := f.dev.Begins("StreamSynchronize")
	closed := f.closeAsync()
	select {
	case <-waiting:
	case <-synced:
		t.Fatal("Close synchronized a stream while an Abandon was still queuing its callback")
	case err := <-closed:
		t.Fatalf("Close returned (%v) while an Abandon was still queuing its callback", err)
	case <-time.After(streamtest.Limit):
		t.Fatal("Close neither waited for the Abandon in flight nor went on")
	}
	if streamtest.Closed(f.tr.reclaim.done) || f.tr.reclaim.stopping.Load() {
		t.Fatal("Close stopped the worker while an Abandon was still queuing its callback")
	}
	release()
	wg.Wait()
	streamtest.Must(t, "Close", streamtest.Recv(t, "Close after the enqueue", closed))
	if late, ok := f.handled(); !ok || late {
		t.Errorf("the callback was not handled as the slot's own before Close returned (late %t, handled %t)", late, ok)
	}
	wantCounters(t, f.tr.Counters(), map[string]int64{
		"ReclaimedByCallback": 1, "ReclaimedByBackstop": 0, "CallbackQueueFailed": 0, "ScratchFreed": 1,
	})
}

// The host callback only hands its abandonment over: it takes no tracker
// lock, so with the lock held elsewhere it still returns and its stream
// drains; the worker retires the slot once the lock is free.
func TestTheCallbackTakesNoTrackerLock(t *testing.T) {
	f := newFixture(t, Options{Policy: Worker, MaxDraining: 1})
	a := f.abandonGated(t, f.acquire(t), f.buffer(64), true)
	f.tr.mu.Lock()
	locked := true
	defer func() {
		if locked {
			f.tr.mu.Unlock()
		}
	}()
	a.gate.Open()
	synced := make(chan error, 1)
	go func() { synced <- f.sim.StreamSynchronize(a.stream) }()
	streamtest.Must(t, "the abandoned stream drains with the tracker lock held", streamtest.Recv(t, "the callback returned", synced))
	f.tr.mu.Unlock()
	locked = false
	if late := f.ticket(t); late {
		t.Error("the callback was counted late")
	}
	streamtest.Recv(t, "scratch freed", a.buf.Freed())
}
