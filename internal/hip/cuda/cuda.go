// Package cuda is miotool's NVIDIA backend: the CUDA driver API
// (libcuda.so.1) and NVRTC, called through purego with no cgo.
//
// Errors are *hip.Error values in the CUDA dialect whose Op is the name of
// the hip.Device method that failed (printed cuStreamQuery, cuMemAlloc, ...), so that
// results from this backend and the simulator line up call for call; the
// Code is the CUresult unchanged.
//
// The primary context is made current on the calling OS thread before each
// call (Go moves goroutines between threads); each call is pinned to its
// thread for that pair of C calls.
package cuda

import (
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"unsafe"

	"miotool/internal/hip"
	"miotool/internal/hip/gpulib"
)

const backendName = "cuda"

func init() {
	hip.Register(hip.Backend{Name: backendName, GPU: true, Order: 20, Open: Open})
}

// Open binds device opts.Ordinal through the driver API. A missing library
// or symbol, a failing cuInit or a missing device is a *hip.UnavailableError.
func Open(opts hip.OpenOptions) (hip.Device, error) {
	drv, err := defaultDriver()
	if err != nil {
		return nil, err
	}
	return openDevice(opts, drv, defaultNVRTC())
}

type device struct {
	drv      *driverLib
	api      *driverAPI
	nv       *nvrtcLib
	st       gpulib.StatusMapper
	dev      int32 // CUdevice
	ctx      uintptr
	props    hip.Props
	captures *gpulib.CaptureTickets
	closed   atomic.Bool
}

func openDevice(opts hip.OpenOptions, drv *driverLib, nv *nvrtcLib) (*device, error) {
	api := &drv.api
	libs := []hip.Library{drv.lib, nv.lib}
	var count int32
	if st := gpulib.Call(api.deviceGetCount, uintptr(unsafe.Pointer(&count))); st != 0 {
		return nil, unavailable(drv.status.Err("DeviceGetCount", st).Error(), libs...)
	}
	if count == 0 {
		return nil, unavailable("no CUDA device is present", libs...)
	}
	if opts.Ordinal < 0 || opts.Ordinal >= int(count) {
		return nil, unavailable(fmt.Sprintf("device ordinal %d is out of range: %d CUDA device(s) present", opts.Ordinal, count), libs...)
	}
	d := &device{drv: drv, api: api, nv: nv, st: drv.status, captures: gpulib.NewCaptureTickets(gpulib.HostFuncs)}
	if st := gpulib.Call(api.deviceGet, uintptr(unsafe.Pointer(&d.dev)), uintptr(opts.Ordinal)); st != 0 {
		return nil, unavailable(d.st.Err("DeviceGet", st).Error(), libs...)
	}
	if st := gpulib.Call(api.primaryCtxRetain, uintptr(unsafe.Pointer(&d.ctx)), uintptr(d.dev)); st != 0 {
		return nil, unavailable(d.st.Err("DevicePrimaryCtxRetain", st).Error(), libs...)
	}
	d.props = d.readProps(opts.Ordinal)
	return d, nil
}

func (d *device) readProps(ordinal int) hip.Props {
	attr := func(a int) int {
		var v int32
		if gpulib.Call(d.api.deviceGetAttribute, uintptr(unsafe.Pointer(&v)), uintptr(a), uintptr(d.dev)) != 0 {
			return 0
		}
		return int(v)
	}
	name := make([]byte, 256)
	if gpulib.Call(d.api.deviceGetName, uintptr(unsafe.Pointer(&name[0])), uintptr(len(name)), uintptr(d.dev)) != 0 {
		name[0] = 0
	}
	var total uintptr
	gpulib.Call(d.api.deviceMem, uintptr(unsafe.Pointer(&total)), uintptr(d.dev))
	return hip.Props{
		Backend:        backendName,
		Ordinal:        ordinal,
		Name:           gpulib.GoString(uintptr(unsafe.Pointer(&name[0]))),
		Arch:           fmt.Sprintf("sm_%d%d", attr(attrCCMajor), attr(attrCCMinor)),
		ComputeUnits:   attr(attrMultiprocessors),
		WarpSize:       attr(attrWarpSize),
		ClockKHz:       attr(attrClockRate),
		TotalMemory:    uint64(total),
		RuntimeVersion: "driver API",
		DriverVersion:  d.drv.version,
	}
}

