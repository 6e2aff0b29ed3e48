// Package gpulib is the one hip.Device implementation the GPU backends
// share, over a vendor's runtime described as a table of bound entry
// points, a few constants and its status mapping (Device, Runtime).
//
// Around that device core it holds what every backend needs and no vendor
// spells differently: building kernels with a runtime compiler
// (ModuleBuilder over NVRTC or hiprtc, with a per-process cache), the one
// process-wide host-function trampoline and its ticket table, mapping
// status codes to *hip.Error, and marshalling kernel arguments for
// cuLaunchKernel / hipModuleLaunchKernel. Finding, opening and binding the
// libraries, and calling C, is package dl.
//
// The backends (internal/hip/cuda, internal/hip/amd) supply only their
// symbol tables, attribute numbers, how a device is made current and how
// its architecture is found, so that a run on either vendor's GPU exercises
// the other's code paths too. Package gputest holds the tests every
// backend runs, the simulator included.
package gpulib
