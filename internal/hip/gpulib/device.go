package gpulib

import (
	"errors"
	"fmt"
	"runtime"
	"slices"
	"sync/atomic"
	"unsafe"

	"miotool/internal/dl"
	"miotool/internal/hip"
)

// DeviceConfig is what a backend found when it opened one device.
type DeviceConfig struct {
	Runtime *Runtime
	// SelectArg is Runtime.Funcs.Select's argument for this device: the
	// primary context (CUDA), the ordinal (HIP).
	SelectArg uintptr
	Props     hip.Props
	// ArchErr says why Props.Arch is empty; ModuleLoad refuses with it.
	ArchErr   error
	Modules   ModuleBuilder
	Libraries []hip.Library
	// Release, when set, gives back what opening the device took (CUDA's
	// primary context). Close calls it last.
	Release func() error
}

// Device is hip.Device over a Runtime: the one implementation both GPU
// backends use.
//
// Errors are *hip.Error values in the runtime's dialect whose Op is the
// name of the hip.Device method that failed (printed cuStreamQuery,
// hipMalloc, ...), so that results from the GPU backends and the simulator
// line up call for call; the Code is the runtime's status unchanged.
//
// A runtime's current context or device is per OS thread and Go moves
// goroutines between threads, so each call pins its goroutine to its
// thread and makes the device current there (Funcs.Select) before the
// runtime call. Doing so on every call is right on a thread that never
// called in, or that another device moved, and cheap: cuCtxSetCurrent costs
// 0.12-0.29 µs on an H200 (cuCtxGetCurrent, the check a lazier scheme would
// make, about 0.2 µs), ROCm's hipSetDevice is a bounds check and a
// thread-local store, and a kernel launch takes microseconds. Neither
// disturbs a capture: cuCtxSetCurrent was measured not to, and
// hipSetDevice makes no capture check.
type Device struct {
	funcs     RuntimeFuncs
	rt        *Runtime
	st        StatusMapper
	selectArg uintptr
	props     hip.Props
	archErr   error
	modules   ModuleBuilder
	libs      []hip.Library
	release   func() error
	captures  *CaptureTickets
	closed    atomic.Bool
}

// NewDevice builds the device of cfg; the backend has opened it.
func NewDevice(cfg DeviceConfig) *Device {
	return &Device{
		funcs:     cfg.Runtime.Funcs,
		rt:        cfg.Runtime,
		st:        cfg.Runtime.Status,
		selectArg: cfg.SelectArg,
		props:     cfg.Props,
		archErr:   cfg.ArchErr,
		modules:   cfg.Modules,
		libs:      slices.Clone(cfg.Libraries),
		release:   cfg.Release,
		captures:  NewCaptureTickets(HostFuncs),
	}
}

func (d *Device) Props() hip.Props         { return d.props }
func (d *Device) Dialect() hip.Dialect     { return d.st.Dialect }
func (d *Device) Libraries() []hip.Library { return slices.Clone(d.libs) }

// Captures is the device's record of host-function tickets held by
// captures and graphs.
func (d *Device) Captures() *CaptureTickets { return d.captures }

// enter pins the goroutine to its OS thread and makes the device current
// there; leave undoes the pin.
func (d *Device) enter(op string) error {
	if d.closed.Load() {
		return d.st.Errorf(op, d.rt.ClosedCode, "the device is closed")
	}
	runtime.LockOSThread()
	if st := dl.Call(d.funcs.Select, d.selectArg); st != 0 {
		runtime.UnlockOSThread()
		return d.st.Err(op, st)
	}
	return nil
}

func leave() { runtime.UnlockOSThread() }

// call runs one runtime function under enter/leave and maps its status.
//
//go:uintptrescapes
func (d *Device) call(op string, fn uintptr, args ...uintptr) error {
	if err := d.enter(op); err != nil {
		return err
	}
	st := dl.Call(fn, args...)
	leave()
	return d.st.Err(op, st)
}

func (d *Device) invalid(op, format string, args ...any) error {
	return d.st.Errorf(op, hip.ErrInvalidValue, fmt.Sprintf(format, args...))
}

// Streams and events.

func (d *Device) StreamCreate(flags hip.StreamFlags) (hip.Stream, error) {
	var s uintptr
	err := d.call("StreamCreate", d.funcs.StreamCreate, uintptr(unsafe.Pointer(&s)), uintptr(flags))
	return hip.Stream(s), err
}

func (d *Device) StreamDestroy(s hip.Stream) error {
	return d.call("StreamDestroy", d.funcs.StreamDestroy, uintptr(s))
}

