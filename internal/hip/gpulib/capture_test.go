package gpulib

import (
	"strings"
	"sync/atomic"
	"testing"

	"miotool/internal/hip"
)

func TestCheckCaptureMode(t *testing.T) {
	m := StatusMapper{Dialect: hip.DialectHIP}
	for _, mode := range hip.CaptureModes {
		if err := m.CheckCaptureMode("StreamBeginCapture", mode); err != nil {
			t.Errorf("mode %v refused: %v", mode, err)
		}
	}
	for _, bad := range []hip.CaptureMode{-1, 3, 7} {
		err := m.CheckCaptureMode("ThreadExchangeCaptureMode", bad)
		if hip.CodeOf(err) != hip.ErrInvalidValue || !strings.HasPrefix(err.Error(), "hipThreadExchangeStreamCaptureMode: hipErrorInvalidValue (1)") {
			t.Errorf("mode %d: %v", int(bad), err)
		}
	}
}

// TestEnqueueHostFunc drives the helper with launches that fire the ticket
// the way a runtime would, or fail.
func TestEnqueueHostFunc(t *testing.T) {
	c := NewCaptureTickets(HostFuncs)
	t.Cleanup(c.Close)
	before := HostFuncs.Stats()
	var runs atomic.Int32
	fn := func() { runs.Add(1) }
	var gotTramp, gotData uintptr
	record := func(tramp, data uintptr) int32 { gotTramp, gotData = tramp, data; return 0 }

	// Not capturing: one shot, fired once by the "runtime".
	if st := c.EnqueueHostFunc(fn, hip.CaptureStatusNone, 0, record); st != 0 {
		t.Fatalf("status %d", st)
	}
	if gotTramp != HostFnTrampoline() || gotData == 0 {
		t.Fatalf("launch got trampoline %#x data %d", gotTramp, gotData)
	}
	HostFuncs.Fire(gotData)
	HostFuncs.Fire(gotData) // a second fire of a one-shot ticket is stale
	if runs.Load() != 1 {
		t.Fatalf("one-shot ran %d times", runs.Load())
	}

	// Capturing: the ticket repeats and belongs to the capture's graph.
	const captureID, graph = 42, 0x5000
	if st := c.EnqueueHostFunc(fn, hip.CaptureStatusActive, captureID, record); st != 0 {
		t.Fatalf("status %d", st)
	}
	c.Ended(captureID, graph)
	for range 3 {
		HostFuncs.Fire(gotData)
	}
	if runs.Load() != 4 || c.Tracked() != 1 {
		t.Fatalf("runs %d tracked %d", runs.Load(), c.Tracked())
	}
	c.GraphDestroyed(graph)

	// Failed launches leave no ticket, captured or not.
	fail := func(tramp, data uintptr) int32 { gotData = data; return 901 }
	for _, status := range []hip.CaptureStatus{hip.CaptureStatusNone, hip.CaptureStatusActive, hip.CaptureStatusInvalidated} {
		if st := c.EnqueueHostFunc(fn, status, 7, fail); st != 901 {
			t.Fatalf("status %v: launch status %d", status, st)
		}
	}
	c.Ended(7, 0)
	after := HostFuncs.Stats()
	if after.Live != before.Live || c.Tracked() != 0 {
		t.Fatalf("tickets left behind: live %d (was %d), tracked %d", after.Live, before.Live, c.Tracked())
	}
	if after.Stale-before.Stale != 1 {
		t.Fatalf("stale fires %d, want 1", after.Stale-before.Stale)
	}
}
