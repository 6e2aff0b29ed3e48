package gpulib

import (
	"fmt"

	"miotool/internal/hip"
)

// CheckCaptureMode refuses a mode outside global (0), thread-local (1) and
// relaxed (2) before it reaches a runtime. Runtimes do not all refuse one:
// NVIDIA's driver (580.159) accepts 7 in cuThreadExchangeStreamCaptureMode
// and leaves the thread in that undefined mode.
func (m StatusMapper) CheckCaptureMode(op string, mode hip.CaptureMode) error {
	if mode < hip.CaptureModeGlobal || mode > hip.CaptureModeRelaxed {
		return m.Errorf(op, hip.ErrInvalidValue,
			fmt.Sprintf("capture mode %d is not global (0), thread-local (1) or relaxed (2)", int(mode)))
	}
	return nil
}

// LaunchFunc enqueues a host function: it passes trampoline and userData
// to cuLaunchHostFunc / hipLaunchHostFunc and returns the runtime status.
type LaunchFunc func(trampoline, userData uintptr) int32

// EnqueueHostFunc registers fn with the ticket table and enqueues it with
// launch behind HostFnTrampoline. On a stream whose capture is active
// (status, with the capture's id) the ticket repeats, since every replay of
// the graph fires it, and joins that capture's tickets; otherwise it fires
// once. A launch that fails takes its ticket back, so nothing is left
// behind. The tracker must use HostFuncs, the table the trampoline fires.
func (c *CaptureTickets) EnqueueHostFunc(fn func(), status hip.CaptureStatus, captureID uint64, launch LaunchFunc) int32 {
	kind := OneShot
	if status == hip.CaptureStatusActive {
		kind = Repeating
	}
	tk := c.table.Register(fn, kind)
	if kind == Repeating {
		c.Add(captureID, tk)
	}
	st := launch(HostFnTrampoline(), uintptr(tk))
	if st != 0 {
		if kind == Repeating {
			c.Remove(captureID, tk)
		} else {
			c.table.Forget(tk)
		}
	}
	return st
}
