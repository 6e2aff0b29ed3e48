// Package amd is miotool's AMD backend: the HIP runtime (libamdhip64) and
// hiprtc, called through purego with no cgo.
//
// Errors are *hip.Error values in the HIP dialect whose Op is the name of
// the hip.Device method that failed (printed hipStreamQuery, hipMalloc, ...),
// so that results from this backend and the simulator line up call for
// call; the Code is the hipError_t unchanged.
//
// HIP's current device is per host thread and Go moves goroutines between
// threads, so each call pins its goroutine to its OS thread and selects the
// device there (hipSetDevice) before the runtime call.
package amd

import (
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync/atomic"
	"unsafe"

	"miotool/internal/hip"
	"miotool/internal/hip/gpulib"
)

const backendName = "hip"

func init() {
	hip.Register(hip.Backend{Name: backendName, GPU: true, Order: 10, Open: Open})
}

// Open binds device opts.Ordinal through the HIP runtime. A missing library
// or symbol, a failing hipInit or a missing device is a
// *hip.UnavailableError.
func Open(opts hip.OpenOptions) (hip.Device, error) {
	rt, err := defaultRuntime()
	if err != nil {
		return nil, err
	}
	return openDevice(opts, rt, defaultHIPRTC(rt.lib.Loaded))
}

type device struct {
	rt       *runtimeLib
	api      *runtimeAPI
	rtc      *hiprtcLib
	st       gpulib.StatusMapper
	ordinal  int
	gcnArch  string // as the runtime names it, e.g. gfx942:sramecc+:xnack-
	archErr  error  // why gcnArch gave no base architecture; nil when it did
	props    hip.Props
	captures *gpulib.CaptureTickets
	closed   atomic.Bool
}

func openDevice(opts hip.OpenOptions, rt *runtimeLib, rtc *hiprtcLib) (*device, error) {
	api := &rt.api
	libs := []hip.Library{rt.lib, rtc.Lib}
	var count int32
	if st := gpulib.Call(api.getDeviceCount, uintptr(unsafe.Pointer(&count))); st != 0 {
		return nil, unavailable(rt.status.Err("DeviceGetCount", st).Error(), libs...)
	}
	if count == 0 {
		return nil, unavailable("no HIP device is present", libs...)
	}
	if opts.Ordinal < 0 || opts.Ordinal >= int(count) {
		return nil, unavailable(fmt.Sprintf("device ordinal %d is out of range: %d HIP device(s) present", opts.Ordinal, count), libs...)
	}
	d := &device{rt: rt, api: api, rtc: rtc, st: rt.status, ordinal: opts.Ordinal,
		captures: gpulib.NewCaptureTickets(gpulib.HostFuncs)}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if st := gpulib.Call(api.setDevice, uintptr(d.ordinal)); st != 0 {
		return nil, unavailable(d.st.Err("SetDevice", st).Error(), libs...)
	}
	d.props = d.readProps()
	return d, nil
}

// readProps fills Props from attributes, hipDeviceGetName and
// hipDeviceTotalMem, and the architecture from the R0600 properties. A
// property the runtime will not give reads as zero; an architecture it will
// not give leaves Arch empty and ModuleLoad refusing with the reason.
func (d *device) readProps() hip.Props {
	attr := func(a int) int {
		var v int32
		if gpulib.Call(d.api.deviceGetAttribute, uintptr(unsafe.Pointer(&v)), uintptr(a), uintptr(d.ordinal)) != 0 {
			return 0
		}
		return int(v)
	}
	// uint64 words keep the buffer aligned for the struct's size_t fields.
	words := make([]uint64, propsBufferSize/8)
	buf := unsafe.Slice((*byte)(unsafe.Pointer(&words[0])), propsBufferSize)
	if st := gpulib.Call(d.api.getDeviceProperties, uintptr(unsafe.Pointer(&words[0])), uintptr(d.ordinal)); st != 0 {
		d.archErr = d.st.Err("GetDeviceProperties", st)
	} else if d.gcnArch = archFromProps(buf); d.gcnArch == "" {
		d.archErr = errors.New("hipGetDevicePropertiesR0600 gave no gcnArchName of the form gfxNNN")
	}
	var arch string
	if d.archErr == nil {
		arch, d.archErr = baseArch(d.gcnArch)
	}

	name := make([]byte, 256)
	if gpulib.Call(d.api.deviceGetName, uintptr(unsafe.Pointer(&name[0])), uintptr(len(name)), uintptr(d.ordinal)) != 0 {
		name[0] = 0
	}
	n := cString(name)
	if n == "" {
		n = cString(buf[:256]) // hipDeviceProp_t.name
	}
	var total uintptr
	if gpulib.Call(d.api.deviceMem, uintptr(unsafe.Pointer(&total)), uintptr(d.ordinal)) != 0 {
		total = 0
	}
	return hip.Props{
		Backend:        backendName,
		Ordinal:        d.ordinal,
		Name:           n,
		Arch:           arch,
		ComputeUnits:   attr(attrMultiprocessors),
		WarpSize:       attr(attrWarpSize),
		ClockKHz:       attr(attrClockRate),
		TotalMemory:    uint64(total),
		RuntimeVersion: d.rt.runtimeVersion,
		DriverVersion:  d.rt.driverVersion,
	}
}

