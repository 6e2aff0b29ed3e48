package hip

// vendorCalls spells Device methods as each runtime's C function, so an
// error can be pasted into either project's issues as the call it was.
// Methods whose vendor names are the prefix plus the method name need no
// entry.
var vendorCalls = map[string]struct{ hip, cuda string }{
	"Malloc":                    {"hipMalloc", "cuMemAlloc"},
	"Free":                      {"hipFree", "cuMemFree"},
	"HostAlloc":                 {"hipHostMalloc", "cuMemHostAlloc"},
	"HostFree":                  {"hipHostFree", "cuMemFreeHost"},
	"HostRegister":              {"hipHostRegister", "cuMemHostRegister"},
	"HostUnregister":            {"hipHostUnregister", "cuMemHostUnregister"},
	"Memset":                    {"hipMemset", "cuMemsetD8"},
	"MemsetAsync":               {"hipMemsetAsync", "cuMemsetD8Async"},
	"MemcpyDtoDAsync":           {"hipMemcpyDtoDAsync", "cuMemcpyDtoDAsync"},
	"ModuleLoad":                {"hipModuleLoadData", "cuModuleLoadData"},
	"LaunchKernel":              {"hipModuleLaunchKernel", "cuLaunchKernel"},
	"DeviceSynchronize":         {"hipDeviceSynchronize", "cuCtxSynchronize"},
	"ThreadExchangeCaptureMode": {"hipThreadExchangeStreamCaptureMode", "cuThreadExchangeStreamCaptureMode"},
	"GraphInstantiate":          {"hipGraphInstantiateWithFlags", "cuGraphInstantiateWithFlags"},
	"Init":                      {"hipInit", "cuInit"},
	"DeviceGet":                 {"hipGetDevice", "cuDeviceGet"},
	"DeviceGetCount":            {"hipGetDeviceCount", "cuDeviceGetCount"},
	"DevicePrimaryCtxRetain":    {"hipDevicePrimaryCtxRetain", "cuDevicePrimaryCtxRetain"},
	"DevicePrimaryCtxRelease":   {"hipDevicePrimaryCtxRelease", "cuDevicePrimaryCtxRelease"},
	"CtxSetCurrent":             {"hipCtxSetCurrent", "cuCtxSetCurrent"},
	// The AMD backend creates streams and events with flags; CUDA's names
	// are its plain ones.
	"StreamCreate": {"hipStreamCreateWithFlags", "cuStreamCreate"},
	"EventCreate":  {"hipEventCreateWithFlags", "cuEventCreate"},
}

// CallName is the vendor's spelling of a Device method or runtime call:
// CallName("Malloc", DialectCUDA) is "cuMemAlloc", CallName("StreamQuery",
// DialectHIP) is "hipStreamQuery".
func CallName(op string, d Dialect) string {
	if op == "" {
		return ""
	}
	if v, ok := vendorCalls[op]; ok {
		if d == DialectCUDA {
			return v.cuda
		}
		return v.hip
	}
	if d == DialectCUDA {
		return "cu" + op
	}
	return "hip" + op
}