func (d *device) Props() hip.Props         { return d.props }
func (d *device) Dialect() hip.Dialect     { return hip.DialectCUDA }
func (d *device) Libraries() []hip.Library { return []hip.Library{d.drv.lib, d.nv.lib} }

// enter pins the goroutine to its OS thread and makes the primary context
// current there; leave undoes the pin. Setting the context on every call is
// right even on a thread that never called in, and cheap: 0.12-0.29 us on an
// H200 (cuCtxGetCurrent, the check a lazier scheme would make, costs
// ~0.2 us), lost in the ~4.5 us of a kernel launch. Neither call disturbs
// another thread's capture (measured).
func (d *device) enter(op string) error {
	if d.closed.Load() {
		return d.st.Errorf(op, hip.ErrInvalidContext, "the device is closed")
	}
	runtime.LockOSThread()
	if st := gpulib.Call(d.api.ctxSetCurrent, d.ctx); st != 0 {
		runtime.UnlockOSThread()
		return d.st.Err(op, st)
	}
	return nil
}

func leave() { runtime.UnlockOSThread() }

// call runs one driver function under enter/leave and maps its status.
//
//go:uintptrescapes
func (d *device) call(op string, fn uintptr, args ...uintptr) error {
	if err := d.enter(op); err != nil {
		return err
	}
	st := gpulib.Call(fn, args...)
	leave()
	return d.st.Err(op, st)
}

func (d *device) invalid(op, format string, args ...any) error {
	return d.st.Errorf(op, hip.ErrInvalidValue, fmt.Sprintf(format, args...))
}

// Streams and events.

func (d *device) StreamCreate(flags hip.StreamFlags) (hip.Stream, error) {
	var s uintptr
	err := d.call("StreamCreate", d.api.streamCreate, uintptr(unsafe.Pointer(&s)), uintptr(flags))
	return hip.Stream(s), err
}

func (d *device) StreamDestroy(s hip.Stream) error {
	return d.call("StreamDestroy", d.api.streamDestroy, uintptr(s))
}

func (d *device) StreamQuery(s hip.Stream) error {
	return d.call("StreamQuery", d.api.streamQuery, uintptr(s))
}

func (d *device) StreamSynchronize(s hip.Stream) error {
	return d.call("StreamSynchronize", d.api.streamSynchronize, uintptr(s))
}

func (d *device) StreamWaitEvent(s hip.Stream, e hip.Event) error {
	return d.call("StreamWaitEvent", d.api.streamWaitEvent, uintptr(s), uintptr(e), 0)
}

func (d *device) StreamIsCapturing(s hip.Stream) (hip.CaptureStatus, error) {
	var status int32
	err := d.call("StreamIsCapturing", d.api.streamIsCapturing, uintptr(s), uintptr(unsafe.Pointer(&status)))
	return hip.CaptureStatus(status), err
}

func (d *device) EventCreate(flags hip.EventFlags) (hip.Event, error) {
	var e uintptr
	err := d.call("EventCreate", d.api.eventCreate, uintptr(unsafe.Pointer(&e)), uintptr(flags))
	return hip.Event(e), err
}

func (d *device) EventRecord(e hip.Event, s hip.Stream) error {
	return d.call("EventRecord", d.api.eventRecord, uintptr(e), uintptr(s))
}

func (d *device) EventQuery(e hip.Event) error {
	return d.call("EventQuery", d.api.eventQuery, uintptr(e))
}

func (d *device) EventSynchronize(e hip.Event) error {
	return d.call("EventSynchronize", d.api.eventSynchronize, uintptr(e))
}

func (d *device) EventElapsedTime(start, stop hip.Event) (float32, error) {
	var ms float32
	err := d.call("EventElapsedTime", d.api.eventElapsedTime, uintptr(unsafe.Pointer(&ms)), uintptr(start), uintptr(stop))
	return ms, err
}

func (d *device) EventDestroy(e hip.Event) error {
	return d.call("EventDestroy", d.api.eventDestroy, uintptr(e))
}

// Memory.

func (d *device) Malloc(bytes int) (hip.DevPtr, error) {
	if bytes < 0 {
		return 0, d.invalid("Malloc", "size %d is negative", bytes)
	}
	var p uint64
	err := d.call("Malloc", d.api.memAlloc, uintptr(unsafe.Pointer(&p)), uintptr(bytes))
	return hip.DevPtr(p), err
}

