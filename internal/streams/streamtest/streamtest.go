// Package streamtest holds the fixtures the stream tracker's and the
// handle's tests share: a simulated device opened with a fixed queue count,
// gated kernels (Go twins that run until the test opens their gate), a
// device wrapper that counts runtime calls and can refuse to queue host
// functions, a reference-counted device buffer to pin, and a goroutine
// locked to one OS thread for work that must happen "on another thread".
//
// Every wait is bounded by Limit, and every gate is opened when its test
// ends, so a failed assertion fails rather than hangs.
package streamtest

import (
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"miotool/internal/hip"
	"miotool/internal/hip/hiptest"
	"miotool/internal/hip/sim"
)

// Limit bounds every wait in the tests: wide enough for a loaded machine
// under the race detector, short enough that a broken guard fails a test
// instead of hanging the run.
const Limit = 20 * time.Second

// HWQueues is the simulated device's queue count in tests: many more than
// any test's streams, so that no two streams share a queue and serialize,
// whatever GPU_MAX_HW_QUEUES says.
const HWQueues = 64

// NewSim opens a simulated device in the given dialect and closes it when
// the test ends.
func NewSim(t testing.TB, dialect hip.Dialect) *sim.Device {
	t.Helper()
	d, err := sim.New(hip.OpenOptions{Dialect: dialect, HWQueues: HWQueues})
	if err != nil {
		t.Fatalf("open the simulated device: %v", err)
	}
	t.Cleanup(func() { _ = d.Close() })
	return d
}

// Must fails the test on a non-nil error.
func Must(t testing.TB, what string, err error) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// Recv waits for ch to deliver or close, failing the test after Limit.
func Recv[T any](t testing.TB, what string, ch <-chan T) T {
	t.Helper()
	timer := time.NewTimer(Limit)
	defer timer.Stop()
	select {
	case v := <-ch:
		return v
	case <-timer.C:
		t.Fatalf("%s: nothing within %v", what, Limit)
	}
	var zero T
	return zero
}

// RecvWithin is Recv with a shorter bound, for an outcome that a periodic
// mechanism (a re-test every few milliseconds) must deliver: d should be
// hundreds of periods, so that a missing mechanism fails fast and a loaded
// machine does not.
func RecvWithin[T any](t testing.TB, what string, d time.Duration, ch <-chan T) T {
	t.Helper()
	timer := time.NewTimer(min(d, Limit))
	defer timer.Stop()
	select {
	case v := <-ch:
		return v
	case <-timer.C:
		t.Fatalf("%s: nothing within %v", what, min(d, Limit))
	}
	var zero T
	return zero
}

// Closed reports whether ch is closed (or holds a value) right now.
func Closed[T any](ch <-chan T) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// Gate is a channel closed once, from whichever path gets there first.
type Gate struct {
	open chan struct{}
	once sync.Once
}

// NewGate makes a closed gate that opens when the test ends, if not before.
func NewGate(t testing.TB) *Gate {
	g := &Gate{open: make(chan struct{})}
	t.Cleanup(g.Open)
	return g
}

// Open opens the gate; it is idempotent.
func (g *Gate) Open() { g.once.Do(func() { close(g.open) }) }

// C is closed once the gate is open.
func (g *Gate) C() <-chan struct{} { return g.open }

// Wait blocks until the gate opens, or Limit passes.
func (g *Gate) Wait() error {
	timer := time.NewTimer(Limit)
	defer timer.Stop()
	select {
	case <-g.open:
		return nil
	case <-timer.C:
		return errors.New("gate never opened")
	}
}

// Kernels is a kernel source loaded into one device: "hold" (an int32 gate
// index) runs until its gate opens; "tiny" does nothing.
type Kernels struct {
	dev        hip.Device
	hold, tiny hip.Function

	mu    sync.Mutex
	gates []*Gate
}

// LoadKernels loads the gated kernels into dev.
func LoadKernels(t testing.TB, dev hip.Device) *Kernels {
	t.Helper()
	k := &Kernels{dev: dev}
	src := &hip.KernelSource{
		Name:    "streamtest",
		Text:    `extern "C" __global__ void hold(int gate) {} extern "C" __global__ void tiny() {}`,
		Kernels: []string{"hold", "tiny"},
		Twins: map[string]hip.GoKernel{
			"hold": k.holdTwin,
			"tiny": func(hip.Memory, hip.Dim3, hip.Dim3, []hip.KernelArg) error { return nil },
		},
	}
	m, err := dev.ModuleLoad(src)
	Must(t, "load the test kernels", err)
	k.hold, err = dev.ModuleGetFunction(m, "hold")
	Must(t, "get the hold kernel", err)
	k.tiny, err = dev.ModuleGetFunction(m, "tiny")
	Must(t, "get the tiny kernel", err)
	return k
}

func (k *Kernels) holdTwin(_ hip.Memory, _, _ hip.Dim3, args []hip.KernelArg) error {
	i, ok := args[0].(int32)
	k.mu.Lock()
	if !ok || i < 0 || int(i) >= len(k.gates) {
		k.mu.Unlock()
		return fmt.Errorf("hold kernel: no gate %v", args[0])
	}
	g := k.gates[i]
	k.mu.Unlock()
	// A gate that never opens faults the device after Limit: loud, and
	// bounded.
	return g.Wait()
}

