package amd

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"sync"
	"unsafe"

	"miotool/internal/hip"
	"miotool/internal/hip/gpulib"
)

// runtimeAPI holds the address of every libamdhip64 entry point the backend
// calls. HIP exports plain names, with two traps: hipGetDeviceProperties is
// #defined to hipGetDevicePropertiesR0600 (the plain export keeps the
// pre-6.0 struct), and hipGraphInstantiate keeps CUDA's old five-argument
// form, so the flags form is bound instead.
type runtimeAPI struct {
	init, driverGetVersion, runtimeGetVersion, getErrorName                 uintptr
	getDeviceCount, setDevice, deviceGetName, deviceGetAttribute, deviceMem uintptr
	getDeviceProperties, deviceSynchronize                                  uintptr

	malloc, free, memset, memsetAsync                                         uintptr
	memcpyHtoD, memcpyDtoH, memcpyHtoDAsync, memcpyDtoHAsync, memcpyDtoDAsync uintptr

	streamCreate, streamDestroy, streamQuery, streamSynchronize, streamWaitEvent           uintptr
	streamIsCapturing, streamGetCaptureInfo                                                uintptr
	eventCreate, eventRecord, eventQuery, eventSynchronize, eventElapsedTime, eventDestroy uintptr

	moduleLoadData, moduleGetFunction, moduleUnload, launchKernel, launchHostFunc uintptr

	streamBeginCapture, streamEndCapture, threadExchangeCaptureMode uintptr
	graphInstantiate, graphLaunch, graphExecDestroy, graphDestroy   uintptr
}

// symbols is the binding table of a.
func (a *runtimeAPI) symbols() []gpulib.Symbol {
	return []gpulib.Symbol{
		{Name: "hipInit", Addr: &a.init},
		{Name: "hipDriverGetVersion", Addr: &a.driverGetVersion},
		{Name: "hipRuntimeGetVersion", Addr: &a.runtimeGetVersion},
		{Name: "hipGetErrorName", Addr: &a.getErrorName},
		{Name: "hipGetDeviceCount", Addr: &a.getDeviceCount},
		{Name: "hipSetDevice", Addr: &a.setDevice},
		{Name: "hipDeviceGetName", Addr: &a.deviceGetName},
		{Name: "hipDeviceGetAttribute", Addr: &a.deviceGetAttribute},
		{Name: "hipDeviceTotalMem", Addr: &a.deviceMem},
		{Name: "hipGetDevicePropertiesR0600", Addr: &a.getDeviceProperties},
		{Name: "hipDeviceSynchronize", Addr: &a.deviceSynchronize},

		{Name: "hipMalloc", Addr: &a.malloc},
		{Name: "hipFree", Addr: &a.free},
		{Name: "hipMemset", Addr: &a.memset},
		{Name: "hipMemsetAsync", Addr: &a.memsetAsync},
		{Name: "hipMemcpyHtoD", Addr: &a.memcpyHtoD},
		{Name: "hipMemcpyDtoH", Addr: &a.memcpyDtoH},
		{Name: "hipMemcpyHtoDAsync", Addr: &a.memcpyHtoDAsync},
		{Name: "hipMemcpyDtoHAsync", Addr: &a.memcpyDtoHAsync},
		{Name: "hipMemcpyDtoDAsync", Addr: &a.memcpyDtoDAsync},

		{Name: "hipStreamCreateWithFlags", Addr: &a.streamCreate},
		{Name: "hipStreamDestroy", Addr: &a.streamDestroy},
		{Name: "hipStreamQuery", Addr: &a.streamQuery},
		{Name: "hipStreamSynchronize", Addr: &a.streamSynchronize},
		{Name: "hipStreamWaitEvent", Addr: &a.streamWaitEvent},
		{Name: "hipStreamIsCapturing", Addr: &a.streamIsCapturing},
		{Name: "hipStreamGetCaptureInfo", Addr: &a.streamGetCaptureInfo},

		{Name: "hipEventCreateWithFlags", Addr: &a.eventCreate},
		{Name: "hipEventRecord", Addr: &a.eventRecord},
		{Name: "hipEventQuery", Addr: &a.eventQuery},
		{Name: "hipEventSynchronize", Addr: &a.eventSynchronize},
		{Name: "hipEventElapsedTime", Addr: &a.eventElapsedTime},
		{Name: "hipEventDestroy", Addr: &a.eventDestroy},

		{Name: "hipModuleLoadData", Addr: &a.moduleLoadData},
		{Name: "hipModuleGetFunction", Addr: &a.moduleGetFunction},
		{Name: "hipModuleUnload", Addr: &a.moduleUnload},
		{Name: "hipModuleLaunchKernel", Addr: &a.launchKernel},
		{Name: "hipLaunchHostFunc", Addr: &a.launchHostFunc},

		{Name: "hipStreamBeginCapture", Addr: &a.streamBeginCapture},
		{Name: "hipStreamEndCapture", Addr: &a.streamEndCapture},
		{Name: "hipThreadExchangeStreamCaptureMode", Addr: &a.threadExchangeCaptureMode},
		{Name: "hipGraphInstantiateWithFlags", Addr: &a.graphInstantiate},
		{Name: "hipGraphLaunch", Addr: &a.graphLaunch},
		{Name: "hipGraphExecDestroy", Addr: &a.graphExecDestroy},
		{Name: "hipGraphDestroy", Addr: &a.graphDestroy},
	}
}

