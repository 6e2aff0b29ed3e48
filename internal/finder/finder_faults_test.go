package finder

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"miotool/internal/handle"
	"miotool/internal/hip"
	"miotool/internal/hip/sim"
	"miotool/internal/streams"
)

// teardown closes the handle, frees the tensors and requires the device to
// hold no memory afterwards: a leak shows at the device, not only in the
// tracker's figures.
func teardown(t *testing.T, d *sim.Device, hs []*handle.Handle, tss []*Tensors) {
	t.Helper()
	for _, h := range hs {
		if err := h.Close(); err != nil {
			t.Errorf("handle Close: %v", err)
		}
	}
	for _, ts := range tss {
		if err := ts.Free(); err != nil {
			t.Errorf("free the tensors: %v", err)
		}
	}
	if n, blocks := d.MemoryInUse(); n != 0 {
		t.Errorf("after teardown %d device bytes in %d blocks are still allocated", n, blocks)
	}
}

// When the naive evaluation's stop event cannot be recorded, find hands
// the slot over without a done event and reports the error; the tracker
// still reclaims the slot (by a query of its stream) and frees its scratch.
func TestFindWhenTheStopEventCannotBeRecorded(t *testing.T) {
	for _, policy := range []streams.Policy{streams.Worker, streams.Poller} {
		t.Run(string(policy), func(t *testing.T) {
			d := newSim(t)
			h, err := handle.New(d, handle.Options{Policy: policy, MaxDraining: 2})
			if err != nil {
				t.Fatal(err)
			}
			ts, err := NewTensors(d, small, nil, 1)
			if err != nil {
				t.Fatal(err)
			}
			// The naive evaluation records a start and a stop event on its
			// tracker stream; every other record goes to the handle's.
			var onSlot atomic.Int32
			err = d.Faults().FailEventRecords(1, hip.ErrInvalidValue, func(s hip.Stream) bool {
				return s != h.Stream() && onSlot.Add(1) == 2
			})
			if err != nil {
				t.Fatal(err)
			}
			res, err := Find(context.Background(), h, ts, Options{NaiveTimeoutPct: 300, Samples: 1})
			if hip.CodeOf(err) != hip.ErrInvalidValue {
				t.Fatalf("Find: %+v, %v; want the stop event's record failure", res, err)
			}
			if n := onSlot.Load(); n != 2 {
				t.Fatalf("%d event records on the tracker stream, want 2 (start, then the failed stop)", n)
			}
			c := h.Tracker().Counters()
			if c.Abandoned != 1 {
				t.Fatalf("tracker after the failed record: %+v; want the slot abandoned", c)
			}
			teardown(t, d, []*handle.Handle{h}, []*Tensors{ts})
			c = h.Tracker().Counters()
			if c.Draining != 0 || c.ScratchBytesPinned != 0 || c.ScratchFreed != 1 || c.FreeErrors != 0 {
				t.Errorf("tracker after teardown: %+v; want the slot retired and its scratch freed", c)
			}
		})
	}
}

// Eight handles on one device find at once, under the worker and the
// poller policies, with host callbacks dropped and delayed: every find
// succeeds and verifies, every abandoned slot is reclaimed once, and the
// device holds no memory after teardown.
func TestConcurrentFindsOnEightHandlesWithDroppedAndDelayedCallbacks(t *testing.T) {
	d, err := sim.New(hip.OpenOptions{Dialect: hip.DialectHIP, HWQueues: 64})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = d.Close() })
	if err := d.Faults().DropHostFuncs(3); err != nil {
		t.Fatal(err)
	}
	if err := d.Faults().DelayHostFuncs(time.Millisecond); err != nil {
		t.Fatal(err)
	}
	const handles = 8
	hs := make([]*handle.Handle, handles)
	tss := make([]*Tensors, handles)
	for i := range handles {
		policy := streams.Worker
		if i%2 == 1 {
			policy = streams.Poller
		}
		if hs[i], err = handle.New(d, handle.Options{Policy: policy, MaxDraining: 1}); err != nil {
			t.Fatal(err)
		}
		if tss[i], err = NewTensors(d, small, nil, 1); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	errs := make(chan error, handles)
	var wg sync.WaitGroup
	for i := range handles {
		wg.Go(func() {
			// A 1% deadline abandons the naive evaluation on most runs.
			for round := range 2 {
				res, err := Find(ctx, hs[i], tss[i], Options{NaiveTimeoutPct: 1, Samples: 1, Verify: true})
				if err != nil {
					errs <- fmt.Errorf("handle %d round %d: %w", i, round, err)
					return
				}
				if res.Chosen == "" || !res.Verified {
					errs <- fmt.Errorf("handle %d round %d: chose %q, verified %t", i, round, res.Chosen, res.Verified)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	teardown(t, d, hs, tss)
	abandoned := int64(0)
	for i, h := range hs {
		c := h.Tracker().Counters()
		abandoned += c.Abandoned
		if got := c.ReclaimedByCallback + c.ReclaimedByPoller + c.ReclaimedByBackstop; got != c.Abandoned {
			t.Errorf("handle %d: %d slots reclaimed for %d abandoned (%+v)", i, got, c.Abandoned, c)
		}
		if c.Draining != 0 || c.ScratchBytesPinned != 0 || c.FreeErrors != 0 || c.LeakedBytes != 0 {
			t.Errorf("handle %d after teardown: %+v", i, c)
		}
	}
	t.Logf("%d naive evaluations abandoned across %d handles", abandoned, handles)
}
