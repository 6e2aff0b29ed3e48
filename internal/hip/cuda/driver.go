package cuda

import (
	"fmt"
	"sync"
	"unsafe"

	"miotool/internal/hip"
	"miotool/internal/hip/gpulib"
)

// driverAPI holds the address of every libcuda entry point the backend
// calls. Where cuda.h maps a name to a suffixed symbol (#define cuMemAlloc
// cuMemAlloc_v2), the suffixed one is bound: the plain exports keep old
// argument lists (32-bit pointers, no capture mode, five-argument
// instantiate).
type driverAPI struct {
	init, driverGetVersion, getErrorName                                    uintptr
	deviceGet, deviceGetCount, deviceGetName, deviceGetAttribute, deviceMem uintptr
	primaryCtxRetain, primaryCtxRelease                                     uintptr
	ctxSetCurrent, ctxGetCurrent, ctxSynchronize                            uintptr

	memAlloc, memFree, memsetD8, memsetD8Async                                uintptr
	memcpyHtoD, memcpyDtoH, memcpyHtoDAsync, memcpyDtoHAsync, memcpyDtoDAsync uintptr

	streamCreate, streamDestroy, streamQuery, streamSynchronize, streamWaitEvent           uintptr
	streamIsCapturing, streamGetCaptureInfo                                                uintptr
	eventCreate, eventRecord, eventQuery, eventSynchronize, eventElapsedTime, eventDestroy uintptr

	moduleLoadData, moduleGetFunction, moduleUnload, launchKernel, launchHostFunc uintptr

	streamBeginCapture, streamEndCapture, threadExchangeCaptureMode uintptr
	graphInstantiate, graphLaunch, graphExecDestroy, graphDestroy   uintptr
}

// symbols is the binding table of a.
func (a *driverAPI) symbols() []gpulib.Symbol {
	return []gpulib.Symbol{
		{Name: "cuInit", Addr: &a.init},
		{Name: "cuDriverGetVersion", Addr: &a.driverGetVersion},
		{Name: "cuGetErrorName", Addr: &a.getErrorName},
		{Name: "cuDeviceGet", Addr: &a.deviceGet},
		{Name: "cuDeviceGetCount", Addr: &a.deviceGetCount},
		{Name: "cuDeviceGetName", Addr: &a.deviceGetName},
		{Name: "cuDeviceGetAttribute", Addr: &a.deviceGetAttribute},
		{Name: "cuDeviceTotalMem_v2", Addr: &a.deviceMem},
		{Name: "cuDevicePrimaryCtxRetain", Addr: &a.primaryCtxRetain},
		{Name: "cuDevicePrimaryCtxRelease_v2", Addr: &a.primaryCtxRelease},
		{Name: "cuCtxSetCurrent", Addr: &a.ctxSetCurrent},
		{Name: "cuCtxGetCurrent", Addr: &a.ctxGetCurrent},
		{Name: "cuCtxSynchronize", Addr: &a.ctxSynchronize},

		{Name: "cuMemAlloc_v2", Addr: &a.memAlloc},
		{Name: "cuMemFree_v2", Addr: &a.memFree},
		{Name: "cuMemsetD8_v2", Addr: &a.memsetD8},
		{Name: "cuMemsetD8Async", Addr: &a.memsetD8Async},
		{Name: "cuMemcpyHtoD_v2", Addr: &a.memcpyHtoD},
		{Name: "cuMemcpyDtoH_v2", Addr: &a.memcpyDtoH},
		{Name: "cuMemcpyHtoDAsync_v2", Addr: &a.memcpyHtoDAsync},
		{Name: "cuMemcpyDtoHAsync_v2", Addr: &a.memcpyDtoHAsync},
		{Name: "cuMemcpyDtoDAsync_v2", Addr: &a.memcpyDtoDAsync},

		{Name: "cuStreamCreate", Addr: &a.streamCreate},
		{Name: "cuStreamDestroy_v2", Addr: &a.streamDestroy},
		{Name: "cuStreamQuery", Addr: &a.streamQuery},
		{Name: "cuStreamSynchronize", Addr: &a.streamSynchronize},
		{Name: "cuStreamWaitEvent", Addr: &a.streamWaitEvent},
		{Name: "cuStreamIsCapturing", Addr: &a.streamIsCapturing},
		// Called with every output after the id NULL, so the _v2 form (one
		// argument fewer than _v3) reads the same call correctly.
		{Name: "cuStreamGetCaptureInfo_v3", Alternatives: []string{"cuStreamGetCaptureInfo_v2"}, Addr: &a.streamGetCaptureInfo},

		{Name: "cuEventCreate", Addr: &a.eventCreate},
		{Name: "cuEventRecord", Addr: &a.eventRecord},
		{Name: "cuEventQuery", Addr: &a.eventQuery},
		{Name: "cuEventSynchronize", Addr: &a.eventSynchronize},
		// Same signature; _v2 is missing from drivers before 12.8.
		{Name: "cuEventElapsedTime_v2", Alternatives: []string{"cuEventElapsedTime"}, Addr: &a.eventElapsedTime},
		{Name: "cuEventDestroy_v2", Addr: &a.eventDestroy},

		{Name: "cuModuleLoadData", Addr: &a.moduleLoadData},
		{Name: "cuModuleGetFunction", Addr: &a.moduleGetFunction},
		{Name: "cuModuleUnload", Addr: &a.moduleUnload},
		{Name: "cuLaunchKernel", Addr: &a.launchKernel},
		{Name: "cuLaunchHostFunc", Addr: &a.launchHostFunc},

		{Name: "cuStreamBeginCapture_v2", Addr: &a.streamBeginCapture},
		{Name: "cuStreamEndCapture", Addr: &a.streamEndCapture},
		{Name: "cuThreadExchangeStreamCaptureMode", Addr: &a.threadExchangeCaptureMode},
		{Name: "cuGraphInstantiateWithFlags", Addr: &a.graphInstantiate},
		{Name: "cuGraphLaunch", Addr: &a.graphLaunch},
		{Name: "cuGraphExecDestroy", Addr: &a.graphExecDestroy},
		{Name: "cuGraphDestroy", Addr: &a.graphDestroy},
	}
}