// Device attributes read for Props (hipDeviceAttribute_t; the numbers are
// the same in the HIP 6.x and 7.x headers).
const (
	attrClockRate       = 5
	attrMultiprocessors = 63
	attrWarpSize        = 87
)

// The R0600 hipDeviceProp_t is read only for gcnArchName, the one property
// no attribute gives. Its offset is the C compiler's for the 6.x/7.x
// header's field list (the stand-in library checks it); the buffer is far
// larger than the 1472-byte struct so that a longer future struct cannot
// write past it.
const (
	propsGCNArchNameOffset = 1160
	propsGCNArchNameLen    = 256
	propsStructSize        = 1472
	propsBufferSize        = 4096
)

// runtimeLib is libamdhip64 loaded, bound and initialised.
type runtimeLib struct {
	api            runtimeAPI
	lib            hip.Library
	runtimeVersion string // "7.1.51234"
	driverVersion  string
	status         gpulib.StatusMapper
}

// EnvROCmPath names the ROCm install searched after the loader's path.
const EnvROCmPath = "ROCM_PATH"

// rocmLibDirs are the folders searched after the loader's own search:
// $ROCM_PATH/lib, the default install, then every versioned install,
// newest first.
func rocmLibDirs() []string {
	var dirs []string
	if root := os.Getenv(EnvROCmPath); root != "" {
		dirs = append(dirs, filepath.Join(root, "lib"))
	}
	return append(dirs, "/opt/rocm/lib", "/opt/rocm-*/lib")
}

// runtimeSearch finds HIP 7, then HIP 6. The unversioned libamdhip64.so is
// a development link (and may be HIP 5, whose struct layouts differ), so it
// is not tried.
func runtimeSearch() gpulib.SearchSpec {
	return gpulib.SearchSpec{
		Name:    "libamdhip64",
		Sonames: []string{"libamdhip64.so.7", "libamdhip64.so.6"},
		Dirs:    rocmLibDirs(),
	}
}

var defaultRuntime = sync.OnceValues(func() (*runtimeLib, error) { return loadRuntime(runtimeSearch()) })

