// Package gputest holds the checks every backend shares: one list of
// scenarios that runs against any hip.Device (the simulator, the GPU
// backends over the C stand-in libraries the tests build with gcc, and real
// GPUs alike), checking what only a device over a runtime library has
// (RuntimeDevice) where the device has it; the builder of those stand-ins;
// and the benchmarks of the call path. Only tests import it.
package gputest

import (
	"encoding/binary"
	"math"
	"testing"
	"time"

	"miotool/internal/hip"
	"miotool/internal/hip/hiptest"
)

// WaitTimeout bounds every wait on a device or a callback: a lost callback
// fails the test instead of hanging it.
const WaitTimeout = 30 * time.Second

// WaitClosed waits for ch to close, failing t after WaitTimeout.
func WaitClosed(t testing.TB, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(WaitTimeout):
		t.Fatalf("timed out after %v waiting for %s", WaitTimeout, what)
	}
}

// Must fails t on a non-nil err.
func Must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// WantCode fails t unless err carries the runtime code want.
func WantCode(t testing.TB, err error, want hip.Code, what string) {
	t.Helper()
	if got := hip.CodeOf(err); got != want {
		t.Fatalf("%s: got %v (code %d), want code %d", what, err, got, want)
	}
}

// OnLockedThread runs fn on a new goroutine locked to its OS thread and
// waits for it.
func OnLockedThread(t testing.TB, fn func()) { t.Helper(); hiptest.OnLockedThread(t, fn) }

// FloatsToBytes is v in little-endian bytes, as device memory holds it.
func FloatsToBytes(v []float32) []byte {
	b := make([]byte, 4*len(v))
	for i, f := range v {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(f))
	}
	return b
}

// BytesToFloats reads little-endian float32 values.
func BytesToFloats(b []byte) []float32 {
	v := make([]float32, len(b)/4)
	for i := range v {
		v[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return v
}

// NewStream creates a non-blocking stream that is destroyed when t ends.
func NewStream(t testing.TB, d hip.Device) hip.Stream {
	t.Helper()
	s, err := d.StreamCreate(hip.StreamNonBlocking)
	Must(t, err)
	t.Cleanup(func() { d.StreamDestroy(s) })
	return s
}

// Alloc allocates device memory that is freed when t ends.
func Alloc(t testing.TB, d hip.Device, bytes int) hip.DevPtr {
	t.Helper()
	p, err := d.Malloc(bytes)
	Must(t, err)
	t.Cleanup(func() { d.Free(p) })
	return p
}

// LoadFunc loads src, unloaded when t ends, and returns its kernel name.
func LoadFunc(t testing.TB, d hip.Device, src *hip.KernelSource, name string) hip.Function {
	t.Helper()
	m, err := d.ModuleLoad(src)
	Must(t, err)
	t.Cleanup(func() { d.ModuleUnload(m) })
	f, err := d.ModuleGetFunction(m, name)
	Must(t, err)
	return f
}

// MustStatus is s's capture status.
func MustStatus(t testing.TB, d hip.Device, s hip.Stream) hip.CaptureStatus {
	t.Helper()
	st, err := d.StreamIsCapturing(s)
	Must(t, err)
	return st
}
