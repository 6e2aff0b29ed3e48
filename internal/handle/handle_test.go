package handle_test

import (
	"context"
	"fmt"
	"maps"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"miotool/internal/handle"
	"miotool/internal/hip"
	"miotool/internal/hip/sim"
	"miotool/internal/streams"
	"miotool/internal/streams/streamtest"
)

// setup is a handle on a simulated device seen through a counting wrapper;
// the test's own calls go to the simulator directly.
type setup struct {
	sim *sim.Device
	dev *streamtest.Device
	k   *streamtest.Kernels
	h   *handle.Handle
}

func newSetup(t *testing.T, opts handle.Options) *setup {
	t.Helper()
	sd := streamtest.NewSim(t, hip.DialectHIP)
	s := &setup{sim: sd, dev: streamtest.Wrap(sd)}
	if opts.MaxDraining == 0 {
		opts.MaxDraining = 2
	}
	h, err := handle.New(s.dev, opts)
	streamtest.Must(t, "new handle", err)
	s.h = h
	t.Cleanup(func() {
		done := make(chan error, 1)
		go func() { done <- h.Close() }()
		timer := time.NewTimer(streamtest.Limit)
		defer timer.Stop()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("handle Close at the end of the test: %v", err)
			}
			// Leaks show at the device, not only in the tracker's figures.
			if n, blocks := sd.MemoryInUse(); n != 0 {
				t.Errorf("after the handle's Close, %d device bytes in %d blocks are still allocated", n, blocks)
			}
		case <-timer.C:
			t.Errorf("handle Close did not return within %v", streamtest.Limit)
		}
	})
	s.k = streamtest.LoadKernels(t, sd)
	return s
}

// abandonedFind is what find leaves behind after a naive evaluation timed
// out: a tracker slot, abandoned with its kernel still running, pinning the
// only reference to a handle scratch buffer.
type abandonedFind struct {
	scratch *handle.Scratch
	stream  hip.Stream
	gate    *streamtest.Gate
	marker  hip.Event // test-owned, recorded after the kernel and the done event
}

func (s *setup) abandonFind(t *testing.T, bytes int) abandonedFind {
	t.Helper()
	tr := s.h.Tracker()
	scratch, err := s.h.ScratchBuffer(bytes)
	streamtest.Must(t, "scratch buffer", err)
	ctx, cancel := context.WithTimeout(context.Background(), streamtest.Limit)
	defer cancel()
	slot, err := tr.Acquire(ctx)
	streamtest.Must(t, "acquire a tracker slot", err)
	tr.Pin(slot, scratch)
	a := abandonedFind{scratch: scratch, stream: slot.Stream()}
	a.gate = s.k.Hold(t, slot.Stream())
	done := streamtest.DoneEvent(t, s.sim, slot.Stream())
	a.marker = streamtest.Event(t, s.sim, slot.Stream())
	tr.Abandon(slot, done)
	streamtest.Must(t, "drop the scratch cache", s.h.DropScratchCache())
	return a
}

// finish lets the abandoned kernel retire and waits until it has.
func (s *setup) finish(t *testing.T, a abandonedFind) {
	t.Helper()
	a.gate.Open()
	streamtest.Must(t, "wait for the abandoned kernel", s.sim.EventSynchronize(a.marker))
}

func (s *setup) run(t *testing.T) error {
	return s.h.Run(s.k.TinyFunc(), hip.D1(1), hip.D1(1), 0)
}