func (d *device) Free(p hip.DevPtr) error {
	return d.call("Free", d.api.memFree, uintptr(p))
}

func (d *device) Memset(p hip.DevPtr, value byte, bytes int) error {
	if bytes < 0 {
		return d.invalid("Memset", "size %d is negative", bytes)
	}
	return d.call("Memset", d.api.memsetD8, uintptr(p), uintptr(value), uintptr(bytes))
}

func (d *device) MemsetAsync(p hip.DevPtr, value byte, bytes int, s hip.Stream) error {
	if bytes < 0 {
		return d.invalid("MemsetAsync", "size %d is negative", bytes)
	}
	return d.call("MemsetAsync", d.api.memsetD8Async, uintptr(p), uintptr(value), uintptr(bytes), uintptr(s))
}

// The copies of zero bytes do nothing and succeed without a driver call.

func (d *device) MemcpyHtoD(dst hip.DevPtr, src []byte) error {
	if len(src) == 0 {
		return nil
	}
	return d.call("MemcpyHtoD", d.api.memcpyHtoD, uintptr(dst), uintptr(unsafe.Pointer(&src[0])), uintptr(len(src)))
}

func (d *device) MemcpyDtoH(dst []byte, src hip.DevPtr) error {
	if len(dst) == 0 {
		return nil
	}
	return d.call("MemcpyDtoH", d.api.memcpyDtoH, uintptr(unsafe.Pointer(&dst[0])), uintptr(src), uintptr(len(dst)))
}

func (d *device) MemcpyHtoDAsync(dst hip.DevPtr, src []byte, s hip.Stream) error {
	if len(src) == 0 {
		return nil
	}
	return d.call("MemcpyHtoDAsync", d.api.memcpyHtoDAsync, uintptr(dst), uintptr(unsafe.Pointer(&src[0])), uintptr(len(src)), uintptr(s))
}

func (d *device) MemcpyDtoHAsync(dst []byte, src hip.DevPtr, s hip.Stream) error {
	if len(dst) == 0 {
		return nil
	}
	return d.call("MemcpyDtoHAsync", d.api.memcpyDtoHAsync, uintptr(unsafe.Pointer(&dst[0])), uintptr(src), uintptr(len(dst)), uintptr(s))
}

func (d *device) MemcpyDtoDAsync(dst, src hip.DevPtr, bytes int, s hip.Stream) error {
	if bytes < 0 {
		return d.invalid("MemcpyDtoDAsync", "size %d is negative", bytes)
	}
	return d.call("MemcpyDtoDAsync", d.api.memcpyDtoDAsync, uintptr(dst), uintptr(src), uintptr(bytes), uintptr(s))
}

// Modules and kernels.

func (d *device) ModuleLoad(src *hip.KernelSource) (hip.Module, error) {
	if src == nil {
		return 0, d.invalid("ModuleLoad", "kernel source is nil")
	}
	image, err := d.moduleImage(src)
	if err != nil {
		return 0, err
	}
	var m uintptr
	err = d.call("ModuleLoad", d.api.moduleLoadData, uintptr(unsafe.Pointer(&m)), uintptr(unsafe.Pointer(&image[0])))
	if err != nil {
		var he *hip.Error
		if errors.As(err, &he) && he.Detail == "" {
			he.Detail = fmt.Sprintf("loading kernel source %q", src.Name)
		}
		return 0, err
	}
	return hip.Module(m), nil
}

// moduleImage is the code cuModuleLoadData gets for src: NVRTC's output for
// this device where NVRTC works, else the source's precompiled PTX.
func (d *device) moduleImage(src *hip.KernelSource) ([]byte, error) {
	hasText := strings.TrimSpace(src.Text) != ""
	if hasText && d.nv.available() {
		code, err := d.nv.compileForArch(src, d.props.Arch)
		if err == nil {
			return code, nil
		}
		var ce *gpulib.CompileError
		if src.PTX == "" || (errors.As(err, &ce) && ce.Status == nvrtcErrorCompilation) {
			return nil, d.st.Errorf("ModuleLoad", hip.ErrInvalidSource, err.Error())
		}
		notePTXFallback(src.Name, "NVRTC could not build it for "+d.props.Arch+": "+err.Error())
	} else if src.PTX != "" {
		why := "no kernel text"
		if hasText {
			why = d.nv.err.Error()
		}
		notePTXFallback(src.Name, why)
	}
	if src.PTX != "" {
		return gpulib.CString(src.PTX), nil
	}
	if !hasText {
		return nil, d.invalid("ModuleLoad", "kernel source %q has neither text nor PTX", src.Name)
	}
	return nil, d.st.Errorf("ModuleLoad", hip.ErrNotSupported,
		fmt.Sprintf("kernel source %q cannot be built: NVRTC is unavailable (%v) and the source carries no precompiled PTX", src.Name, d.nv.err))
}