func (d *Device) StreamQuery(s hip.Stream) error {
	return d.call("StreamQuery", d.funcs.StreamQuery, uintptr(s))
}

func (d *Device) StreamSynchronize(s hip.Stream) error {
	return d.call("StreamSynchronize", d.funcs.StreamSynchronize, uintptr(s))
}

func (d *Device) StreamWaitEvent(s hip.Stream, e hip.Event) error {
	return d.call("StreamWaitEvent", d.funcs.StreamWaitEvent, uintptr(s), uintptr(e), 0)
}

func (d *Device) StreamIsCapturing(s hip.Stream) (hip.CaptureStatus, error) {
	var status int32
	err := d.call("StreamIsCapturing", d.funcs.StreamIsCapturing, uintptr(s), uintptr(unsafe.Pointer(&status)))
	return hip.CaptureStatus(status), err
}

func (d *Device) EventCreate(flags hip.EventFlags) (hip.Event, error) {
	var e uintptr
	err := d.call("EventCreate", d.funcs.EventCreate, uintptr(unsafe.Pointer(&e)), uintptr(flags))
	return hip.Event(e), err
}

func (d *Device) EventRecord(e hip.Event, s hip.Stream) error {
	return d.call("EventRecord", d.funcs.EventRecord, uintptr(e), uintptr(s))
}

func (d *Device) EventQuery(e hip.Event) error {
	return d.call("EventQuery", d.funcs.EventQuery, uintptr(e))
}

func (d *Device) EventSynchronize(e hip.Event) error {
	return d.call("EventSynchronize", d.funcs.EventSynchronize, uintptr(e))
}

func (d *Device) EventElapsedTime(start, stop hip.Event) (float32, error) {
	var ms float32
	err := d.call("EventElapsedTime", d.funcs.EventElapsedTime, uintptr(unsafe.Pointer(&ms)), uintptr(start), uintptr(stop))
	return ms, err
}

func (d *Device) EventDestroy(e hip.Event) error {
	return d.call("EventDestroy", d.funcs.EventDestroy, uintptr(e))
}

// Memory.

// Malloc passes a zero size on to the runtime, whose capture check comes
// first (a refusal during capture must show). CUDA refuses the size itself;
// HIP returns a null pointer, which becomes the same invalid-value error.
func (d *Device) Malloc(bytes int) (hip.DevPtr, error) {
	if bytes < 0 {
		return 0, d.invalid("Malloc", "size %d is negative", bytes)
	}
	var p uint64
	if err := d.call("Malloc", d.funcs.Malloc, uintptr(unsafe.Pointer(&p)), uintptr(bytes)); err != nil {
		return 0, err
	}
	if p == 0 {
		return 0, d.invalid("Malloc", "size %d: %s returned no allocation", bytes, hip.CallName("Malloc", d.st.Dialect))
	}
	return hip.DevPtr(p), nil
}

func (d *Device) Free(p hip.DevPtr) error {
	return d.call("Free", d.funcs.Free, uintptr(p))
}

var _ hip.HostMapper = (*Device)(nil)

// HostAllocMapped allocates pinned host memory mapped into the device's
// address space. Backends that did not bind the calls refuse it.
func (d *Device) HostAllocMapped(bytes int) (hip.HostMapped, error) {
	const op = "HostAllocMapped"
	f := d.rt.HostMapped
	if f.GetDevicePointer == 0 {
		return hip.HostMapped{}, d.st.Errorf(op, hip.ErrNotSupported, "this backend has no host-mapped memory")
	}
	if bytes <= 0 {
		return hip.HostMapped{}, d.invalid(op, "size %d must be positive", bytes)
	}
	// The memory is C memory the Go collector never moves or frees.
	var host unsafe.Pointer
	if err := d.call(op, d.funcs.HostAlloc, uintptr(unsafe.Pointer(&host)), uintptr(bytes), f.AllocFlags); err != nil {
		return hip.HostMapped{}, err
	}
	var dev uint64
	if err := d.call(op, f.GetDevicePointer, uintptr(unsafe.Pointer(&dev)), uintptr(host), 0); err != nil {
		_ = d.call("HostFree", d.funcs.HostFree, uintptr(host))
		return hip.HostMapped{}, err
	}
	return hip.HostMapped{Host: host, Dev: hip.DevPtr(dev), Bytes: bytes}, nil
}

// HostFreeMapped frees what HostAllocMapped allocated.
func (d *Device) HostFreeMapped(m hip.HostMapped) error {
	return d.call("HostFree", d.funcs.HostFree, uintptr(m.Host))
}

