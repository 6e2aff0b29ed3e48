// Package hip is miotool's runtime interface, in HIP's vocabulary: streams,
// events, device memory, modules and kernel launch, host functions, stream
// capture and graphs. Three backends implement it: the simulated device
// (internal/hip/sim), NVIDIA's driver API (internal/hip/cuda) and AMD's HIP
// runtime (internal/hip/amd). Code above this package never knows which one
// it runs on.
package hip

import (
	"fmt"
	"runtime"
	"unsafe"
)

// Opaque handles. Backends decide what the numbers mean (a C pointer on the
// GPU backends, a table index on the simulator). Zero is never a valid
// handle; StreamLegacy is the one stream handle no backend creates.
type (
	Stream    uintptr
	Event     uintptr
	Module    uintptr
	Function  uintptr
	Graph     uintptr
	GraphExec uintptr
)

// DevPtr is a device address.
type DevPtr uint64

// Add offsets a device address by n bytes.
func (p DevPtr) Add(n int) DevPtr { return p + DevPtr(n) }

// CaptureMode is the mode a capture is begun with, and a thread's
// interaction mode. The values are those of hipStreamCaptureMode and
// CUstreamCaptureMode.
type CaptureMode int

// Capture modes.
const (
	CaptureModeGlobal      CaptureMode = 0
	CaptureModeThreadLocal CaptureMode = 1
	CaptureModeRelaxed     CaptureMode = 2
)

func (m CaptureMode) String() string {
	switch m {
	case CaptureModeGlobal:
		return "global"
	case CaptureModeThreadLocal:
		return "thread-local"
	case CaptureModeRelaxed:
		return "relaxed"
	}
	return fmt.Sprintf("mode(%d)", int(m))
}

// CaptureModes lists the modes in their numeric order.
var CaptureModes = []CaptureMode{CaptureModeGlobal, CaptureModeThreadLocal, CaptureModeRelaxed}

// ParseCaptureMode accepts global, thread-local (or threadlocal) and relaxed.
func ParseCaptureMode(s string) (CaptureMode, error) {
	switch s {
	case "global":
		return CaptureModeGlobal, nil
	case "thread-local", "threadlocal", "thread_local":
		return CaptureModeThreadLocal, nil
	case "relaxed":
		return CaptureModeRelaxed, nil
	}
	return 0, fmt.Errorf("unknown capture mode %q (want global, thread-local or relaxed)", s)
}

// CaptureStatus is a stream's capture state.
type CaptureStatus int

// Capture states.
const (
	CaptureStatusNone        CaptureStatus = 0
	CaptureStatusActive      CaptureStatus = 1
	CaptureStatusInvalidated CaptureStatus = 2
)

func (s CaptureStatus) String() string {
	switch s {
	case CaptureStatusNone:
		return "none"
	case CaptureStatusActive:
		return "active"
	case CaptureStatusInvalidated:
		return "invalidated"
	}
	return fmt.Sprintf("status(%d)", int(s))
}

// StreamFlags are stream creation flags.
type StreamFlags uint32

// StreamNonBlocking creates a stream that does not synchronize with the
// legacy default stream (hipStreamNonBlocking / CU_STREAM_NON_BLOCKING).
// A stream created without it is a blocking stream.
const StreamNonBlocking StreamFlags = 1

// StreamLegacy is the legacy default stream, the one work on stream 0
// lands on in a program built the default way (CU_STREAM_LEGACY,
// hipStreamLegacy): every backend takes it where it takes a stream it
// created, and it can be neither created nor destroyed. While a blocking
// stream captures, CUDA refuses work on it (906, the capture invalidated).
const StreamLegacy Stream = 1

// EventFlags are event creation flags.
type EventFlags uint32

// Event flags, with the runtimes' values.
const (
	EventDefault       EventFlags = 0
	EventBlockingSync  EventFlags = 1
	EventDisableTiming EventFlags = 2
)

// Dim3 is a grid or block shape.
type Dim3 struct{ X, Y, Z uint32 }

// D1 is a one-dimensional Dim3.
func D1(x uint32) Dim3 { return Dim3{x, 1, 1} }

// Count is X*Y*Z.
func (d Dim3) Count() uint64 { return uint64(d.X) * uint64(d.Y) * uint64(d.Z) }

