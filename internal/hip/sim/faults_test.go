package sim_test

import (
	"sync/atomic"
	"testing"
	"time"

	"miotool/internal/hip"
)

// TestFaultFailQueries: the next n queries fail with the code, which then
// turns sticky for queries, synchronizes and launches alike.
func TestFaultFailQueries(t *testing.T) {
	d := newDevice(t, "", 0)
	k := loadKernels(t, d, 0)
	s := must1[hip.Stream](t)(d.StreamCreate(0))
	ev := must1[hip.Event](t)(d.EventCreate(0))
	must(t, d.Faults().FailQueries(2, hip.ErrIllegalAddress))

	wantCode(t, "first query", d.StreamQuery(s), hip.ErrIllegalAddress)
	must(t, d.StreamSynchronize(s)) // not sticky before the n-th failure
	must(t, d.LaunchKernel(k.tiny, hip.D1(1), hip.D1(1), 0, s))
	wantCode(t, "second query", d.EventQuery(ev), hip.ErrIllegalAddress)

	wantCode(t, "stream sync", d.StreamSynchronize(s), hip.ErrIllegalAddress)
	wantCode(t, "event sync", d.EventSynchronize(ev), hip.ErrIllegalAddress)
	wantCode(t, "device sync", d.DeviceSynchronize(), hip.ErrIllegalAddress)
	wantCode(t, "launch", d.LaunchKernel(k.tiny, hip.D1(1), hip.D1(1), 0, s), hip.ErrIllegalAddress)
	wantCode(t, "later query", d.StreamQuery(s), hip.ErrIllegalAddress)

	for _, bad := range []struct {
		n    int
		code hip.Code
	}{{-1, hip.ErrUnknown}, {1, hip.Success}} {
		if err := d.Faults().FailQueries(bad.n, bad.code); err == nil {
			t.Errorf("FailQueries(%d, %d) accepted", bad.n, int(bad.code))
		}
	}
}

// TestFaultDropHostFuncs: a dropped host function never runs, and its
// stream carries on.
func TestFaultDropHostFuncs(t *testing.T) {
	d := newDevice(t, "", 0)
	s := must1[hip.Stream](t)(d.StreamCreate(0))
	must(t, d.Faults().DropHostFuncs(1))
	var first, second atomic.Bool
	must(t, d.LaunchHostFunc(s, func() { first.Store(true) }))
	must(t, d.LaunchHostFunc(s, func() { second.Store(true) }))
	within(t, "sync", func() { must(t, d.StreamSynchronize(s)) })
	if first.Load() || !second.Load() {
		t.Errorf("first ran %v (want false), second ran %v (want true)", first.Load(), second.Load())
	}
	if err := d.Faults().DropHostFuncs(-2); err == nil {
		t.Error("DropHostFuncs(-2) accepted")
	}
}

// TestFaultHoldHostFuncs: a held host function keeps its stream busy until
// the gate opens; release is idempotent.
func TestFaultHoldHostFuncs(t *testing.T) {
	d := newDevice(t, "", 0)
	s := must1[hip.Stream](t)(d.StreamCreate(0))
	ev := must1[hip.Event](t)(d.EventCreate(0))
	release := d.Faults().HoldHostFuncs()
	t.Cleanup(release)
	called := make(chan struct{})
	must(t, d.LaunchHostFunc(s, func() { close(called) }))
	must(t, d.EventRecord(ev, s))
	wantCode(t, "stream query while held", d.StreamQuery(s), hip.ErrNotReady)
	wantCode(t, "event query while held", d.EventQuery(ev), hip.ErrNotReady)
	// An ignored hold lets the function run within microseconds; the
	// window gives that the chance to show. A correct hold passes whatever
	// the scheduling.
	select {
	case <-called:
		t.Fatal("a held host function ran")
	case <-time.After(50 * time.Millisecond):
	}
	wantCode(t, "stream query still held", d.StreamQuery(s), hip.ErrNotReady)
	release()
	release()
	recv(t, "host function", called)
	within(t, "event sync", func() { must(t, d.EventSynchronize(ev)) })
}

// TestFaultDelayHostFuncs: the delay shows as time between events recorded
// around a host function.
func TestFaultDelayHostFuncs(t *testing.T) {
	const delay = 20 * time.Millisecond
	d := newDevice(t, "", 0)
	s := must1[hip.Stream](t)(d.StreamCreate(0))
	before := must1[hip.Event](t)(d.EventCreate(0))
	after := must1[hip.Event](t)(d.EventCreate(0))
	must(t, d.Faults().DelayHostFuncs(delay))
	must(t, d.EventRecord(before, s))
	must(t, d.LaunchHostFunc(s, func() {}))
	must(t, d.EventRecord(after, s))
	within(t, "sync", func() { must(t, d.StreamSynchronize(s)) })
	ms := must1[float32](t)(d.EventElapsedTime(before, after))
	if ms < float32(delay.Milliseconds()) {
		t.Errorf("host function took %.3f ms, want at least %v", ms, delay)
	}
	if err := d.Faults().DelayHostFuncs(-time.Second); err == nil {
		t.Error("a negative delay was accepted")
	}
}