var ptxNoted sync.Map // kernel source name -> struct{}

// notePTXFallback logs, once per kernel source and process, that its
// precompiled PTX is used instead of NVRTC's output.
func notePTXFallback(name, why string) {
	if _, seen := ptxNoted.LoadOrStore(name, struct{}{}); seen {
		return
	}
	slog.Warn("cuda: loading precompiled PTX instead of compiling with NVRTC", "source", name, "reason", why)
}

func (d *device) ModuleGetFunction(m hip.Module, name string) (hip.Function, error) {
	if name == "" {
		return 0, d.invalid("ModuleGetFunction", "kernel name is empty")
	}
	cname := gpulib.CString(name)
	var f uintptr
	err := d.call("ModuleGetFunction", d.api.moduleGetFunction, uintptr(unsafe.Pointer(&f)), uintptr(m), uintptr(unsafe.Pointer(&cname[0])))
	if err != nil {
		var he *hip.Error
		if errors.As(err, &he) {
			he.Detail = fmt.Sprintf("kernel %q", name)
		}
		return 0, err
	}
	return hip.Function(f), nil
}

func (d *device) ModuleUnload(m hip.Module) error {
	return d.call("ModuleUnload", d.api.moduleUnload, uintptr(m))
}

func (d *device) LaunchKernel(f hip.Function, grid, block hip.Dim3, sharedMem uint32, s hip.Stream, args ...hip.KernelArg) error {
	params, err := gpulib.PackKernelArgs(args)
	if err != nil {
		return d.st.Errorf("LaunchKernel", hip.ErrInvalidValue, err.Error())
	}
	err = d.call("LaunchKernel", d.api.launchKernel, uintptr(f),
		uintptr(grid.X), uintptr(grid.Y), uintptr(grid.Z),
		uintptr(block.X), uintptr(block.Y), uintptr(block.Z),
		uintptr(sharedMem), uintptr(s), params.Pointer(), 0)
	runtime.KeepAlive(params)
	params.Release()
	return err
}

// Host functions.

// LaunchHostFunc enqueues fn behind the process's one trampoline with a
// ticket. On a capturing stream the ticket repeats (every replay of the
// graph fires it) and lives until the last graph holding it is destroyed.
func (d *device) LaunchHostFunc(s hip.Stream, fn func()) error {
	if fn == nil {
		return d.invalid("LaunchHostFunc", "host function is nil")
	}
	if err := d.enter("LaunchHostFunc"); err != nil {
		return err
	}
	defer leave()
	status, id := d.captureInfo(s)
	kind := gpulib.OneShot
	if status == hip.CaptureStatusActive {
		kind = gpulib.Repeating
	}
	tk := gpulib.HostFuncs.Register(fn, kind)
	if kind == gpulib.Repeating {
		d.captures.Add(id, tk)
	}
	st := gpulib.Call(d.api.launchHostFunc, uintptr(s), gpulib.HostFnTrampoline(), uintptr(tk))
	if st != 0 {
		if kind == gpulib.Repeating {
			d.captures.Remove(id, tk)
		} else {
			gpulib.HostFuncs.Forget(tk)
		}
		return d.st.Err("LaunchHostFunc", st)
	}
	return nil
}

// captureInfo is s's capture state and capture id, read on the current
// thread (already entered). A failed query reads as not capturing.
func (d *device) captureInfo(s hip.Stream) (hip.CaptureStatus, uint64) {
	var info struct {
		status int32
		id     uint64
	}
	if gpulib.Call(d.api.streamGetCaptureInfo, uintptr(s), uintptr(unsafe.Pointer(&info.status)),
		uintptr(unsafe.Pointer(&info.id)), 0, 0, 0, 0) != 0 {
		return hip.CaptureStatusNone, 0
	}
	return hip.CaptureStatus(info.status), info.id
}