// HostAlloc allocates pinned host memory with the default flags.
func (d *Device) HostAlloc(bytes int) ([]byte, error) {
	if bytes <= 0 {
		return nil, d.invalid("HostAlloc", "size %d must be positive", bytes)
	}
	// The memory is C memory the Go collector never moves or frees.
	var host unsafe.Pointer
	if err := d.call("HostAlloc", d.funcs.HostAlloc, uintptr(unsafe.Pointer(&host)), uintptr(bytes), 0); err != nil {
		return nil, err
	}
	return unsafe.Slice((*byte)(host), bytes), nil
}

func (d *Device) HostFree(b []byte) error {
	if len(b) == 0 {
		return d.invalid("HostFree", "the host memory to free is empty")
	}
	return d.call("HostFree", d.funcs.HostFree, uintptr(unsafe.Pointer(&b[0])))
}

// HostRegister registers all of b with the default flags. b is memory the
// Go collector does not manage (hip.Device says so), so its address may
// outlive the call.
func (d *Device) HostRegister(b []byte) error {
	if len(b) == 0 {
		return d.invalid("HostRegister", "the host memory to register is empty")
	}
	return d.call("HostRegister", d.funcs.HostRegister, uintptr(unsafe.Pointer(&b[0])), uintptr(len(b)), 0)
}

func (d *Device) HostUnregister(b []byte) error {
	if len(b) == 0 {
		return d.invalid("HostUnregister", "the host memory to unregister is empty")
	}
	return d.call("HostUnregister", d.funcs.HostUnregister, uintptr(unsafe.Pointer(&b[0])))
}

func (d *Device) Memset(p hip.DevPtr, value byte, bytes int) error {
	if bytes < 0 {
		return d.invalid("Memset", "size %d is negative", bytes)
	}
	return d.call("Memset", d.funcs.Memset, uintptr(p), uintptr(value), uintptr(bytes))
}

func (d *Device) MemsetAsync(p hip.DevPtr, value byte, bytes int, s hip.Stream) error {
	if bytes < 0 {
		return d.invalid("MemsetAsync", "size %d is negative", bytes)
	}
	return d.call("MemsetAsync", d.funcs.MemsetAsync, uintptr(p), uintptr(value), uintptr(bytes), uintptr(s))
}

// The copies of zero bytes do nothing and succeed without a runtime call.

func (d *Device) MemcpyHtoD(dst hip.DevPtr, src []byte) error {
	if len(src) == 0 {
		return nil
	}
	return d.call("MemcpyHtoD", d.funcs.MemcpyHtoD, uintptr(dst), uintptr(unsafe.Pointer(&src[0])), uintptr(len(src)))
}

func (d *Device) MemcpyDtoH(dst []byte, src hip.DevPtr) error {
	if len(dst) == 0 {
		return nil
	}
	return d.call("MemcpyDtoH", d.funcs.MemcpyDtoH, uintptr(unsafe.Pointer(&dst[0])), uintptr(src), uintptr(len(dst)))
}

func (d *Device) MemcpyHtoDAsync(dst hip.DevPtr, src []byte, s hip.Stream) error {
	if len(src) == 0 {
		return nil
	}
	return d.call("MemcpyHtoDAsync", d.funcs.MemcpyHtoDAsync, uintptr(dst), uintptr(unsafe.Pointer(&src[0])), uintptr(len(src)), uintptr(s))
}

func (d *Device) MemcpyDtoHAsync(dst []byte, src hip.DevPtr, s hip.Stream) error {
	if len(dst) == 0 {
		return nil
	}
	return d.call("MemcpyDtoHAsync", d.funcs.MemcpyDtoHAsync, uintptr(unsafe.Pointer(&dst[0])), uintptr(src), uintptr(len(dst)), uintptr(s))
}

func (d *Device) MemcpyDtoDAsync(dst, src hip.DevPtr, bytes int, s hip.Stream) error {
	if bytes < 0 {
		return d.invalid("MemcpyDtoDAsync", "size %d is negative", bytes)
	}
	return d.call("MemcpyDtoDAsync", d.funcs.MemcpyDtoDAsync, uintptr(dst), uintptr(src), uintptr(bytes), uintptr(s))
}

// Modules and kernels.