// Device attributes read for Props (CUdevice_attribute).
const (
	attrWarpSize        = 10
	attrClockRate       = 13
	attrMultiprocessors = 16
	attrCCMajor         = 75
	attrCCMinor         = 76
)

// driverLib is libcuda loaded, bound and initialised.
type driverLib struct {
	api     driverAPI
	lib     hip.Library
	version string // "13.0"
	status  gpulib.StatusMapper
}

// Directories where a driver may sit off the loader's path: the NVIDIA
// container runtime's mount point and WSL2's driver store.
var driverDirs = []string{"/usr/local/nvidia/lib64", "/usr/lib/wsl/lib"}

// driverSearch finds libcuda.so.1 only: the bare libcuda.so may be the
// toolkit's stub, whose every call returns CUDA_ERROR_STUB_LIBRARY.
func driverSearch() gpulib.SearchSpec {
	return gpulib.SearchSpec{Name: "libcuda", Sonames: []string{"libcuda.so.1"}, Dirs: driverDirs}
}

var defaultDriver = sync.OnceValues(func() (*driverLib, error) { return loadDriver(driverSearch()) })

// loadDriver opens, binds and initialises libcuda. Every failure is a
// *hip.UnavailableError naming what failed and listing the paths tried.
func loadDriver(spec gpulib.SearchSpec) (*driverLib, error) {
	h, lib, err := gpulib.Open(spec)
	if err != nil {
		return nil, unavailable(err.Error(), lib)
	}
	d := &driverLib{lib: lib}
	if err := gpulib.Bind(gpulib.Lookup(h), lib.Loaded, d.api.symbols()); err != nil {
		return nil, unavailable(err.Error()+" (the driver is too old or not NVIDIA's)", lib)
	}
	d.status = gpulib.StatusMapper{Dialect: hip.DialectCUDA, ErrorName: d.errorName}
	if st := gpulib.Call(d.api.init, 0); st != 0 {
		return nil, unavailable(fmt.Sprintf("%v (library %s)", d.status.Err("Init", st), lib.Loaded), lib)
	}
	var v int32
	if st := gpulib.Call(d.api.driverGetVersion, uintptr(unsafe.Pointer(&v))); st == 0 {
		d.version = formatCUDAVersion(v)
	}
	d.lib.Version = d.version
	return d, nil
}

// errorName asks the driver for a code's name (CUDA_ERROR_STUB_LIBRARY).
func (d *driverLib) errorName(code int32) string {
	var p uintptr
	if gpulib.Call(d.api.getErrorName, uintptr(code), uintptr(unsafe.Pointer(&p))) != 0 {
		return ""
	}
	return gpulib.GoString(p)
}

// formatCUDAVersion turns 13000 into "13.0" and 12080 into "12.8".
func formatCUDAVersion(v int32) string {
	return fmt.Sprintf("%d.%d", v/1000, v%1000/10)
}

func unavailable(reason string, libs ...hip.Library) error {
	return &hip.UnavailableError{Backend: backendName, Reason: reason, Libraries: libs}
}