// Run's runtime calls under each policy, with and without an abandoned
// evaluation pinning scratch: the worker policy makes no call beyond the
// launch at all; guarded makes none while nothing is pinned.
func TestRunMakesOnlyItsPolicysCalls(t *testing.T) {
	for _, tc := range []struct {
		policy  streams.Policy
		pinned  bool
		wantRun map[string]int
	}{
		{streams.Worker, false, map[string]int{"LaunchKernel": 1}},
		{streams.Worker, true, map[string]int{"LaunchKernel": 1}},
		{streams.Guarded, false, map[string]int{"LaunchKernel": 1}},
		{streams.Guarded, true, map[string]int{"StreamIsCapturing": 1, "ThreadExchangeCaptureMode": 2, "EventQuery": 1, "LaunchKernel": 1}},
		{streams.Lazy, false, map[string]int{"LaunchKernel": 1}},
		{streams.Lazy, true, map[string]int{"StreamQuery": 1, "LaunchKernel": 1}},
		{streams.Poller, false, map[string]int{"LaunchKernel": 1}},
		{streams.Poller, true, map[string]int{"LaunchKernel": 1}},
	} {
		t.Run(fmt.Sprintf("%s/pinned=%t", tc.policy, tc.pinned), func(t *testing.T) {
			s := newSetup(t, handle.Options{Policy: tc.policy})
			if tc.pinned {
				s.abandonFind(t, 256)
			}
			// Counted on the launching thread only: the poller queries from
			// its own thread meanwhile.
			th := streamtest.StartThread(t)
			var tid int
			th.Do(t, "Run", func() {
				tid = syscall.Gettid()
				s.dev.Reset()
				streamtest.Must(t, "Run", s.run(t))
			})
			if got := s.dev.SnapshotOn(tid); !maps.Equal(got, tc.wantRun) {
				t.Errorf("Run made %v, want %v", got, tc.wantRun)
			}
		})
	}
}

// Whether a capture survives a Run made while an abandoned evaluation is
// still running. The lazy policy (pre-fix) polls the abandoned stream from
// the launch path: the refusal invalidates a global capture on another
// thread, and a capture of the handle's own stream on this thread. The
// guarded and worker policies leave both valid.
func TestRunDuringACaptureWithAnAbandonedStream(t *testing.T) {
	type scenario struct {
		name    string
		ownMode hip.CaptureMode // capture of the handle's stream by the Run thread
		other   bool            // instead: a global capture of another stream, on another thread
	}
	scenarios := []scenario{
		{name: "global capture on another thread", other: true},
		{name: "global capture of its own stream", ownMode: hip.CaptureModeGlobal},
		{name: "thread-local capture of its own stream", ownMode: hip.CaptureModeThreadLocal},
	}
	for _, policy := range streams.Policies {
		for _, sc := range scenarios {
			t.Run(string(policy)+"/"+sc.name, func(t *testing.T) {
				want := hip.Success
				if policy == streams.Lazy {
					want = hip.ErrStreamCaptureInvalidated
				}
				s := newSetup(t, handle.Options{Policy: policy})
				a := s.abandonFind(t, 256)
				defer a.gate.Open()

				runner := streamtest.StartThread(t)
				var end error
				if sc.other {
					capturer := streamtest.StartThread(t)
					capStream := mustStream(t, s.sim)
					capturer.Do(t, "begin", func() {
						streamtest.Must(t, "begin capture", s.sim.StreamBeginCapture(capStream, hip.CaptureModeGlobal))
						s.k.Tiny(t, capStream)
					})
					runner.Do(t, "Run", func() { _ = s.run(t) })
					capturer.Do(t, "end", func() { end = endCapture(s.sim, capStream) })
				} else {
					runner.Do(t, "capture a Run", func() {
						streamtest.Must(t, "begin capture", s.sim.StreamBeginCapture(s.h.Stream(), sc.ownMode))
						runErr := s.run(t)
						end = endCapture(s.sim, s.h.Stream())
						if want == hip.Success && runErr != nil {
							t.Errorf("captured Run: %v", runErr)
						}
					})
				}
				if got := hip.CodeOf(end); got != want {
					t.Errorf("end capture: %v (code %d), want code %d", end, int(got), int(want))
				}
			})
		}
	}
}

func endCapture(d hip.Device, s hip.Stream) error {
	g, err := d.StreamEndCapture(s)
	if err == nil {
		_ = d.GraphDestroy(g)
	}
	return err
}

func mustStream(t *testing.T, d hip.Device) hip.Stream {
	t.Helper()
	s, err := d.StreamCreate(hip.StreamNonBlocking)
	streamtest.Must(t, "create a stream", err)
	t.Cleanup(func() { _ = d.StreamDestroy(s) })
	return s
}