// ModuleLoad builds src for the device's architecture (ModuleBuilder says
// how; the code is cached for the process) and loads the image.
func (d *Device) ModuleLoad(src *hip.KernelSource) (hip.Module, error) {
	if src == nil {
		return 0, d.invalid("ModuleLoad", "kernel source is nil")
	}
	image, how, err := d.modules.image(d.st, src, d.props.Arch, d.archErr)
	if err != nil {
		return 0, err
	}
	return d.ModuleLoadImage(src.Name, image, how)
}

// ModuleLoadImage loads code the runtime's module loader takes as it is
// (a cubin, a code object, NUL-terminated PTX); name and how (e.g. "as
// precompiled PTX") say in a failure's detail what was loaded.
func (d *Device) ModuleLoadImage(name string, image []byte, how string) (hip.Module, error) {
	if len(image) == 0 {
		return 0, d.invalid("ModuleLoad", "kernel source %q: the image to load is empty", name)
	}
	var m uintptr
	err := d.call("ModuleLoad", d.funcs.ModuleLoadData, uintptr(unsafe.Pointer(&m)), uintptr(unsafe.Pointer(&image[0])))
	if err != nil {
		var he *hip.Error
		if errors.As(err, &he) && he.Detail == "" {
			he.Detail = fmt.Sprintf("loading kernel source %q %s", name, how)
		}
		return 0, err
	}
	return hip.Module(m), nil
}

func (d *Device) ModuleGetFunction(m hip.Module, name string) (hip.Function, error) {
	if name == "" {
		return 0, d.invalid("ModuleGetFunction", "kernel name is empty")
	}
	cname := dl.CString(name)
	var f uintptr
	err := d.call("ModuleGetFunction", d.funcs.ModuleGetFunction, uintptr(unsafe.Pointer(&f)), uintptr(m), uintptr(unsafe.Pointer(&cname[0])))
	if err != nil {
		var he *hip.Error
		if errors.As(err, &he) {
			he.Detail = fmt.Sprintf("kernel %q", name)
		}
		return 0, err
	}
	return hip.Function(f), nil
}

func (d *Device) ModuleUnload(m hip.Module) error {
	return d.call("ModuleUnload", d.funcs.ModuleUnload, uintptr(m))
}

func (d *Device) LaunchKernel(f hip.Function, grid, block hip.Dim3, sharedMem uint32, s hip.Stream, args ...hip.KernelArg) error {
	params, err := PackKernelArgs(args)
	if err != nil {
		return d.st.Errorf("LaunchKernel", hip.ErrInvalidValue, err.Error())
	}
	err = d.call("LaunchKernel", d.funcs.LaunchKernel, uintptr(f),
		uintptr(grid.X), uintptr(grid.Y), uintptr(grid.Z),
		uintptr(block.X), uintptr(block.Y), uintptr(block.Z),
		uintptr(sharedMem), uintptr(s), params.Pointer(), 0)
	runtime.KeepAlive(params)
	params.Release()
	return err
}

// Host functions.

// LaunchHostFunc enqueues fn behind the process's one trampoline with a
// ticket; the runtime runs it on a callback thread of its own, a C thread
// the Go runtime did not create. On a capturing stream the ticket repeats
// (every replay of the graph fires it) and lives until the last graph
// holding it is destroyed.
func (d *Device) LaunchHostFunc(s hip.Stream, fn func()) error {
	if fn == nil {
		return d.invalid("LaunchHostFunc", "host function is nil")
	}
	if err := d.enter("LaunchHostFunc"); err != nil {
		return err
	}
	defer leave()
	status, id := d.captureInfo(s)
	st := d.captures.EnqueueHostFunc(fn, status, id, func(tramp, data uintptr) int32 {
		return dl.Call(d.funcs.LaunchHostFunc, uintptr(s), tramp, data)
	})
	return d.st.Err("LaunchHostFunc", st)
}

// captureInfo is s's capture state and capture id, read on the current
// thread (already entered). A failed query reads as not capturing.
func (d *Device) captureInfo(s hip.Stream) (hip.CaptureStatus, uint64) {
	var info struct {
		status int32
		id     uint64
	}
	var st int32
	if d.rt.CaptureInfoGraphOutputs {
		st = dl.Call(d.funcs.StreamGetCaptureInfo, uintptr(s), uintptr(unsafe.Pointer(&info.status)),
			uintptr(unsafe.Pointer(&info.id)), 0, 0, 0, 0)
	} else {
		st = dl.Call(d.funcs.StreamGetCaptureInfo, uintptr(s), uintptr(unsafe.Pointer(&info.status)),
			uintptr(unsafe.Pointer(&info.id)))
	}
	if st != 0 {
		return hip.CaptureStatusNone, 0
	}
	return hip.CaptureStatus(info.status), info.id
}

