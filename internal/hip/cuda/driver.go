package cuda

import (
	"fmt"
	"sync"
	"unsafe"

	"miotool/internal/dl"
	"miotool/internal/hip"
	"miotool/internal/hip/gpulib"
)

// driverAPI holds the libcuda entry points only this backend calls; the
// ones the device core calls are in driverLib.Funcs.
type driverAPI struct {
	driverGetVersion, getErrorName, deviceGet uintptr
	primaryCtxRetain, primaryCtxRelease       uintptr
	ctxGetCurrent                             uintptr
}

// symbols is the binding table of l. Where cuda.h maps a name to a
// suffixed symbol (#define cuMemAlloc cuMemAlloc_v2), the suffixed one is
// bound: the plain exports keep old argument lists (32-bit pointers, no
// capture mode, five-argument instantiate).
func (l *driverLib) symbols() []dl.Symbol {
	a, f := &l.api, &l.Funcs
	return []dl.Symbol{
		{Name: "cuInit", Addr: &f.Init},
		{Name: "cuDriverGetVersion", Addr: &a.driverGetVersion},
		{Name: "cuGetErrorName", Addr: &a.getErrorName},
		{Name: "cuDeviceGet", Addr: &a.deviceGet},
		{Name: "cuDeviceGetCount", Addr: &f.DeviceGetCount},
		{Name: "cuDeviceGetName", Addr: &f.DeviceGetName},
		{Name: "cuDeviceGetAttribute", Addr: &f.DeviceGetAttribute},
		{Name: "cuDeviceTotalMem_v2", Addr: &f.DeviceTotalMem},
		{Name: "cuDevicePrimaryCtxRetain", Addr: &a.primaryCtxRetain},
		{Name: "cuDevicePrimaryCtxRelease_v2", Addr: &a.primaryCtxRelease},
		{Name: "cuCtxSetCurrent", Addr: &f.Select},
		{Name: "cuCtxGetCurrent", Addr: &a.ctxGetCurrent},
		{Name: "cuCtxSynchronize", Addr: &f.DeviceSynchronize},

		{Name: "cuMemAlloc_v2", Addr: &f.Malloc},
		{Name: "cuMemFree_v2", Addr: &f.Free},
		{Name: "cuMemHostAlloc", Addr: &f.HostAlloc},
		{Name: "cuMemFreeHost", Addr: &f.HostFree},
		{Name: "cuMemHostRegister_v2", Addr: &f.HostRegister},
		{Name: "cuMemHostUnregister", Addr: &f.HostUnregister},
		{Name: "cuMemsetD8_v2", Addr: &f.Memset},
		{Name: "cuMemsetD8Async", Addr: &f.MemsetAsync},
		{Name: "cuMemcpyHtoD_v2", Addr: &f.MemcpyHtoD},
		{Name: "cuMemcpyDtoH_v2", Addr: &f.MemcpyDtoH},
		{Name: "cuMemcpyHtoDAsync_v2", Addr: &f.MemcpyHtoDAsync},
		{Name: "cuMemcpyDtoHAsync_v2", Addr: &f.MemcpyDtoHAsync},
		{Name: "cuMemcpyDtoDAsync_v2", Addr: &f.MemcpyDtoDAsync},

		{Name: "cuStreamCreate", Addr: &f.StreamCreate},
		{Name: "cuStreamDestroy_v2", Addr: &f.StreamDestroy},
		{Name: "cuStreamQuery", Addr: &f.StreamQuery},
		{Name: "cuStreamSynchronize", Addr: &f.StreamSynchronize},
		{Name: "cuStreamWaitEvent", Addr: &f.StreamWaitEvent},
		{Name: "cuStreamIsCapturing", Addr: &f.StreamIsCapturing},
		// Called with every output after the id NULL, so the _v2 form (one
		// argument fewer than _v3) reads the same call correctly.
		{Name: "cuStreamGetCaptureInfo_v3", Alternatives: []string{"cuStreamGetCaptureInfo_v2"}, Addr: &f.StreamGetCaptureInfo},

		{Name: "cuEventCreate", Addr: &f.EventCreate},
		{Name: "cuEventRecord", Addr: &f.EventRecord},
		{Name: "cuEventQuery", Addr: &f.EventQuery},
		{Name: "cuEventSynchronize", Addr: &f.EventSynchronize},
		// Same signature; _v2 is missing from drivers before 12.8.
		{Name: "cuEventElapsedTime_v2", Alternatives: []string{"cuEventElapsedTime"}, Addr: &f.EventElapsedTime},
		{Name: "cuEventDestroy_v2", Addr: &f.EventDestroy},

		{Name: "cuModuleLoadData", Addr: &f.ModuleLoadData},
		{Name: "cuModuleGetFunction", Addr: &f.ModuleGetFunction},
		{Name: "cuModuleUnload", Addr: &f.ModuleUnload},
		{Name: "cuLaunchKernel", Addr: &f.LaunchKernel},
		{Name: "cuLaunchHostFunc", Addr: &f.LaunchHostFunc},

		{Name: "cuStreamBeginCapture_v2", Addr: &f.StreamBeginCapture},
		{Name: "cuStreamEndCapture", Addr: &f.StreamEndCapture},
		{Name: "cuThreadExchangeStreamCaptureMode", Addr: &f.ThreadExchangeCaptureMode},
		{Name: "cuGraphInstantiateWithFlags", Addr: &f.GraphInstantiate},
		{Name: "cuGraphLaunch", Addr: &f.GraphLaunch},
		{Name: "cuGraphExecDestroy", Addr: &f.GraphExecDestroy},
		{Name: "cuGraphDestroy", Addr: &f.GraphDestroy},

		{Name: "cuMemHostGetDevicePointer_v2", Addr: &l.HostMapped.GetDevicePointer, Optional: true},
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
	gpulib.Runtime
	api driverAPI
}

// Directories where a driver may sit off the loader's path: the NVIDIA
// container runtime's mount point and WSL2's driver store.
var driverDirs = []string{"/usr/local/nvidia/lib64", "/usr/lib/wsl/lib"}

// driverSearch finds libcuda.so.1 only: the bare libcuda.so may be the
// toolkit's stub, whose every call returns CUDA_ERROR_STUB_LIBRARY.
func driverSearch() dl.SearchSpec {
	return dl.SearchSpec{Name: "libcuda", Sonames: []string{"libcuda.so.1"}, Dirs: driverDirs}
}

var defaultDriver = sync.OnceValues(func() (*driverLib, error) { return loadDriver(driverSearch()) })

// loadDriver opens, binds and initialises libcuda. Every failure is a
// *hip.UnavailableError naming what failed and listing the paths tried.
func loadDriver(spec dl.SearchSpec) (*driverLib, error) {
	d := &driverLib{Runtime: gpulib.Runtime{
		Backend:                 backendName,
		Vendor:                  "CUDA",
		SelectOp:                "CtxSetCurrent",
		ClosedCode:              hip.ErrInvalidContext,
		CaptureInfoGraphOutputs: true,
		Attributes:              gpulib.Attributes{ComputeUnits: attrMultiprocessors, WarpSize: attrWarpSize, ClockKHz: attrClockRate},
		RuntimeVersion:          "driver API",
	}}
	// CU_MEMHOSTALLOC_PORTABLE | CU_MEMHOSTALLOC_DEVICEMAP
	d.HostMapped.AllocFlags = 0x01 | 0x02
	d.Status = gpulib.StatusMapper{Dialect: hip.DialectCUDA, ErrorName: d.errorName}
	if err := d.Load(spec, d.symbols(), "the driver is too old or not NVIDIA's"); err != nil {
		return nil, err
	}
	var v int32
	if st := dl.Call(d.api.driverGetVersion, uintptr(unsafe.Pointer(&v))); st == 0 {
		d.DriverVersion = formatCUDAVersion(v)
	}
	d.Lib.Version = d.DriverVersion
	return d, nil
}

// errorName asks the driver for a code's name (CUDA_ERROR_STUB_LIBRARY).
func (d *driverLib) errorName(code int32) string {
	var p uintptr
	if dl.Call(d.api.getErrorName, uintptr(code), uintptr(unsafe.Pointer(&p))) != 0 {
		return ""
	}
	return dl.GoString(p)
}

// formatCUDAVersion turns 13000 into "13.0" and 12080 into "12.8".
func formatCUDAVersion(v int32) string {
	return fmt.Sprintf("%d.%d", v/1000, v%1000/10)
}
