package streams

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"miotool/internal/hip"
	"miotool/internal/hip/sim"
	"miotool/internal/streams/streamtest"
)

// fixture is one tracker on a simulated device, with the gated kernels and
// a record of every ticket the worker handled. The tracker talks to the
// device through a counting wrapper; the test's own setup calls go to the
// simulator directly so they do not show in the counts.
type fixture struct {
	sim *sim.Device
	dev *streamtest.Device
	k   *streamtest.Kernels
	tr  *Tracker
	// tickets receives, for each delivered ticket, whether it was late.
	tickets chan bool
	// released receives the number of pins (done events included) each
	// worker batch released.
	released chan int
}

func newFixture(t *testing.T, opts Options) *fixture {
	return newFixtureOn(t, hip.DialectHIP, opts)
}

// newFixtureOn builds the fixture. Cleanups run last-registered first, so
// the gates and holds a test opens later are released before the tracker
// closes, and the device closes last.
func newFixtureOn(t *testing.T, dialect hip.Dialect, opts Options) *fixture {
	t.Helper()
	sd := streamtest.NewSim(t, dialect)
	f := &fixture{sim: sd, dev: streamtest.Wrap(sd), tickets: make(chan bool, 4096), released: make(chan int, 4096)}
	tr, err := New(f.dev, opts)
	streamtest.Must(t, "new tracker", err)
	tr.afterDrain = func(late []bool, pins int) {
		for _, l := range late {
			select {
			case f.tickets <- l:
			default:
			}
		}
		if pins > 0 {
			select {
			case f.released <- pins:
			default:
			}
		}
	}
	f.tr = tr
	t.Cleanup(func() {
		done := make(chan error, 1)
		go func() { done <- tr.Close() }()
		timer := time.NewTimer(streamtest.Limit)
		defer timer.Stop()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("tracker Close at the end of the test: %v", err)
			}
			// Leaks show at the device, not only in the tracker's figures.
			if n, blocks := sd.MemoryInUse(); n != 0 {
				t.Errorf("after the tracker's Close, %d device bytes in %d blocks are still allocated", n, blocks)
			}
		case <-timer.C:
			t.Errorf("tracker Close did not return within %v", streamtest.Limit)
		}
	})
	f.k = streamtest.LoadKernels(t, sd)
	return f
}

// hold holds every host function until the returned release is called (or
// the test ends).
func (f *fixture) hold(t *testing.T) (release func()) {
	release = f.sim.Faults().HoldHostFuncs()
	t.Cleanup(release)
	return release
}

// acquire lends a slot, failing the test if none comes within the limit.
func (f *fixture) acquire(t *testing.T) *Slot {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), streamtest.Limit)
	defer cancel()
	s, err := f.tr.Acquire(ctx)
	streamtest.Must(t, "Acquire", err)
	return s
}

// acquireAsync starts an Acquire and returns where its outcome arrives.
func (f *fixture) acquireAsync(ctx context.Context) <-chan acquired {
	out := make(chan acquired, 1)
	go func() {
		s, err := f.tr.Acquire(ctx)
		out <- acquired{s, err}
	}()
	return out
}

type acquired struct {
	slot *Slot
	err  error
}

var fakeAddr atomic.Uint64

// buffer is a pin whose deallocator does nothing but close Freed, for tests
// where the device's free (which waits for every stream) is not the point.
func (f *fixture) buffer(bytes int) *streamtest.Buffer {
	return bufferFunc(bytes, func(hip.DevPtr) error { return nil })
}

func bufferFunc(bytes int, free func(hip.DevPtr) error) *streamtest.Buffer {
	p := hip.DevPtr(0x1000_0000 + fakeAddr.Add(1)<<12)
	return streamtest.NewBufferFunc(p, bytes, free)
}

// abandoned is a slot given up while its kernel waits at gate.
type abandoned struct {
	slot   *Slot
	stream hip.Stream
	buf    *streamtest.Buffer
	gate   *streamtest.Gate
	done   hip.Event // zero when abandoned without one
	// marker is a test-owned event recorded after the work (and the done
	// event) and before the callback: synchronizing it says the kernel has
	// retired without touching anything the tracker owns.
	marker hip.Event
}

// abandonGated pins buf to s, queues a gated kernel, records a done event
// when withDone, and abandons the slot.
func (f *fixture) abandonGated(t *testing.T, s *Slot, buf *streamtest.Buffer, withDone bool) abandoned {
	t.Helper()
	a := abandoned{slot: s, stream: s.Stream(), buf: buf}
	if buf != nil {
		f.tr.Pin(s, buf)
	}
	a.gate = f.k.Hold(t, a.stream)
	if withDone {
		a.done = streamtest.DoneEvent(t, f.sim, a.stream)
	}
	a.marker = streamtest.Event(t, f.sim, a.stream)
	f.tr.Abandon(s, a.done)
	return a
}

// retire opens the kernel's gate and waits until the kernel and its done
// event have completed (the callback may still be pending).
func (f *fixture) retire(t *testing.T, a abandoned) {
	t.Helper()
	a.gate.Open()
	streamtest.Must(t, "synchronize the marker after the kernel", f.sim.EventSynchronize(a.marker))
}

// ticket waits for the worker to handle the next delivered ticket and says
// whether it was late.
func (f *fixture) ticket(t *testing.T) bool {
	t.Helper()
	return streamtest.Recv(t, "a delivered ticket handled by the worker", f.tickets)
}

// workerReleased waits until worker batches have released at least n pins
// (done events count as pins) since the last wait.
func (f *fixture) workerReleased(t *testing.T, n int) {
	t.Helper()
	for got := 0; got < n; {
		got += streamtest.Recv(t, "pins released by the worker", f.released)
	}
}

// handled reports, without waiting, whether the worker has handled a
// ticket that was not yet taken, and whether it was late.
func (f *fixture) handled() (late, ok bool) {
	select {
	case late = <-f.tickets:
		return late, true
	default:
		return false, false
	}
}

// wantCounters compares the named figures only.
func wantCounters(t *testing.T, got Counters, want map[string]int64) {
	t.Helper()
	fields := map[string]int64{
		"Acquired": got.Acquired, "Released": got.Released, "Abandoned": got.Abandoned,
		"ReclaimedByCallback": got.ReclaimedByCallback, "ReclaimedByBackstop": got.ReclaimedByBackstop,
		"ReclaimedByLaunch": got.ReclaimedByLaunch, "ReclaimedByPoller": got.ReclaimedByPoller,
		"LeakedBytes": got.LeakedBytes, "Polls": got.Polls, "CallbackQueueFailed": got.CallbackQueueFailed,
		"LateCallbacks": got.LateCallbacks, "ScratchBytesPinned": got.ScratchBytesPinned,
		"ScratchFreed": got.ScratchFreed, "FreeErrors": got.FreeErrors,
		"Draining": int64(got.Draining), "Streams": int64(got.Streams),
		"AbandonWakes": got.AbandonWakes,
	}
	for name, w := range want {
		g, ok := fields[name]
		if !ok {
			t.Fatalf("wantCounters: no counter %q", name)
		}
		if g != w {
			t.Errorf("%s = %d, want %d (all: %+v)", name, g, w, got)
		}
	}
}