// Capture and graphs.

func (d *Device) StreamBeginCapture(s hip.Stream, mode hip.CaptureMode) error {
	if err := d.st.CheckCaptureMode("StreamBeginCapture", mode); err != nil {
		return err
	}
	return d.call("StreamBeginCapture", d.funcs.StreamBeginCapture, uintptr(s), uintptr(mode))
}

// StreamEndCapture ends a capture. On failure the graph is zero and the
// host functions the capture recorded are forgotten, unless the capture
// goes on: HIP answers a non-relaxed capture ended from another thread
// with 908 and leaves it active for its own thread to end (CUDA tears it
// down). Older HIP (before ROCm PR 6509) leaves an invalidated stream
// invalidated after this call; the stream is then best destroyed.
func (d *Device) StreamEndCapture(s hip.Stream) (hip.Graph, error) {
	if err := d.enter("StreamEndCapture"); err != nil {
		return 0, err
	}
	defer leave()
	_, id := d.captureInfo(s)
	var g uintptr
	st := dl.Call(d.funcs.StreamEndCapture, uintptr(s), uintptr(unsafe.Pointer(&g)))
	if st != 0 {
		if status, still := d.captureInfo(s); status != hip.CaptureStatusActive || still != id {
			d.captures.Ended(id, 0)
		}
		return 0, d.st.Err("StreamEndCapture", st)
	}
	d.captures.Ended(id, g)
	return hip.Graph(g), nil
}

// ThreadExchangeCaptureMode refuses a mode the runtime might accept and
// leave the thread in (see CheckCaptureMode). The mode is per OS thread
// and needs no current device: the caller has locked its thread.
func (d *Device) ThreadExchangeCaptureMode(mode hip.CaptureMode) (hip.CaptureMode, error) {
	if d.closed.Load() {
		return 0, d.st.Errorf("ThreadExchangeCaptureMode", d.rt.ClosedCode, "the device is closed")
	}
	if err := d.st.CheckCaptureMode("ThreadExchangeCaptureMode", mode); err != nil {
		return 0, err
	}
	m := int32(mode)
	if st := dl.Call(d.funcs.ThreadExchangeCaptureMode, uintptr(unsafe.Pointer(&m))); st != 0 {
		return 0, d.st.Err("ThreadExchangeCaptureMode", st)
	}
	return hip.CaptureMode(m), nil
}

func (d *Device) GraphInstantiate(g hip.Graph) (hip.GraphExec, error) {
	var ge uintptr
	if err := d.call("GraphInstantiate", d.funcs.GraphInstantiate, uintptr(unsafe.Pointer(&ge)), uintptr(g), 0); err != nil {
		return 0, err
	}
	d.captures.Instantiated(uintptr(g), ge)
	return hip.GraphExec(ge), nil
}

func (d *Device) GraphLaunch(ge hip.GraphExec, s hip.Stream) error {
	return d.call("GraphLaunch", d.funcs.GraphLaunch, uintptr(ge), uintptr(s))
}

func (d *Device) GraphExecDestroy(ge hip.GraphExec) error {
	err := d.call("GraphExecDestroy", d.funcs.GraphExecDestroy, uintptr(ge))
	if err == nil {
		d.captures.ExecDestroyed(uintptr(ge))
	}
	return err
}

func (d *Device) GraphDestroy(g hip.Graph) error {
	err := d.call("GraphDestroy", d.funcs.GraphDestroy, uintptr(g))
	if err == nil {
		d.captures.GraphDestroyed(uintptr(g))
	}
	return err
}

func (d *Device) DeviceSynchronize() error {
	return d.call("DeviceSynchronize", d.funcs.DeviceSynchronize)
}

// Close waits for the device's work, forgets the tickets its graphs held
// and gives back what opening took. Later calls fail; a second Close does
// nothing.
func (d *Device) Close() error {
	if d.closed.Swap(true) {
		return nil
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var errs []error
	if st := dl.Call(d.funcs.Select, d.selectArg); st != 0 {
		errs = append(errs, d.st.Err(d.rt.SelectOp, st))
	} else if st := dl.Call(d.funcs.DeviceSynchronize); st != 0 {
		errs = append(errs, d.st.Err("DeviceSynchronize", st))
	}
	d.captures.Close()
	if d.release != nil {
		if err := d.release(); err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) == 1 {
		return errs[0]
	}
	return errors.Join(errs...)
}

var _ hip.Device = (*Device)(nil)
