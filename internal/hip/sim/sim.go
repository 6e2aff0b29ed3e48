// Package sim is miotool's simulated GPU device, in pure Go. It implements
// hip.Device and is the backend used where no GPU runtime loads.
//
// What it models:
//   - Streams are FIFOs, each served by its own goroutine. Kernels are Go
//     twins (hip.GoKernel) that do the real arithmetic, so slow work is
//     really slow. Stream 0 is not modelled: handles are never 0.
//     hip.StreamLegacy is the legacy default stream, a stream of its own
//     made on first use, on a hardware queue of its own. A stream is
//     blocking or non-blocking as it was created, but only the capture
//     rules tell the two apart (work on the legacy stream meets the
//     legacy-stream rows of a blocking capture's table): no stream waits
//     for another implicitly.
//   - GPU_MAX_HW_QUEUES: each stream is bound to one of Q hardware queues
//     (fewest streams first, lowest index on ties). A queue runs one
//     operation at a time, in submission order across its streams, so
//     streams past the cap serialize.
//   - Host functions run on one process-wide goroutine, one at a time, and
//     hold their stream (and its queue) until they return.
//   - Stream capture records work into a linear graph. Which calls an active
//     capture refuses, and what a refusal does to it, is data: one RuleTable
//     per dialect (see Rules).
//   - Thread identity is the OS thread id, as on the real runtimes: callers
//     that capture or exchange modes lock their goroutine to a thread.
//   - A fault inside a kernel (an out-of-range or freed address) is a sticky
//     device error: every later query, synchronize and work submission
//     returns it, and queued kernels, copies, memsets and host functions are
//     skipped (CUDA does not call host functions after a context error).
//   - Free first waits for every stream of the device to drain, as
//     hipFree/cuMemFree do.
//   - Kernel launches queued back to back on one stream may run as one pass
//     where their source carries a hip.Fusion (FuseLaunches): the same
//     results, fewer trips of the same buffers through the host's memory.
//
// A fault injector (Device.Faults) lets tests fail queries, frees, event
// creates and records, stream creates and mallocs, and drop, hold or delay
// host functions. MemoryInUse reports what was allocated and not freed.
package sim

import (
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"

	"miotool/internal/hip"
)

// TotalMemory is the simulated device's memory size; Malloc beyond it
// fails with ErrOutOfMemory.
const TotalMemory = 4 << 30

// maxHWQueues bounds OpenOptions.HWQueues, as hip.ParseHWQueues bounds the
// environment variable.
const maxHWQueues = 1 << 16

func init() {
	hip.Register(hip.Registration{
		Name:  "sim",
		GPU:   false,
		Order: 100,
		Open: func(o hip.OpenOptions) (hip.Device, error) {
			d, err := New(o)
			if err != nil {
				return nil, err
			}
			return d, nil
		},
	})
}

// Device is a simulated device. It is safe for concurrent use.
type Device struct {
	dialect hip.Dialect
	rules   RuleTable
	props   hip.Props
	faults  *Faults
	runner  *callbackRunner
	mem     *memory

	// noFusion turns hip.Fusion off (FuseLaunches); fused counts the
	// launches that ran fused.
	noFusion atomic.Bool
	fused    atomic.Int64

	sticky    atomic.Pointer[stickyFault]
	closing   atomic.Bool
	closeCh   chan struct{} // closed when Close begins
	closeOnce sync.Once
	workers   sync.WaitGroup

	// mu guards every table below and all capture and event state.
	mu          sync.Mutex
	nextHandle  uintptr
	streams     map[hip.Stream]*stream
	live        map[*stream]struct{} // streams whose goroutine still runs, destroyed ones included
	queues      []*hwQueue
	events      map[hip.Event]*event
	modules     map[hip.Module]*module
	functions   map[hip.Function]*function
	graphs      map[hip.Graph]*graph
	execs       map[hip.GraphExec]*graph
	captures    []*capture // live captures, in the order they began
	threadModes map[int]hip.CaptureMode
	host        hostMemory
	// legacy is hip.StreamLegacy, made on first use.
	legacy *stream
}

var _ hip.Device = (*Device)(nil)

// stickyFault is the first fault of the device; it poisons it for good.
type stickyFault struct {
	code   hip.Code
	detail string
}

