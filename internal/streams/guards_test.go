package streams

import (
	"bytes"
	"context"
	"runtime"
	"strconv"
	"testing"
	"time"

	"miotool/internal/hip"
	"miotool/internal/streams/streamtest"
)

// These tests observe a broken guard directly (a lock held, a goroutine, a
// count of queries), so that its regression fails at once rather than
// after a test's wait for something that never comes runs out.

// The worker calls a deallocator with the tracker lock free: inside it, the
// lock can be taken.
func TestTheWorkerFreesOutsideTheTrackerLock(t *testing.T) {
	f := newFixture(t, Options{Policy: Worker, MaxDraining: 1})
	heldByFreer := make(chan bool, 1)
	buf := bufferFunc(64, func(hip.DevPtr) error {
		// Nothing else in this test holds the lock for more than a
		// moment; the worker would hold it throughout.
		deadline := time.Now().Add(streamtest.Limit / 4)
		for !f.tr.mu.TryLock() {
			if time.Now().After(deadline) {
				heldByFreer <- true
				return nil
			}
			runtime.Gosched()
		}
		f.tr.mu.Unlock()
		heldByFreer <- false
		return nil
	})
	a := f.abandonGated(t, f.acquire(t), buf, true)
	a.gate.Open()
	if streamtest.Recv(t, "the deallocator ran", heldByFreer) {
		t.Fatal("the deallocator ran with the tracker lock held")
	}
	streamtest.Recv(t, "scratch freed", buf.Freed())
}

// goroutineID is the running goroutine's number, from its stack header.
func goroutineID() int {
	buf := make([]byte, 64)
	buf = buf[:runtime.Stack(buf, false)]
	buf, _ = bytes.CutPrefix(buf, []byte("goroutine "))
	n, _ := strconv.Atoi(string(buf[:bytes.IndexByte(buf, ' ')]))
	return n
}

// The deallocator of a slot retired by its own callback runs on the
// worker, never on the runtime's callback thread, which must not call the
// runtime and which every other stream's callbacks wait for.
func TestTheDeallocatorRunsOffTheCallbackThread(t *testing.T) {
	callbackOn := make(chan int, 8)
	f := newFixture(t, Options{Policy: Worker, MaxDraining: 1, Trace: &Trace{CallbackEntered: func() {
		select {
		case callbackOn <- goroutineID():
		default:
		}
	}}})
	freedOn := make(chan int, 1)
	buf := bufferFunc(64, func(hip.DevPtr) error {
		freedOn <- goroutineID()
		return nil
	})
	a := f.abandonGated(t, f.acquire(t), buf, true)
	a.gate.Open()
	cb := streamtest.Recv(t, "the callback entered", callbackOn)
	if fr := streamtest.Recv(t, "the deallocator ran", freedOn); fr == cb {
		t.Fatalf("the deallocator ran on the callback's goroutine %d", cb)
	}
	if late := f.ticket(t); late {
		t.Error("the slot's own callback was counted late")
	}
}

// With the device's sticky error, Acquire at the cap returns it after one
// query of the backlog: it does not go on re-testing a backlog that cannot
// drain.
func TestAcquireReturnsTheStickyErrorWithoutRetesting(t *testing.T) {
	f := newFixture(t, Options{Policy: Worker, MaxDraining: 1, RetestEvery: time.Millisecond})
	a := f.abandonGated(t, f.acquire(t), f.buffer(64), true)
	streamtest.Must(t, "inject a query failure", f.sim.Faults().FailQueries(1, hip.ErrIllegalAddress))
	f.dev.Reset()
	ctx, cancel := context.WithTimeout(context.Background(), streamtest.Limit)
	defer cancel()
	result := f.acquireAsync(ctx)
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case got := <-result:
			if hip.CodeOf(got.err) != hip.ErrIllegalAddress {
				t.Fatalf("Acquire: slot %v, err %v; want the sticky %s", got.slot, got.err, hip.ErrIllegalAddress.Name(hip.DialectHIP))
			}
			if streamtest.Closed(a.buf.Freed()) {
				t.Error("a query error freed the scratch; the kernel may still be running")
			}
			a.gate.Open()
			if err := f.tr.Close(); hip.CodeOf(err) != hip.ErrIllegalAddress {
				t.Errorf("Close on a faulted device: %v, want the sticky error", err)
			}
			return
		case <-tick.C:
			if n := f.dev.Calls("EventQuery"); n >= 3 {
				cancel()
				a.gate.Open()
				t.Fatalf("Acquire queried the faulted backlog %d times instead of returning the sticky error", n)
			}
		}
	}
}

// With nothing draining the poller sleeps until an Abandon wakes it: once
// idle, it does not come back to idle again on a timer. A poller that woke
// every PollSleepMax would idle again within a millisecond; the window
// below is hundreds of those.
func TestThePollerStaysAsleepWhileNothingDrains(t *testing.T) {
	f := newFixture(t, Options{Policy: Poller, MaxDraining: 1})
	idle := make(chan struct{}, 1024)
	f.tr.beforeIdle = func() { idle <- struct{}{} }
	a := f.abandonGated(t, f.acquire(t), f.buffer(8), true)
	a.gate.Open()
	streamtest.Recv(t, "scratch freed by the poller", a.buf.Freed())
	// The poller announces an idle before it sleeps: once it is asleep,
	// every idle it had (before the slot arrived and after it went home)
	// is in the channel. Only one after that is a wake with nothing to do.
	f.untilWorkerAsleep(t)
	for len(idle) > 0 {
		<-idle
	}
	window := time.NewTimer(300 * time.Millisecond)
	defer window.Stop()
	select {
	case <-idle:
		t.Fatal("the idle poller woke with nothing draining and no Abandon")
	case <-window.C:
	}
}