// The guarded launch path skips its sweep while the handle's stream is
// capturing, even with a finished slot waiting, and reclaims it at the
// first launch after the capture.
func TestGuardedRunSkipsItsSweepWhileItsStreamCaptures(t *testing.T) {
	s := newSetup(t, handle.Options{Policy: streams.Guarded})
	a := s.abandonFind(t, 512)
	s.finish(t, a)

	th := streamtest.StartThread(t)
	th.Do(t, "capture a Run", func() {
		streamtest.Must(t, "begin capture", s.sim.StreamBeginCapture(s.h.Stream(), hip.CaptureModeGlobal))
		s.dev.Reset()
		streamtest.Must(t, "captured Run", s.run(t))
		if n := s.dev.Calls("EventQuery") + s.dev.Calls("StreamQuery"); n != 0 {
			t.Errorf("the launch path queried %d times while its stream captured", n)
		}
		if streamtest.Closed(a.scratch.Freed()) {
			t.Error("the launch path freed scratch while its stream captured")
		}
		streamtest.Must(t, "end capture", endCapture(s.sim, s.h.Stream()))
	})
	if c := s.h.Tracker().Counters(); c.ReclaimedByLaunch != 0 || c.Draining != 1 {
		t.Errorf("after the captured Run: reclaimed by launch %d, draining %d; want 0 and 1", c.ReclaimedByLaunch, c.Draining)
	}

	th.Do(t, "Run after the capture", func() { streamtest.Must(t, "Run", s.run(t)) })
	if !streamtest.Closed(a.scratch.Freed()) {
		t.Error("the first uncaptured Run did not release the finished slot's scratch")
	}
	if c := s.h.Tracker().Counters(); c.ReclaimedByLaunch != 1 || c.Draining != 0 || c.ScratchBytesPinned != 0 {
		t.Errorf("after the uncaptured Run: %+v; want one slot reclaimed by the launch, none draining, nothing pinned", c)
	}
}

// Find, capture, then only replay the graph: nothing reaches the handle.
// The guarded policy never releases the abandoned evaluation's scratch
// (only a later uncaptured launch does); the worker and the poller release
// it as soon as the kernel retires.
func TestReplayOnlyWorkloadReleasesScratchOnlyOffTheLaunchPath(t *testing.T) {
	for _, policy := range []streams.Policy{streams.Guarded, streams.Worker, streams.Poller} {
		t.Run(string(policy), func(t *testing.T) {
			s := newSetup(t, handle.Options{Policy: policy})
			a := s.abandonFind(t, 1024)

			th := streamtest.StartThread(t)
			var g hip.Graph
			th.Do(t, "capture", func() {
				streamtest.Must(t, "begin capture", s.sim.StreamBeginCapture(s.h.Stream(), hip.CaptureModeThreadLocal))
				streamtest.Must(t, "captured Run", s.run(t))
				var err error
				g, err = s.sim.StreamEndCapture(s.h.Stream())
				streamtest.Must(t, "end capture", err)
			})
			exec, err := s.sim.GraphInstantiate(g)
			streamtest.Must(t, "instantiate", err)
			replay := mustStream(t, s.sim)

			s.finish(t, a)
			for i := range 5 {
				streamtest.Must(t, fmt.Sprintf("replay %d", i), s.sim.GraphLaunch(exec, replay))
			}
			streamtest.Must(t, "synchronize the replays", s.sim.StreamSynchronize(replay))

			if policy.ReclaimsOffLaunchPath() {
				streamtest.Recv(t, "scratch released during replays", a.scratch.Freed())
				return
			}
			// Under guarded only Run, Acquire or Close could release it, and
			// the replays call none of them.
			if streamtest.Closed(a.scratch.Freed()) {
				t.Fatal("guarded released scratch with no launch through the handle")
			}
			if c := s.h.Tracker().Counters(); c.ScratchBytesPinned != 1024 || c.Draining != 1 {
				t.Errorf("guarded after replays: pinned %d bytes, draining %d; want 1024 and 1", c.ScratchBytesPinned, c.Draining)
			}
			th.Do(t, "uncaptured Run", func() { streamtest.Must(t, "Run", s.run(t)) })
			if !streamtest.Closed(a.scratch.Freed()) {
				t.Error("guarded did not release scratch at the next uncaptured launch")
			}
		})
	}
}