func (d *device) Props() hip.Props         { return d.props }
func (d *device) Dialect() hip.Dialect     { return hip.DialectHIP }
func (d *device) Libraries() []hip.Library { return []hip.Library{d.rt.lib, d.rtc.Lib} }

// enter pins the goroutine to its OS thread and selects the device there;
// leave undoes the pin. Selecting on every call is right on a thread that
// never called in and on one another device moved, and cheap: in ROCm's
// runtime hipSetDevice is a bounds check and a thread-local store, with no
// capture check, and the purego call adds 0.1-0.2 µs here
// (BenchmarkMockSetDevice) to the microseconds of a kernel launch.
func (d *device) enter(op string) error {
	if d.closed.Load() {
		return d.st.Errorf(op, hip.ErrDeinitialized, "the device is closed")
	}
	runtime.LockOSThread()
	if st := gpulib.Call(d.api.setDevice, uintptr(d.ordinal)); st != 0 {
		runtime.UnlockOSThread()
		return d.st.Err(op, st)
	}
	return nil
}

func leave() { runtime.UnlockOSThread() }

// call runs one runtime function under enter/leave and maps its status.
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

// Malloc passes a zero size to hipMalloc, whose capture check comes first
// (a refusal during capture must show), and turns the null pointer HIP
// returns for it into the invalid-value error the other backends give.
func (d *device) Malloc(bytes int) (hip.DevPtr, error) {
	if bytes < 0 {
		return 0, d.invalid("Malloc", "size %d is negative", bytes)
	}
	var p uintptr
	if err := d.call("Malloc", d.api.malloc, uintptr(unsafe.Pointer(&p)), uintptr(bytes)); err != nil {
		return 0, err
	}
	if p == 0 {
		return 0, d.invalid("Malloc", "size %d: hipMalloc returned no allocation", bytes)
	}
	return hip.DevPtr(p), nil
}

func (d *device) Free(p hip.DevPtr) error {
	return d.call("Free", d.api.free, uintptr(p))
}

func (d *device) Memset(p hip.DevPtr, value byte, bytes int) error {
	if bytes < 0 {
		return d.invalid("Memset", "size %d is negative", bytes)
	}
	return d.call("Memset", d.api.memset, uintptr(p), uintptr(value), uintptr(bytes))
}

func (d *device) MemsetAsync(p hip.DevPtr, value byte, bytes int, s hip.Stream) error {
	if bytes < 0 {
		return d.invalid("MemsetAsync", "size %d is negative", bytes)
	}
	return d.call("MemsetAsync", d.api.memsetAsync, uintptr(p), uintptr(value), uintptr(bytes), uintptr(s))
}

// The copies of zero bytes do nothing and succeed without a runtime call.

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

// ModuleLoad compiles src.Text with hiprtc for the device's architecture
// (cached for the process) and loads the code object.
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
			he.Detail = fmt.Sprintf("loading kernel source %q built for %s", src.Name, d.props.Arch)
		}
		return 0, err
	}
	return hip.Module(m), nil
}