// TestFaultFailFrees: a failed free leaves the memory allocated and usable.
func TestFaultFailFrees(t *testing.T) {
	d := newDevice(t, hip.DialectHIP, 0)
	p := must1[hip.DevPtr](t)(d.Malloc(8))
	must(t, d.MemcpyHtoD(p, []byte("kept")))
	must(t, d.Faults().FailFrees(1, hip.ErrUnknown))
	wantCode(t, "injected free failure", d.Free(p), hip.ErrUnknown)
	back := make([]byte, 4)
	must(t, d.MemcpyDtoH(back, p))
	if string(back) != "kept" {
		t.Errorf("memory after a failed free reads %q", back)
	}
	must(t, d.Free(p))
	wantCode(t, "free after the real free", d.Free(p), hip.ErrInvalidValue)
}

// TestFaultFailCalls: EventCreate, EventRecord (on the streams matched),
// StreamCreate and Malloc fail as often as asked, create or queue nothing,
// and then work again; the injection is validated.
func TestFaultFailCalls(t *testing.T) {
	d := newDevice(t, "", 0)
	s := must1[hip.Stream](t)(d.StreamCreate(0))
	other := must1[hip.Stream](t)(d.StreamCreate(0))
	ev := must1[hip.Event](t)(d.EventCreate(0))
	f := d.Faults()

	must(t, f.FailEventCreates(1, hip.ErrOutOfMemory))
	if e, err := d.EventCreate(0); hip.CodeOf(err) != hip.ErrOutOfMemory || e != 0 {
		t.Errorf("EventCreate: %d, %v; want no event and the injected failure", e, err)
	}
	must1[hip.Event](t)(d.EventCreate(0))

	must(t, f.FailEventRecords(2, hip.ErrInvalidValue, func(on hip.Stream) bool { return on == s }))
	must(t, d.EventRecord(ev, other)) // not matched: recorded
	wantCode(t, "first record on s", d.EventRecord(ev, s), hip.ErrInvalidValue)
	wantCode(t, "second record on s", d.EventRecord(ev, s), hip.ErrInvalidValue)
	must(t, d.EventRecord(ev, s))
	within(t, "event sync", func() { must(t, d.EventSynchronize(ev)) })

	must(t, f.FailStreamCreates(1, hip.ErrOutOfMemory))
	if st, err := d.StreamCreate(0); hip.CodeOf(err) != hip.ErrOutOfMemory || st != 0 {
		t.Errorf("StreamCreate: %d, %v; want no stream and the injected failure", st, err)
	}
	must1[hip.Stream](t)(d.StreamCreate(0))

	must(t, f.FailMallocs(1, hip.ErrOutOfMemory))
	if p, err := d.Malloc(64); hip.CodeOf(err) != hip.ErrOutOfMemory || p != 0 {
		t.Errorf("Malloc: %#x, %v; want no memory and the injected failure", uint64(p), err)
	}
	if n, blocks := d.MemoryInUse(); n != 0 || blocks != 0 {
		t.Errorf("a failed Malloc left %d bytes in %d blocks in use", n, blocks)
	}
	must1[hip.DevPtr](t)(d.Malloc(64))

	must(t, f.FailMallocs(3, hip.ErrOutOfMemory))
	must(t, f.FailMallocs(0, hip.ErrOutOfMemory)) // cancels
	must1[hip.DevPtr](t)(d.Malloc(8))
	for _, bad := range []struct {
		n    int
		code hip.Code
	}{{-1, hip.ErrUnknown}, {1, hip.Success}} {
		if err := f.FailMallocs(bad.n, bad.code); err == nil {
			t.Errorf("FailMallocs(%d, %d) accepted", bad.n, int(bad.code))
		}
	}
}

// TestMemoryInUse counts what Malloc handed out and Free has not taken
// back, including a block whose free failed.
func TestMemoryInUse(t *testing.T) {
	d := newDevice(t, "", 0)
	a := must1[hip.DevPtr](t)(d.Malloc(1000))
	b := must1[hip.DevPtr](t)(d.Malloc(24))
	if n, blocks := d.MemoryInUse(); n != 1024 || blocks != 2 {
		t.Errorf("in use after two mallocs: %d bytes in %d blocks, want 1024 in 2", n, blocks)
	}
	must(t, d.Faults().FailFrees(1, hip.ErrInvalidValue))
	wantCode(t, "failed free", d.Free(a), hip.ErrInvalidValue)
	if n, _ := d.MemoryInUse(); n != 1024 {
		t.Errorf("in use after a failed free: %d bytes, want 1024 (the block stays)", n)
	}
	must(t, d.Free(a))
	must(t, d.Free(b))
	if n, blocks := d.MemoryInUse(); n != 0 || blocks != 0 {
		t.Errorf("in use after freeing everything: %d bytes in %d blocks", n, blocks)
	}
}