// loadRuntime opens, binds and initialises libamdhip64. Every failure is a
// *hip.UnavailableError naming what failed and listing the paths tried.
func loadRuntime(spec gpulib.SearchSpec) (*runtimeLib, error) {
	h, lib, err := gpulib.Open(spec)
	if err != nil {
		return nil, unavailable(err.Error(), lib)
	}
	r := &runtimeLib{lib: lib}
	if err := gpulib.Bind(gpulib.Lookup(h), lib.Loaded, r.api.symbols()); err != nil {
		return nil, unavailable(err.Error()+" (HIP older than 6.0, or not AMD's runtime)", lib)
	}
	r.status = gpulib.StatusMapper{Dialect: hip.DialectHIP, ErrorName: r.errorName}
	if st := gpulib.Call(r.api.init, 0); st != 0 {
		return nil, unavailable(fmt.Sprintf("%v (library %s)", r.status.Err("Init", st), lib.Loaded), lib)
	}
	var v int32
	if gpulib.Call(r.api.runtimeGetVersion, uintptr(unsafe.Pointer(&v))) == 0 {
		r.runtimeVersion = formatHIPVersion(v)
	}
	if gpulib.Call(r.api.driverGetVersion, uintptr(unsafe.Pointer(&v))) == 0 {
		r.driverVersion = formatHIPVersion(v)
	}
	r.lib.Version = r.runtimeVersion
	return r, nil
}

// errorName asks the runtime for a code's name. HIP names every code it
// does not know hipErrorUnknown; that says nothing the number does not, so
// it is dropped.
func (r *runtimeLib) errorName(code int32) string {
	s := gpulib.GoString(gpulib.CallPtr(r.api.getErrorName, uintptr(code)))
	if s == hip.ErrUnknown.Name(hip.DialectHIP) && hip.Code(code) != hip.ErrUnknown {
		return ""
	}
	return s
}

// formatHIPVersion turns HIP_VERSION (major*10000000 + minor*100000 +
// patch, e.g. 60342134) into "6.3.42134"; other numbers print as they are.
func formatHIPVersion(v int32) string {
	if v >= 10000000 {
		return fmt.Sprintf("%d.%d.%d", v/10000000, v/100000%100, v%100000)
	}
	return strconv.Itoa(int(v))
}

// archPattern matches a gcnArchName: gfx942, gfx90a:xnack+,
// gfx942:sramecc+:xnack-.
var archPattern = regexp.MustCompile(`^(gfx[0-9][0-9a-z]{1,4})((:[a-z0-9]+[+-])*)$`)

// baseArch strips the target features from a gcnArchName:
// "gfx942:sramecc+:xnack-" becomes "gfx942", the target a code object
// built for any setting of those features loads on.
func baseArch(gcnArchName string) (string, error) {
	m := archPattern.FindStringSubmatch(gcnArchName)
	if m == nil {
		return "", fmt.Errorf("architecture name %q is not of the form gfxNNN[:feature±...] (e.g. gfx942:sramecc+:xnack-)", gcnArchName)
	}
	return m[1], nil
}

// archFromProps finds gcnArchName in a hipDeviceProp_tR0600 the runtime
// filled: at its offset when a valid name sits there, else the first valid
// NUL-terminated name anywhere in the buffer (a layout that moved the field
// still names the device). It returns "" when there is none.
func archFromProps(buf []byte) string {
	if propsGCNArchNameOffset+propsGCNArchNameLen <= len(buf) {
		if s := cString(buf[propsGCNArchNameOffset : propsGCNArchNameOffset+propsGCNArchNameLen]); archPattern.MatchString(s) {
			return s
		}
	}
	for i := 0; i+3 <= len(buf); i++ {
		if buf[i] != 'g' || (i > 0 && buf[i-1] != 0) {
			continue
		}
		end := min(i+propsGCNArchNameLen, len(buf))
		if s := cString(buf[i:end]); archPattern.MatchString(s) {
			return s
		}
	}
	return ""
}

// cString is b up to its first NUL; b without one yields "".
func cString(b []byte) string {
	for i, c := range b {
		if c == 0 {
			return string(b[:i])
		}
	}
	return ""
}

func unavailable(reason string, libs ...hip.Library) error {
	return &hip.UnavailableError{Backend: backendName, Reason: reason, Libraries: libs}
}