// Capture and graphs.

// validMode refuses modes outside global, thread-local and relaxed: the
// driver (580.159, CUDA 13.0) accepts 7 in cuThreadExchangeStreamCaptureMode
// and leaves the thread in that undefined mode.
func (d *device) validMode(op string, mode hip.CaptureMode) error {
	if mode < hip.CaptureModeGlobal || mode > hip.CaptureModeRelaxed {
		return d.invalid(op, "capture mode %d is not global (0), thread-local (1) or relaxed (2)", int(mode))
	}
	return nil
}

func (d *device) StreamBeginCapture(s hip.Stream, mode hip.CaptureMode) error {
	if err := d.validMode("StreamBeginCapture", mode); err != nil {
		return err
	}
	return d.call("StreamBeginCapture", d.api.streamBeginCapture, uintptr(s), uintptr(mode))
}

func (d *device) StreamEndCapture(s hip.Stream) (hip.Graph, error) {
	if err := d.enter("StreamEndCapture"); err != nil {
		return 0, err
	}
	defer leave()
	_, id := d.captureInfo(s)
	var g uintptr
	st := gpulib.Call(d.api.streamEndCapture, uintptr(s), uintptr(unsafe.Pointer(&g)))
	if st != 0 {
		d.captures.Ended(id, 0)
		return 0, d.st.Err("StreamEndCapture", st)
	}
	d.captures.Ended(id, g)
	return hip.Graph(g), nil
}

func (d *device) ThreadExchangeCaptureMode(mode hip.CaptureMode) (hip.CaptureMode, error) {
	if d.closed.Load() {
		return 0, d.st.Errorf("ThreadExchangeCaptureMode", hip.ErrInvalidContext, "the device is closed")
	}
	if err := d.validMode("ThreadExchangeCaptureMode", mode); err != nil {
		return 0, err
	}
	// Per OS thread and context-free: the caller has locked its thread.
	m := int32(mode)
	if st := gpulib.Call(d.api.threadExchangeCaptureMode, uintptr(unsafe.Pointer(&m))); st != 0 {
		return 0, d.st.Err("ThreadExchangeCaptureMode", st)
	}
	return hip.CaptureMode(m), nil
}

func (d *device) GraphInstantiate(g hip.Graph) (hip.GraphExec, error) {
	var ge uintptr
	if err := d.call("GraphInstantiate", d.api.graphInstantiate, uintptr(unsafe.Pointer(&ge)), uintptr(g), 0); err != nil {
		return 0, err
	}
	d.captures.Instantiated(uintptr(g), ge)
	return hip.GraphExec(ge), nil
}

func (d *device) GraphLaunch(ge hip.GraphExec, s hip.Stream) error {
	return d.call("GraphLaunch", d.api.graphLaunch, uintptr(ge), uintptr(s))
}

func (d *device) GraphExecDestroy(ge hip.GraphExec) error {
	err := d.call("GraphExecDestroy", d.api.graphExecDestroy, uintptr(ge))
	if err == nil {
		d.captures.ExecDestroyed(uintptr(ge))
	}
	return err
}

func (d *device) GraphDestroy(g hip.Graph) error {
	err := d.call("GraphDestroy", d.api.graphDestroy, uintptr(g))
	if err == nil {
		d.captures.GraphDestroyed(uintptr(g))
	}
	return err
}

func (d *device) DeviceSynchronize() error {
	return d.call("DeviceSynchronize", d.api.ctxSynchronize)
}

// Close waits for the device's work, forgets the tickets its graphs held
// and releases the primary context. Later calls fail; a second Close does
// nothing.
func (d *device) Close() error {
	if d.closed.Swap(true) {
		return nil
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var errs []error
	if st := gpulib.Call(d.api.ctxSetCurrent, d.ctx); st != 0 {
		errs = append(errs, d.st.Err("Close", st))
	} else if st := gpulib.Call(d.api.ctxSynchronize); st != 0 {
		errs = append(errs, d.st.Err("DeviceSynchronize", st))
	}
	d.captures.Close()
	if st := gpulib.Call(d.api.primaryCtxRelease, uintptr(d.dev)); st != 0 {
		errs = append(errs, d.st.Err("DevicePrimaryCtxRelease", st))
	}
	return errors.Join(errs...)
}

var _ hip.Device = (*device)(nil)