// Under the worker policy a custom deallocator is called from the worker's
// thread (relaxed capture mode); under lazy, from the launching thread.
func TestACustomDeallocatorRunsWhereItsPolicySays(t *testing.T) {
	for _, tc := range []struct {
		policy streams.Policy
		want   hip.CaptureMode
	}{
		{streams.Worker, hip.CaptureModeRelaxed},
		{streams.Poller, hip.CaptureModeRelaxed},
		{streams.Lazy, hip.CaptureModeGlobal},
	} {
		t.Run(string(tc.policy), func(t *testing.T) {
			sd := streamtest.NewSim(t, hip.DialectHIP)
			modes := make(chan hip.CaptureMode, 8)
			alloc := &handle.Allocator{
				Alloc: sd.Malloc,
				Free: func(p hip.DevPtr) error {
					m, err := streamtest.ThreadMode(sd)
					if err != nil {
						return err
					}
					modes <- m
					return sd.Free(p)
				},
			}
			h, err := handle.New(sd, handle.Options{Policy: tc.policy, MaxDraining: 1, Allocator: alloc})
			streamtest.Must(t, "new handle", err)
			t.Cleanup(func() { _ = h.Close() })
			s := &setup{sim: sd, dev: streamtest.Wrap(sd), h: h, k: streamtest.LoadKernels(t, sd)}
			a := s.abandonFind(t, 64)
			s.finish(t, a)
			if tc.policy == streams.Lazy {
				// The lazy sweep asks the stream, which is idle only once its
				// last operation has returned, a moment after the marker.
				streamtest.Must(t, "synchronize the abandoned stream", sd.StreamSynchronize(a.stream))
				streamtest.StartThread(t).Do(t, "Run", func() { streamtest.Must(t, "Run", s.run(t)) })
			}
			if m := streamtest.Recv(t, "the deallocator ran", modes); m != tc.want {
				t.Errorf("deallocator ran in %s mode, want %s", m, tc.want)
			}
			streamtest.Recv(t, "scratch freed", a.scratch.Freed())
			streamtest.Must(t, "the deallocator's result", a.scratch.FreeErr())
		})
	}
}

