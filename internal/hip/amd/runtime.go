package amd

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"sync"
	"unsafe"

	"miotool/internal/dl"
	"miotool/internal/hip"
	"miotool/internal/hip/gpulib"
)

// runtimeAPI holds the libamdhip64 entry points only this backend calls;
// the ones the device core calls are in runtimeLib.Funcs.
type runtimeAPI struct {
	driverGetVersion, runtimeGetVersion, getErrorName, getDeviceProperties uintptr
}

// symbols is the binding table of l. HIP exports plain names, with two
// traps: hipGetDeviceProperties is #defined to hipGetDevicePropertiesR0600
// (the plain export keeps the pre-6.0 struct), and hipGraphInstantiate
// keeps CUDA's old five-argument form, so the flags form is bound instead.
func (l *runtimeLib) symbols() []dl.Symbol {
	a, f := &l.api, &l.Funcs
	return []dl.Symbol{
		{Name: "hipInit", Addr: &f.Init},
		{Name: "hipDriverGetVersion", Addr: &a.driverGetVersion},
		{Name: "hipRuntimeGetVersion", Addr: &a.runtimeGetVersion},
		{Name: "hipGetErrorName", Addr: &a.getErrorName},
		{Name: "hipGetDeviceCount", Addr: &f.DeviceGetCount},
		{Name: "hipSetDevice", Addr: &f.Select},
		{Name: "hipDeviceGetName", Addr: &f.DeviceGetName},
		{Name: "hipDeviceGetAttribute", Addr: &f.DeviceGetAttribute},
		{Name: "hipDeviceTotalMem", Addr: &f.DeviceTotalMem},
		{Name: "hipGetDevicePropertiesR0600", Addr: &a.getDeviceProperties},
		{Name: "hipDeviceSynchronize", Addr: &f.DeviceSynchronize},

		{Name: "hipMalloc", Addr: &f.Malloc},
		{Name: "hipFree", Addr: &f.Free},
		// Deprecated in the 6.x headers (for hipExtHostAlloc and
		// hipFreeHost), not in 5.x or the 7.x line: every version exports
		// the pair.
		{Name: "hipHostMalloc", Addr: &f.HostAlloc},
		{Name: "hipHostFree", Addr: &f.HostFree},
		{Name: "hipHostRegister", Addr: &f.HostRegister},
		{Name: "hipHostUnregister", Addr: &f.HostUnregister},
		{Name: "hipMemset", Addr: &f.Memset},
		{Name: "hipMemsetAsync", Addr: &f.MemsetAsync},
		{Name: "hipMemcpyHtoD", Addr: &f.MemcpyHtoD},
		{Name: "hipMemcpyDtoH", Addr: &f.MemcpyDtoH},
		{Name: "hipMemcpyHtoDAsync", Addr: &f.MemcpyHtoDAsync},
		{Name: "hipMemcpyDtoHAsync", Addr: &f.MemcpyDtoHAsync},
		{Name: "hipMemcpyDtoDAsync", Addr: &f.MemcpyDtoDAsync},

		{Name: "hipStreamCreateWithFlags", Addr: &f.StreamCreate},
		{Name: "hipStreamDestroy", Addr: &f.StreamDestroy},
		{Name: "hipStreamQuery", Addr: &f.StreamQuery},
		{Name: "hipStreamSynchronize", Addr: &f.StreamSynchronize},
		{Name: "hipStreamWaitEvent", Addr: &f.StreamWaitEvent},
		{Name: "hipStreamIsCapturing", Addr: &f.StreamIsCapturing},
		{Name: "hipStreamGetCaptureInfo", Addr: &f.StreamGetCaptureInfo},

		{Name: "hipEventCreateWithFlags", Addr: &f.EventCreate},
		{Name: "hipEventRecord", Addr: &f.EventRecord},
		{Name: "hipEventQuery", Addr: &f.EventQuery},
		{Name: "hipEventSynchronize", Addr: &f.EventSynchronize},
		{Name: "hipEventElapsedTime", Addr: &f.EventElapsedTime},
		{Name: "hipEventDestroy", Addr: &f.EventDestroy},

		{Name: "hipModuleLoadData", Addr: &f.ModuleLoadData},
		{Name: "hipModuleGetFunction", Addr: &f.ModuleGetFunction},
		{Name: "hipModuleUnload", Addr: &f.ModuleUnload},
		{Name: "hipModuleLaunchKernel", Addr: &f.LaunchKernel},
		{Name: "hipLaunchHostFunc", Addr: &f.LaunchHostFunc},

		{Name: "hipStreamBeginCapture", Addr: &f.StreamBeginCapture},
		{Name: "hipStreamEndCapture", Addr: &f.StreamEndCapture},
		{Name: "hipThreadExchangeStreamCaptureMode", Addr: &f.ThreadExchangeCaptureMode},
		{Name: "hipGraphInstantiateWithFlags", Addr: &f.GraphInstantiate},
		{Name: "hipGraphLaunch", Addr: &f.GraphLaunch},
		{Name: "hipGraphExecDestroy", Addr: &f.GraphExecDestroy},
		{Name: "hipGraphDestroy", Addr: &f.GraphDestroy},
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
// no attribute gives. Its offset, length and size are the C compiler's for
// the 6.x/7.x header's field list (TestStandInDeclarationsMatchRealHeaders
// checks them against the HIP 6.3 header and any installed 6.x or later);
// the buffer is far larger than the 1472-byte struct so that a longer
// future struct cannot write past it.
const (
	propsGCNArchNameOffset = 1160
	propsGCNArchNameLen    = 256
	propsStructSize        = 1472
	propsBufferSize        = 4096
)

// runtimeLib is libamdhip64 loaded, bound and initialised.
type runtimeLib struct {
	gpulib.Runtime
	api runtimeAPI
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
// is not tried; HIP 5 itself is looked for only to say why it cannot serve
// (legacyRuntimeSearch).
func runtimeSearch() dl.SearchSpec {
	return dl.SearchSpec{
		Name:    "libamdhip64",
		Sonames: []string{"libamdhip64.so.7", "libamdhip64.so.6"},
		Dirs:    rocmLibDirs(),
	}
}

var defaultRuntime = sync.OnceValues(func() (*runtimeLib, error) {
	return openRuntime(runtimeSearch(), legacyRuntimeSearch())
})

// newRuntimeLib is libamdhip64 before loading: what sets HIP apart as data.
func newRuntimeLib() *runtimeLib {
	r := &runtimeLib{Runtime: gpulib.Runtime{
		Backend:    backendName,
		Vendor:     "HIP",
		SelectOp:   "SetDevice",
		ClosedCode: hip.ErrDeinitialized,
		Attributes: gpulib.Attributes{ComputeUnits: attrMultiprocessors, WarpSize: attrWarpSize, ClockKHz: attrClockRate},
	}}
	r.Status = gpulib.StatusMapper{Dialect: hip.DialectHIP, ErrorName: r.errorName}
	return r
}

// loadRuntime opens, binds and initialises libamdhip64. Every failure is a
// *hip.UnavailableError naming what failed and listing the paths tried.
func loadRuntime(spec dl.SearchSpec) (*runtimeLib, error) {
	r := newRuntimeLib()
	if err := r.Load(spec, r.symbols(), "HIP older than 6.0, or not AMD's runtime"); err != nil {
		return nil, err
	}
	r.readVersions()
	return r, nil
}

// readVersions asks the runtime its own and the driver's version.
func (r *runtimeLib) readVersions() {
	var v int32
	if r.api.runtimeGetVersion != 0 && dl.Call(r.api.runtimeGetVersion, uintptr(unsafe.Pointer(&v))) == 0 {
		r.RuntimeVersion = formatHIPVersion(v)
	}
	if r.api.driverGetVersion != 0 && dl.Call(r.api.driverGetVersion, uintptr(unsafe.Pointer(&v))) == 0 {
		r.DriverVersion = formatHIPVersion(v)
	}
	r.Lib.Version = r.RuntimeVersion
}

// errorName asks the runtime for a code's name. HIP names every code it
// does not know hipErrorUnknown; that says nothing the number does not, so
// it is dropped.
func (r *runtimeLib) errorName(code int32) string {
	if r.api.getErrorName == 0 {
		return ""
	}
	s := dl.GoString(dl.CallPtr(r.api.getErrorName, uintptr(code)))
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
		if s := dl.GoStringBytes(buf[propsGCNArchNameOffset : propsGCNArchNameOffset+propsGCNArchNameLen]); archPattern.MatchString(s) {
			return s
		}
	}
	for i := 0; i+3 <= len(buf); i++ {
		if buf[i] != 'g' || (i > 0 && buf[i-1] != 0) {
			continue
		}
		end := min(i+propsGCNArchNameLen, len(buf))
		if s := dl.GoStringBytes(buf[i:end]); archPattern.MatchString(s) {
			return s
		}
	}
	return ""
}
