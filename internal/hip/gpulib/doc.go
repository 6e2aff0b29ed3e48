// Package gpulib holds what the GPU backends share that is not a vendor's
// symbol name or constant: the device core itself (Device, the one
// hip.Device implementation over a Runtime, which describes a vendor's
// library as a table of bound entry points, a few constants and its status
// mapping), building kernels with a runtime compiler (ModuleBuilder over
// NVRTC or hiprtc, with a per-process cache), finding and opening shared
// libraries (with the record of every path tried, for `miotool doctor`),
// binding a table of symbols, calling C through purego, the one
// process-wide host-function trampoline and its ticket table, mapping
// status codes to *hip.Error, and marshalling kernel arguments for
// cuLaunchKernel / hipModuleLaunchKernel.
//
// The backends (internal/hip/cuda, internal/hip/amd) supply only their
// symbol tables, attribute numbers, how a device is made current and how
// its architecture is found, so that a run on either vendor's GPU exercises
// the other's code paths too. Package gputest holds their shared tests.
package gpulib