// Props describes the device a Device is bound to.
type Props struct {
	Backend        string // "sim", "cuda" or "hip"
	Ordinal        int
	Name           string // marketing name, e.g. "NVIDIA H200"
	Arch           string // e.g. "sm_90", "gfx942", "sim"
	ComputeUnits   int    // SMs on NVIDIA, CUs on AMD, modelled cores on the simulator
	WarpSize       int
	ClockKHz       int
	TotalMemory    uint64
	RuntimeVersion string
	DriverVersion  string
}

// String is a one-line description used in every result.
func (p Props) String() string {
	return fmt.Sprintf("%s (%s, %d CUs, %s)", p.Name, p.Arch, p.ComputeUnits, p.Backend)
}

// KernelArg is one kernel argument: a DevPtr, int32, uint32, int64, uint64,
// float32 or float64. Backends reject anything else with ErrInvalidValue.
type KernelArg = any

// Memory gives a Go kernel access to device memory.
type Memory interface {
	// Bytes returns the n bytes at p, which must lie inside one allocation.
	Bytes(p DevPtr, n int) ([]byte, error)
	// Float32s returns n float32 values at p (4-byte aligned).
	Float32s(p DevPtr, n int) ([]float32, error)
}

// GoKernel is the simulated device's stand-in for a compiled kernel: it does
// the whole launch's arithmetic for the given grid, block and arguments.
type GoKernel func(mem Memory, grid, block Dim3, args []KernelArg) error

// KernelSource is one kernel source text that compiles for both HIP and
// CUDA, with the Go twins the simulator runs in place of each entry point.
type KernelSource struct {
	Name    string   // a label for logs
	Text    string   // HIP/CUDA C++; entry points are extern "C"
	Kernels []string // entry point names
	// Twins maps an entry point to its Go twin. The simulator loads only
	// sources whose every entry point has one.
	Twins map[string]GoKernel
	// PTX, when set, is precompiled code the CUDA backend may load where no
	// runtime compiler is available (keyed by entry-point set, not by arch).
	PTX string
	// Cubins maps an exact CUDA architecture ("sm_90") to machine code
	// precompiled from Text's source file (see MatchingCubins): the CUDA
	// backend loads the one for its device's architecture as it is, with
	// no runtime compiler and no driver JIT.
	Cubins map[string][]byte
	// Fusion, when set, lets the simulator run several of this source's
	// launches queued back to back on one stream at once. A source whose
	// twins differ from the ones Fusion was written for must not carry it.
	Fusion *Fusion
}

// Fusion runs a run of launches as one pass where running them one after
// another would stream the same buffers through memory again and again.
// The simulator offers Run the kernel launches queued back to back on one
// stream, the first from a source that carries this Fusion; Run either
// runs launches[:n] (n >= 2) completely, leaving memory exactly as running
// them in order would, and returns n, or runs nothing and returns 0. It
// checks every launch it takes before it starts, so it never fails
// halfway.
type Fusion struct {
	Run func(mem Memory, launches []FusedLaunch) int
}

// FusedLaunch is one kernel launch offered to a Fusion: the Fusion of the
// source its kernel comes from (nil: none), the entry point, and the launch.
type FusedLaunch struct {
	Fusion      *Fusion
	Kernel      string
	Grid, Block Dim3
	Args        []KernelArg
}

