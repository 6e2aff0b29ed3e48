package amd

import (
	"testing"

	"miotool/internal/dl"
	"miotool/internal/hip/gpulib/gputest"
)

// The stand-in benchmarks measure the backend's own cost per call: the
// stand-in's functions do next to nothing, so the numbers are purego's
// call cost plus the backend's work around it.

// BenchmarkMockSetDevice is the price of selecting the device on every
// call: one hipSetDevice through purego on a pinned thread.
func BenchmarkMockSetDevice(b *testing.B) {
	d := openMock(b, 0, nil)
	gputest.BenchRuntimeCall(b, d.rt.Funcs.Select, 0, d.rt.Status, "SetDevice")
}

// BenchmarkMockLaunchKernel is the whole LaunchKernel path: argument
// packing, pinning the thread, hipSetDevice, hipModuleLaunchKernel.
func BenchmarkMockLaunchKernel(b *testing.B) { gputest.BenchLaunchKernel(b, kit(openMock(b, 0, nil))) }

// BenchmarkMockLaunchKernelRaw is hipModuleLaunchKernel alone with the
// arguments packed once: the floor LaunchKernel's own work adds to.
func BenchmarkMockLaunchKernelRaw(b *testing.B) {
	d := openMock(b, 0, nil)
	gputest.BenchLaunchKernelRaw(b, kit(d), d.rt.Funcs.LaunchKernel, d.rt.Status,
		func() int32 { return dl.Call(d.rt.Funcs.Select, 0) })
}

// BenchmarkMockHostFuncRoundTrip enqueues a host function and waits for the
// Go side to hear from it through the stand-in's events thread.
func BenchmarkMockHostFuncRoundTrip(b *testing.B) {
	gputest.BenchHostFuncRoundTrip(b, kit(openMock(b, 0, nil)))
}
