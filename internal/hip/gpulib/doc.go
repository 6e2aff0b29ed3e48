// Package gpulib holds what the GPU backends share that is not a vendor's
// symbol name or constant: finding and opening shared libraries (with the
// record of every path tried, for `miotool doctor`), binding a table of
// symbols, calling C through purego, the one process-wide host-function
// trampoline and its ticket table, mapping status codes to *hip.Error,
// marshalling kernel arguments for cuLaunchKernel / hipModuleLaunchKernel,
// and running a runtime compiler (NVRTC, hiprtc) with a per-process cache.
package gpulib