// Device is a runtime bound to one device. Its methods follow the HIP calls
// of the same name; each returns an *Error on failure.
//
// Thread identity matters: capture modes, "which thread began a capture" and
// (on CUDA) the current context are per OS thread. Code that captures or
// exchanges modes must run on a goroutine locked to its OS thread.
type Device interface {
	Props() Props
	Dialect() Dialect

	StreamCreate(flags StreamFlags) (Stream, error)
	StreamDestroy(s Stream) error
	// StreamQuery returns nil when all work is done, an ErrNotReady error
	// while work is pending.
	StreamQuery(s Stream) error
	StreamSynchronize(s Stream) error
	StreamWaitEvent(s Stream, e Event) error
	StreamIsCapturing(s Stream) (CaptureStatus, error)

	EventCreate(flags EventFlags) (Event, error)
	EventRecord(e Event, s Stream) error
	EventQuery(e Event) error
	EventSynchronize(e Event) error
	// EventElapsedTime is the time between two completed events, in ms.
	EventElapsedTime(start, stop Event) (float32, error)
	EventDestroy(e Event) error

	Malloc(bytes int) (DevPtr, error)
	Free(p DevPtr) error
	// HostAlloc allocates page-locked host memory the device can reach
	// (cuMemHostAlloc / hipHostMalloc, flags 0); HostFree frees it
	// (cuMemFreeHost / hipHostFree). The slice is memory the runtime owns:
	// it is not used after HostFree.
	HostAlloc(bytes int) ([]byte, error)
	HostFree(b []byte) error
	// HostRegister page-locks host memory the caller allocated, all of b
	// (cuMemHostRegister / hipHostRegister, flags 0), until HostUnregister
	// (cuMemHostUnregister / hipHostUnregister). The runtime keeps the
	// address, so b must be memory the Go collector does not manage, such
	// as MapHostPages gives.
	HostRegister(b []byte) error
	HostUnregister(b []byte) error
	// Memset is the synchronous byte memset (hipMemset / cuMemsetD8).
	Memset(p DevPtr, value byte, bytes int) error
	MemsetAsync(p DevPtr, value byte, bytes int, s Stream) error
	MemcpyHtoD(dst DevPtr, src []byte) error
	MemcpyDtoH(dst []byte, src DevPtr) error
	// The async copies read or write the host slice when the stream reaches
	// them; the caller keeps it alive and untouched until then.
	MemcpyHtoDAsync(dst DevPtr, src []byte, s Stream) error
	MemcpyDtoHAsync(dst []byte, src DevPtr, s Stream) error
	MemcpyDtoDAsync(dst, src DevPtr, bytes int, s Stream) error

	// ModuleLoad compiles (or, on the simulator, binds) a kernel source.
	ModuleLoad(src *KernelSource) (Module, error)
	ModuleGetFunction(m Module, name string) (Function, error)
	ModuleUnload(m Module) error
	LaunchKernel(f Function, grid, block Dim3, sharedMem uint32, s Stream, args ...KernelArg) error

	// LaunchHostFunc runs fn on the runtime's callback thread when s
	// reaches it. fn must be short, must not block and must not call the
	// runtime. On a capturing stream it becomes a host node of the graph.
	LaunchHostFunc(s Stream, fn func()) error

	StreamBeginCapture(s Stream, mode CaptureMode) error
	// StreamEndCapture ends a capture; on failure the graph is zero.
	StreamEndCapture(s Stream) (Graph, error)
	// ThreadExchangeCaptureMode sets the calling OS thread's interaction
	// mode and returns the previous one.
	ThreadExchangeCaptureMode(mode CaptureMode) (CaptureMode, error)
	GraphInstantiate(g Graph) (GraphExec, error)
	GraphLaunch(ge GraphExec, s Stream) error
	GraphExecDestroy(ge GraphExec) error
	GraphDestroy(g Graph) error

	DeviceSynchronize() error

	// Libraries lists the shared libraries the backend loaded or tried.
	Libraries() []Library
	// Close releases the device. Pending work is waited for.
	Close() error
}

// WithCaptureMode runs fn on the calling goroutine, locked to its OS thread,
// with the thread's capture interaction mode set to mode, and restores the
// previous mode afterwards.
func WithCaptureMode(d Device, mode CaptureMode, fn func() error) error {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	prev, err := d.ThreadExchangeCaptureMode(mode)
	if err != nil {
		return err
	}
	defer func() { _, _ = d.ThreadExchangeCaptureMode(prev) }()
	return fn()
}

// HostMapped is pinned host memory mapped into the device's address space:
// what a kernel writes at Dev, a host thread reads at Host without any
// runtime call. Benchmarks use it to learn the moment a kernel ends.
type HostMapped struct {
	Host  unsafe.Pointer
	Dev   DevPtr
	Bytes int
}

// HostMapper is implemented by devices that can allocate host-mapped memory
// (cuMemHostAlloc with DEVICEMAP, hipHostMalloc with hipHostMallocMapped;
// on the simulator, device memory is host memory already). It is optional:
// callers check for it.
type HostMapper interface {
	HostAllocMapped(bytes int) (HostMapped, error)
	HostFreeMapped(m HostMapped) error
}