// New opens a simulated device. opts.Dialect picks the rule table and the
// error naming ("" means cuda); opts.HWQueues 0 reads GPU_MAX_HW_QUEUES.
func New(opts hip.OpenOptions) (*Device, error) {
	dialect := opts.Dialect
	if dialect == "" {
		dialect = hip.DialectCUDA
	}
	if dialect != hip.DialectCUDA && dialect != hip.DialectHIP {
		return nil, &hip.Error{Op: "Init", Code: hip.ErrInvalidValue, Dialect: hip.DialectCUDA,
			Detail: fmt.Sprintf("unknown dialect %q (want hip or cuda)", opts.Dialect)}
	}
	if opts.Ordinal != 0 {
		return nil, &hip.Error{Op: "DeviceGet", Code: hip.ErrInvalidDevice, Dialect: dialect,
			Detail: fmt.Sprintf("device ordinal %d does not exist (the simulator has one device, ordinal 0)", opts.Ordinal)}
	}
	queues := opts.HWQueues
	switch {
	case queues < 0 || queues > maxHWQueues:
		return nil, &hip.Error{Op: "Init", Code: hip.ErrInvalidValue, Dialect: dialect,
			Detail: fmt.Sprintf("HWQueues %d is out of range (want 0 for %s, or 1..%d)", queues, hip.EnvHWQueues, maxHWQueues)}
	case queues == 0:
		queues, _ = hip.HWQueuesFromEnv()
	}
	warp := 32
	if dialect == hip.DialectHIP {
		warp = 64
	}
	d := &Device{
		dialect: dialect,
		rules:   Rules(dialect),
		props: hip.Props{
			Backend:        "sim",
			Ordinal:        0,
			Name:           fmt.Sprintf("miotool simulated device (%s rules)", dialect),
			Arch:           "sim",
			ComputeUnits:   runtime.NumCPU(),
			WarpSize:       warp,
			ClockKHz:       1_000_000,
			TotalMemory:    TotalMemory,
			RuntimeVersion: "sim-1",
			DriverVersion:  runtime.Version(),
		},
		faults:      newFaults(),
		mem:         newMemory(TotalMemory, dialect),
		closeCh:     make(chan struct{}),
		streams:     make(map[hip.Stream]*stream),
		live:        make(map[*stream]struct{}),
		events:      make(map[hip.Event]*event),
		modules:     make(map[hip.Module]*module),
		functions:   make(map[hip.Function]*function),
		graphs:      make(map[hip.Graph]*graph),
		execs:       make(map[hip.GraphExec]*graph),
		threadModes: make(map[int]hip.CaptureMode),
		host:        newHostMemory(),
		// Handle 1 is hip.StreamLegacy's, so no created object takes it.
		nextHandle: uintptr(hip.StreamLegacy),
	}
	for i := 0; i < queues; i++ {
		d.queues = append(d.queues, newHWQueue(i))
	}
	d.runner = acquireCallbackRunner()
	return d, nil
}

// Props describes the simulated device.
func (d *Device) Props() hip.Props { return d.props }

// Dialect is the dialect the device names errors in and takes rules from.
func (d *Device) Dialect() hip.Dialect { return d.dialect }

// Rules is the rule table the device applies.
func (d *Device) Rules() RuleTable { return d.rules }

// HWQueues is the number of hardware queues streams are spread over.
func (d *Device) HWQueues() int { return len(d.queues) }

// Faults is the device's fault injector.
func (d *Device) Faults() *Faults { return d.faults }

// Libraries returns nil: the simulator loads no shared library.
func (d *Device) Libraries() []hip.Library { return nil }

// Close waits for all queued work, then stops every goroutine of the
// device. Host functions held by the fault injector are released so that
// Close cannot hang on them. Later calls return ErrDeinitialized.
func (d *Device) Close() error {
	d.closeOnce.Do(func() {
		d.mu.Lock()
		d.closing.Store(true)
		close(d.closeCh)
		for len(d.captures) > 0 {
			d.dropCaptureLocked(d.captures[0])
		}
		live := make([]*stream, 0, len(d.live))
		for s := range d.live {
			live = append(live, s)
		}
		clear(d.streams)
		d.mu.Unlock()

		d.faults.releaseAllHolds()
		for _, s := range live {
			s.shutdown()
		}
		d.workers.Wait()
		releaseCallbackRunner()
	})
	return nil
}

// newHandleLocked returns a fresh non-zero handle number; handles of all
// kinds share one counter, so a handle of the wrong kind is never valid.
func (d *Device) newHandleLocked() uintptr {
	d.nextHandle++
	return d.nextHandle
}

func (d *Device) newErr(op string, c hip.Code, detail string) error {
	return &hip.Error{Op: op, Code: c, Dialect: d.dialect, Detail: detail}
}

func (d *Device) errf(op string, c hip.Code, format string, args ...any) error {
	return d.newErr(op, c, fmt.Sprintf(format, args...))
}

// alive refuses every call once Close has begun.
func (d *Device) alive(op string) error {
	if d.closing.Load() {
		return d.newErr(op, hip.ErrDeinitialized, "the device is closed")
	}
	return nil
}

// stickyErr returns the sticky device error, if there is one.
func (d *Device) stickyErr(op string) error {
	f := d.sticky.Load()
	if f == nil {
		return nil
	}
	return d.newErr(op, f.code, "sticky device error: "+f.detail)
}

// setSticky records the device's first fault; later faults do not replace it.
func (d *Device) setSticky(c hip.Code, detail string) {
	d.sticky.CompareAndSwap(nil, &stickyFault{code: c, detail: detail})
}

func (d *Device) faulted() bool { return d.sticky.Load() != nil }