// moduleImage is hiprtc's code object for src on this device.
func (d *device) moduleImage(src *hip.KernelSource) ([]byte, error) {
	if strings.TrimSpace(src.Text) == "" {
		return nil, d.invalid("ModuleLoad", "kernel source %q has no text to compile", src.Name)
	}
	if !d.rtc.Available() {
		return nil, d.st.Errorf("ModuleLoad", hip.ErrNotSupported,
			fmt.Sprintf("kernel source %q cannot be built: hiprtc is unavailable (%v)", src.Name, d.rtc.Err))
	}
	if d.archErr != nil {
		return nil, d.st.Errorf("ModuleLoad", hip.ErrNotSupported,
			fmt.Sprintf("kernel source %q cannot be built: the device's architecture is unknown (%v)", src.Name, d.archErr))
	}
	code, err := d.rtc.compile(src, d.props.Arch)
	var ce *gpulib.CompileError
	switch {
	case err == nil:
		return code, nil
	case errors.As(err, &ce) && ce.Status == hiprtcErrorCompilation:
		return nil, d.st.Errorf("ModuleLoad", hip.ErrInvalidSource, err.Error())
	}
	// The compiler itself failed (an option it refuses, an internal error):
	// not the source's fault.
	return nil, d.st.Errorf("ModuleLoad", hip.ErrNotSupported,
		fmt.Sprintf("kernel source %q cannot be built for %s: %v", src.Name, d.props.Arch, err))
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
// ticket. ROCr runs it on its async-events thread, a C thread the Go
// runtime did not create. On a capturing stream the ticket repeats (every
// replay of the graph fires it) and lives until the last graph holding it
// is destroyed.
func (d *device) LaunchHostFunc(s hip.Stream, fn func()) error {
	if fn == nil {
		return d.invalid("LaunchHostFunc", "host function is nil")
	}
	if err := d.enter("LaunchHostFunc"); err != nil {
		return err
	}
	defer leave()
	status, id := d.captureInfo(s)
	st := d.captures.EnqueueHostFunc(fn, status, id, func(tramp, data uintptr) int32 {
		return gpulib.Call(d.api.launchHostFunc, uintptr(s), tramp, data)
	})
	return d.st.Err("LaunchHostFunc", st)
}

// captureInfo is s's capture state and capture id, read on the current
// thread (already entered). A failed query reads as not capturing.
func (d *device) captureInfo(s hip.Stream) (hip.CaptureStatus, uint64) {
	var info struct {
		status int32
		id     uint64
	}
	if gpulib.Call(d.api.streamGetCaptureInfo, uintptr(s), uintptr(unsafe.Pointer(&info.status)),
		uintptr(unsafe.Pointer(&info.id))) != 0 {
		return hip.CaptureStatusNone, 0
	}
	return hip.CaptureStatus(info.status), info.id
}

// Capture and graphs.

func (d *device) StreamBeginCapture(s hip.Stream, mode hip.CaptureMode) error {
	if err := d.st.CheckCaptureMode("StreamBeginCapture", mode); err != nil {
		return err
	}
	return d.call("StreamBeginCapture", d.api.streamBeginCapture, uintptr(s), uintptr(mode))
}

// StreamEndCapture ends a capture. On failure the graph is zero and the
// host functions the capture recorded are forgotten, unless the capture
// goes on: HIP answers a non-relaxed capture ended from another thread
// with 908 and leaves it active for its own thread to end. Older HIP
// (before ROCm PR 6509) leaves an invalidated stream invalidated after
// this call; the stream is then best destroyed.
func (d *device) StreamEndCapture(s hip.Stream) (hip.Graph, error) {
	if err := d.enter("StreamEndCapture"); err != nil {
		return 0, err
	}
	defer leave()
	_, id := d.captureInfo(s)
	var g uintptr
	st := gpulib.Call(d.api.streamEndCapture, uintptr(s), uintptr(unsafe.Pointer(&g)))
	if st != 0 {
		if status, still := d.captureInfo(s); status != hip.CaptureStatusActive || still != id {
			d.captures.Ended(id, 0)
		}
		return 0, d.st.Err("StreamEndCapture", st)
	}
	d.captures.Ended(id, g)
	return hip.Graph(g), nil
}

func (d *device) ThreadExchangeCaptureMode(mode hip.CaptureMode) (hip.CaptureMode, error) {
	if d.closed.Load() {
		return 0, d.st.Errorf("ThreadExchangeCaptureMode", hip.ErrDeinitialized, "the device is closed")
	}
	if err := d.st.CheckCaptureMode("ThreadExchangeCaptureMode", mode); err != nil {
		return 0, err
	}
	// Per OS thread and device-free: the caller has locked its thread.
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
	return d.call("DeviceSynchronize", d.api.deviceSynchronize)
}

// Close waits for the device's work and forgets the tickets its graphs
// held. HIP keeps no per-handle context to release. Later calls fail; a
// second Close does nothing.
func (d *device) Close() error {
	if d.closed.Swap(true) {
		return nil
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var err error
	if st := gpulib.Call(d.api.setDevice, uintptr(d.ordinal)); st != 0 {
		err = d.st.Err("SetDevice", st)
	} else if st := gpulib.Call(d.api.deviceSynchronize); st != 0 {
		err = d.st.Err("DeviceSynchronize", st)
	}
	d.captures.Close()
	return err
}

var _ hip.Device = (*device)(nil)
