package gpulib

import (
	"fmt"
	"unsafe"

	"miotool/internal/dl"
	"miotool/internal/hip"
)

// RuntimeFuncs are the runtime entry points the shared code calls. CUDA's
// driver API and HIP take the same arguments for each (the C argument lists
// are given below in HIP's spelling); only the exported names differ, and
// the vendor's binding table says which export fills which field.
//
//	Init(flags)                       DeviceGetCount(int*)
//	DeviceGetName(char*, len, dev)    DeviceGetAttribute(int*, attr, dev)
//	DeviceTotalMem(size_t*, dev)      DeviceSynchronize()
//	Select(x): makes the device current on the calling thread
//	           (cuCtxSetCurrent(ctx), hipSetDevice(ordinal))
//	Malloc(ptr*, bytes)               Free(ptr)
//	HostAlloc(ptr*, bytes, flags)     HostFree(ptr)
//	HostRegister(ptr, bytes, flags)   HostUnregister(ptr)
//	Memset(ptr, value, bytes)         MemsetAsync(ptr, value, bytes, stream)
//	MemcpyHtoD(dst, src, bytes)       MemcpyDtoH(dst, src, bytes)
//	Memcpy*Async(dst, src, bytes, stream)
//	StreamCreate(stream*, flags)      StreamWaitEvent(stream, event, flags)
//	StreamIsCapturing(stream, status*)
//	StreamGetCaptureInfo(stream, status*, id*[, graph*, deps*, edges*, n*])
//	EventCreate(event*, flags)        EventRecord(event, stream)
//	EventElapsedTime(float*, start, stop)
//	ModuleLoadData(module*, image)    ModuleGetFunction(func*, module, name)
//	LaunchKernel(func, gx, gy, gz, bx, by, bz, shared, stream, params, extra)
//	LaunchHostFunc(stream, fn, userData)
//	StreamBeginCapture(stream, mode)  StreamEndCapture(stream, graph*)
//	ThreadExchangeCaptureMode(mode*)  GraphInstantiate(exec*, graph, flags)
//	GraphLaunch(exec, stream)
//
// The rest take the one handle they name.
type RuntimeFuncs struct {
	Init, DeviceGetCount, DeviceGetName, DeviceGetAttribute, DeviceTotalMem uintptr
	Select, DeviceSynchronize                                               uintptr

	Malloc, Free, Memset, MemsetAsync                                         uintptr
	HostAlloc, HostFree, HostRegister, HostUnregister                         uintptr
	MemcpyHtoD, MemcpyDtoH, MemcpyHtoDAsync, MemcpyDtoHAsync, MemcpyDtoDAsync uintptr

	StreamCreate, StreamDestroy, StreamQuery, StreamSynchronize, StreamWaitEvent           uintptr
	StreamIsCapturing, StreamGetCaptureInfo                                                uintptr
	EventCreate, EventRecord, EventQuery, EventSynchronize, EventElapsedTime, EventDestroy uintptr

	ModuleLoadData, ModuleGetFunction, ModuleUnload, LaunchKernel, LaunchHostFunc uintptr

	StreamBeginCapture, StreamEndCapture, ThreadExchangeCaptureMode uintptr
	GraphInstantiate, GraphLaunch, GraphExecDestroy, GraphDestroy   uintptr
}

// HostMappedFuncs are what host-mapped memory, which benchmarks use, needs
// beyond RuntimeFuncs.HostAlloc and HostFree (zero where a backend does not
// bind it):
//
//	GetDevicePointer(dptr*, ptr, 0)
type HostMappedFuncs struct {
	GetDevicePointer uintptr
	// AllocFlags asks HostAlloc for mapped, portable memory.
	AllocFlags uintptr
}

// Attributes are a vendor's device-attribute numbers (CUdevice_attribute,
// hipDeviceAttribute_t) for the Props fields read by attribute.
type Attributes struct {
	ComputeUnits, WarpSize, ClockKHz int
}