// Concurrent ScratchBuffer calls (growing the cache as they go) each get a
// buffer big enough; every buffer is allocated and freed exactly once.
func TestScratchBufferIsSafeUnderConcurrentCalls(t *testing.T) {
	const goroutines, rounds = 8, 50
	sd := streamtest.NewSim(t, hip.DialectHIP)
	var mu sync.Mutex
	live := map[hip.DevPtr]int{}
	var allocs, frees atomic.Int64
	alloc := &handle.Allocator{
		Alloc: func(n int) (hip.DevPtr, error) {
			p, err := sd.Malloc(n)
			if err == nil {
				allocs.Add(1)
				mu.Lock()
				live[p] = n
				mu.Unlock()
			}
			return p, err
		},
		Free: func(p hip.DevPtr) error {
			frees.Add(1)
			mu.Lock()
			_, ok := live[p]
			delete(live, p)
			mu.Unlock()
			if !ok {
				return fmt.Errorf("free of %#x, which is not live (double free?)", uint64(p))
			}
			return sd.Free(p)
		},
	}
	h, err := handle.New(sd, handle.Options{Policy: streams.Worker, MaxDraining: 1, Allocator: alloc})
	streamtest.Must(t, "new handle", err)
	t.Cleanup(func() { _ = h.Close() })

	errs := make(chan error, goroutines*rounds)
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			for i := range rounds {
				want := 64 * (1 + (g*rounds+i)%37)
				sc, err := h.ScratchBuffer(want)
				if err != nil {
					errs <- err
					continue
				}
				if sc.Bytes() < want {
					errs <- fmt.Errorf("asked for %d bytes, got a %d-byte buffer", want, sc.Bytes())
				}
				if err := sc.Release(); err != nil {
					errs <- err
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	streamtest.Must(t, "drop the cache", h.DropScratchCache())
	if allocs.Load() != frees.Load() || len(live) != 0 {
		t.Errorf("%d allocations, %d frees, %d still live; want every allocation freed once", allocs.Load(), frees.Load(), len(live))
	}
	if _, err := h.ScratchBuffer(0); err == nil {
		t.Error("ScratchBuffer(0) was accepted")
	}
}

// Close releases the tracker's streams and pins, the scratch cache and the
// handle's own stream, and leaves a caller's stream alone.
func TestCloseReleasesEverythingTheHandleOwns(t *testing.T) {
	sd := streamtest.NewSim(t, hip.DialectHIP)
	k := streamtest.LoadKernels(t, sd)
	h, err := handle.New(sd, handle.Options{Policy: streams.Worker, MaxDraining: 1})
	streamtest.Must(t, "new handle", err)
	s := &setup{sim: sd, dev: streamtest.Wrap(sd), h: h, k: k}
	a := s.abandonFind(t, 64)
	cached, err := h.ScratchBuffer(32)
	streamtest.Must(t, "scratch buffer", err)
	own := h.Stream()
	theirs := mustStream(t, sd)

	a.gate.Open()
	streamtest.Must(t, "Close", h.Close())
	streamtest.Recv(t, "abandoned scratch freed", a.scratch.Freed())
	if streamtest.Closed(cached.Freed()) {
		t.Error("Close freed a scratch buffer the caller still holds")
	}
	streamtest.Must(t, "release the caller's reference", cached.Release())
	streamtest.Recv(t, "cached scratch freed", cached.Freed())
	if err := sd.StreamQuery(own); hip.CodeOf(err) != hip.ErrInvalidHandle {
		t.Errorf("the handle's own stream after Close: %v, want destroyed", err)
	}

	h2, err := handle.New(sd, handle.Options{Stream: theirs, MaxDraining: 1})
	streamtest.Must(t, "new handle on the caller's stream", err)
	streamtest.Must(t, "Close", h2.Close())
	streamtest.Must(t, "the caller's stream after Close", sd.StreamQuery(theirs))
}

// Bad options are refused with a message, not a panic.
func TestNewRejectsBadOptions(t *testing.T) {
	sd := streamtest.NewSim(t, hip.DialectHIP)
	for _, tc := range []struct {
		name string
		dev  hip.Device
		opts handle.Options
	}{
		{"nil device", nil, handle.Options{}},
		{"unknown policy", sd, handle.Options{Policy: "eager"}},
		{"negative cap", sd, handle.Options{MaxDraining: -1}},
		{"allocator without free", sd, handle.Options{Allocator: &handle.Allocator{Alloc: sd.Malloc}}},
		{"allocator without alloc", sd, handle.Options{Allocator: &handle.Allocator{Free: sd.Free}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h, err := handle.New(tc.dev, tc.opts)
			if err == nil {
				_ = h.Close()
				t.Fatal("accepted")
			}
		})
	}
}

// A scratch buffer is freed by its last reference, once, and reports the
// deallocator's error.
func TestScratchReferenceCounting(t *testing.T) {
	sd := streamtest.NewSim(t, hip.DialectHIP)
	var frees atomic.Int32
	failing := &handle.Allocator{Alloc: sd.Malloc, Free: func(p hip.DevPtr) error {
		frees.Add(1)
		return fmt.Errorf("deallocator refuses %#x", uint64(p))
	}}
	h, err := handle.New(sd, handle.Options{Allocator: failing, MaxDraining: 1})
	streamtest.Must(t, "new handle", err)
	t.Cleanup(func() { _ = h.Close() })

	a, err := h.ScratchBuffer(100)
	streamtest.Must(t, "scratch", err)
	b, err := h.ScratchBuffer(50) // fits: the same buffer
	streamtest.Must(t, "scratch", err)
	if a != b || a.Bytes() != 100 {
		t.Fatalf("a smaller request got a different buffer (%p, %d bytes), want the cached %p", b, b.Bytes(), a)
	}
	streamtest.Must(t, "release a", a.Release())
	streamtest.Must(t, "release b", b.Release())
	if streamtest.Closed(a.Freed()) {
		t.Fatal("freed while the cache holds it")
	}
	if err := h.DropScratchCache(); err == nil {
		t.Error("the deallocator's error was lost")
	}
	if !streamtest.Closed(a.Freed()) || a.FreeErr() == nil || frees.Load() != 1 {
		t.Errorf("after the last release: freed %t, error %v, deallocator calls %d; want freed once with the error",
			streamtest.Closed(a.Freed()), a.FreeErr(), frees.Load())
	}
}

// A kernel on the handle's own stream that never finishes cannot hang
// Close: at its deadline Close returns an error naming the stream.
func TestCloseIsBoundedByItsDeadline(t *testing.T) {
	sd := streamtest.NewSim(t, hip.DialectHIP)
	h, err := handle.New(sd, handle.Options{Policy: streams.Worker, MaxDraining: 1, CloseTimeout: 100 * time.Millisecond})
	streamtest.Must(t, "new handle", err)
	k := streamtest.LoadKernels(t, sd)
	k.Hold(t, h.Stream())
	closed := make(chan error, 1)
	go func() { closed <- h.Close() }()
	err = streamtest.Recv(t, "Close with a kernel that never finishes", closed)
	want := fmt.Sprintf("stream %#x is still busy", uintptr(h.Stream()))
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("Close: %v; want an error saying %q", err, want)
	}
}
