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