// NewHoldGate adds a gate for a hold kernel and returns its index.
func (k *Kernels) NewHoldGate(t testing.TB) (int32, *Gate) {
	g := NewGate(t)
	k.mu.Lock()
	defer k.mu.Unlock()
	k.gates = append(k.gates, g)
	return int32(len(k.gates) - 1), g
}

// Hold queues a kernel on s that runs until the returned gate opens.
func (k *Kernels) Hold(t testing.TB, s hip.Stream) *Gate {
	t.Helper()
	i, g := k.NewHoldGate(t)
	Must(t, "launch the hold kernel", k.dev.LaunchKernel(k.hold, hip.D1(1), hip.D1(1), 0, s, i))
	return g
}

// Tiny queues a kernel that does nothing on s.
func (k *Kernels) Tiny(t testing.TB, s hip.Stream) {
	t.Helper()
	Must(t, "launch the tiny kernel", k.dev.LaunchKernel(k.tiny, hip.D1(1), hip.D1(1), 0, s))
}

// TinyFunc is the kernel that does nothing.
func (k *Kernels) TinyFunc() hip.Function { return k.tiny }

// Event creates an event, records it on s and destroys it when the test
// ends (the error is ignored: a tracker may have destroyed it already).
func Event(t testing.TB, dev hip.Device, s hip.Stream) hip.Event {
	t.Helper()
	e, err := dev.EventCreate(hip.EventDefault)
	Must(t, "create an event", err)
	t.Cleanup(func() { _ = dev.EventDestroy(e) })
	Must(t, "record an event", dev.EventRecord(e, s))
	return e
}

// DoneEvent creates and records an event whose ownership passes to the
// tracker with Abandon; nothing destroys it at the end of the test.
func DoneEvent(t testing.TB, dev hip.Device, s hip.Stream) hip.Event {
	t.Helper()
	e, err := dev.EventCreate(hip.EventDisableTiming)
	Must(t, "create a done event", err)
	Must(t, "record a done event", dev.EventRecord(e, s))
	return e
}

// ThreadMode is the calling OS thread's capture interaction mode. It swaps
// the mode out and back on a goroutine locked for the duration.
func ThreadMode(dev hip.Device) (hip.CaptureMode, error) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	prev, err := dev.ThreadExchangeCaptureMode(hip.CaptureModeRelaxed)
	if err != nil {
		return 0, err
	}
	_, err = dev.ThreadExchangeCaptureMode(prev)
	return prev, err
}

// Thread is a goroutine locked to one OS thread that runs what it is given.
type Thread = hiptest.Thread

// StartThread starts a locked goroutine and stops it when the test ends.
func StartThread(t testing.TB) *Thread { return hiptest.StartThread(t) }

// Buffer is a reference-counted device buffer, the tracker's Pin in tests:
// the last Release calls free and closes Freed, whether free failed or not;
// after a failed free, Release tries the free again.
type Buffer struct {
	ptr   hip.DevPtr
	bytes int
	free  func(hip.DevPtr) error
	refs  atomic.Int64
	freed chan struct{}

	mu       sync.Mutex
	attempts int
	err      error
}

// NewBuffer allocates bytes on dev; the last Release frees them with dev.Free.
func NewBuffer(t testing.TB, dev hip.Device, bytes int) *Buffer {
	t.Helper()
	p, err := dev.Malloc(bytes)
	Must(t, "allocate a test buffer", err)
	return NewBufferFunc(p, bytes, dev.Free)
}

// NewBufferFunc wraps an address with a custom deallocator.
func NewBufferFunc(p hip.DevPtr, bytes int, free func(hip.DevPtr) error) *Buffer {
	b := &Buffer{ptr: p, bytes: bytes, free: free, freed: make(chan struct{})}
	b.refs.Store(1)
	return b
}

// Ptr is the buffer's device address.
func (b *Buffer) Ptr() hip.DevPtr { return b.ptr }

// Bytes is the buffer's size.
func (b *Buffer) Bytes() int { return b.bytes }

// Retain adds a reference.
func (b *Buffer) Retain() *Buffer {
	b.refs.Add(1)
	return b
}

// Refs is the number of references left.
func (b *Buffer) Refs() int64 { return b.refs.Load() }

// Release drops a reference; the last one frees the buffer. Once the
// references are gone, Release retries a free that failed; releasing a
// buffer already freed is an error, not a second free.
func (b *Buffer) Release() error {
	if n := b.refs.Add(-1); n > 0 {
		return nil
	} else if n < 0 {
		b.refs.Add(1)
		b.mu.Lock()
		defer b.mu.Unlock()
		if b.attempts == 0 || b.err == nil {
			return fmt.Errorf("test buffer %#x released more times than retained", uint64(b.ptr))
		}
		b.attempts++
		b.err = b.free(b.ptr)
		return b.err
	}
	b.mu.Lock()
	b.attempts++
	b.err = b.free(b.ptr)
	err := b.err
	b.mu.Unlock()
	close(b.freed)
	return err
}

// Freed is closed once the deallocator has first returned.
func (b *Buffer) Freed() <-chan struct{} { return b.freed }

// FreeErr is the last deallocator's result once Freed is closed.
func (b *Buffer) FreeErr() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.err
}

// FreeAttempts counts the deallocator's calls.
func (b *Buffer) FreeAttempts() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.attempts
}