// Runtime is one vendor's runtime library, loaded and bound, with the few
// things that set it apart from the other vendor's as data. Device runs the
// same code on top of either.
type Runtime struct {
	Backend string // "cuda", "hip": Props.Backend and the backend of its errors
	Vendor  string // "CUDA", "HIP": in messages such as "no HIP device is present"
	Lib     hip.Library
	Funcs   RuntimeFuncs
	// HostMapped is bound where the backend offers host-mapped memory.
	HostMapped HostMappedFuncs
	Status     StatusMapper
	// SelectOp names a failing Funcs.Select where no Device method is the
	// operation (Close): "CtxSetCurrent", "SetDevice".
	SelectOp string
	// ClosedCode is what calls on a closed device fail with: CUDA's
	// released context reads as ErrInvalidContext, HIP's as ErrDeinitialized.
	ClosedCode hip.Code
	// CaptureInfoGraphOutputs says that the capture-info call takes graph,
	// dependency, edge and count outputs after the id
	// (cuStreamGetCaptureInfo_v3); they are passed as NULL.
	CaptureInfoGraphOutputs bool
	Attributes              Attributes
	// The versions Props reports.
	RuntimeVersion, DriverVersion string
}

// Unavailable is the *hip.UnavailableError of this runtime's backend.
func (r *Runtime) Unavailable(reason string, libs ...hip.Library) error {
	return &hip.UnavailableError{Backend: r.Backend, Reason: reason, Libraries: libs}
}

// Load opens the library spec finds, binds table in it and initialises it
// (Funcs.Init(0)); r.Lib records every path tried. Status must be set
// first: it names a failing init. Every failure is a *hip.UnavailableError;
// hint follows a missing symbol's message, to say what the library that
// lacks it probably is.
func (r *Runtime) Load(spec dl.SearchSpec, table []dl.Symbol, hint string) error {
	h, lib, err := dl.Open(spec)
	r.Lib = lib
	if err != nil {
		return r.Unavailable(err.Error(), lib)
	}
	if err := dl.Bind(dl.Lookup(h), lib.Loaded, table); err != nil {
		return r.Unavailable(fmt.Sprintf("%v (%s)", err, hint), lib)
	}
	if st := dl.Call(r.Funcs.Init, 0); st != 0 {
		return r.Unavailable(fmt.Sprintf("%v (library %s)", r.Status.Err("Init", st), lib.Loaded), lib)
	}
	return nil
}

// CheckOrdinal refuses an ordinal outside the devices the runtime counts,
// with a *hip.UnavailableError that carries libs.
func (r *Runtime) CheckOrdinal(ordinal int, libs ...hip.Library) error {
	var count int32
	if st := dl.Call(r.Funcs.DeviceGetCount, uintptr(unsafe.Pointer(&count))); st != 0 {
		return r.Unavailable(r.Status.Err("DeviceGetCount", st).Error(), libs...)
	}
	if count == 0 {
		return r.Unavailable(fmt.Sprintf("no %s device is present", r.Vendor), libs...)
	}
	if ordinal < 0 || ordinal >= int(count) {
		return r.Unavailable(fmt.Sprintf("device ordinal %d is out of range: %d %s device(s) present", ordinal, count, r.Vendor), libs...)
	}
	return nil
}

// Attribute reads one attribute of device dev (a CUdevice, a HIP
// ordinal); an attribute the runtime will not give reads as zero.
func (r *Runtime) Attribute(attr int, dev uintptr) int {
	var v int32
	if dl.Call(r.Funcs.DeviceGetAttribute, uintptr(unsafe.Pointer(&v)), uintptr(attr), dev) != 0 {
		return 0
	}
	return int(v)
}

// ReadProps fills every Props field but Arch, which each vendor finds its
// own way. A property the runtime will not give reads as zero or empty.
func (r *Runtime) ReadProps(dev uintptr, ordinal int) hip.Props {
	name := make([]byte, 256)
	if dl.Call(r.Funcs.DeviceGetName, uintptr(unsafe.Pointer(&name[0])), uintptr(len(name)), dev) != 0 {
		name[0] = 0
	}
	var total uintptr
	if dl.Call(r.Funcs.DeviceTotalMem, uintptr(unsafe.Pointer(&total)), dev) != 0 {
		total = 0
	}
	return hip.Props{
		Backend:        r.Backend,
		Ordinal:        ordinal,
		Name:           dl.GoStringBytes(name),
		ComputeUnits:   r.Attribute(r.Attributes.ComputeUnits, dev),
		WarpSize:       r.Attribute(r.Attributes.WarpSize, dev),
		ClockKHz:       r.Attribute(r.Attributes.ClockKHz, dev),
		TotalMemory:    uint64(total),
		RuntimeVersion: r.RuntimeVersion,
		DriverVersion:  r.DriverVersion,
	}
}
