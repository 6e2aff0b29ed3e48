package amd

import (
	"runtime"
	"testing"

	"miotool/internal/hip"
	"miotool/internal/hip/gpulib"
)

// The stand-in benchmarks measure the backend's own cost per call: the
// stand-in's functions do next to nothing, so the numbers are purego's
// call cost plus the backend's work around it.

func benchMock(b *testing.B) *device {
	b.Helper()
	buildMocks(b)
	rt, err := loadRuntime(mockRuntimeSpec())
	must(b, err)
	d, err := openDevice(hip.OpenOptions{}, rt, loadHIPRTC(mockHIPRTCSpec()))
	must(b, err)
	b.Cleanup(func() { d.Close() })
	return d
}

// BenchmarkMockSetDevice is the price of selecting the device on every
// call: one hipSetDevice through purego on a pinned thread.
func BenchmarkMockSetDevice(b *testing.B) {
	d := benchMock(b)
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	for b.Loop() {
		if st := gpulib.Call(d.api.setDevice, 0); st != 0 {
			b.Fatal(d.st.Err("SetDevice", st))
		}
	}
}

// BenchmarkMockLaunchKernel is the whole LaunchKernel path: argument
// packing, pinning the thread, hipSetDevice, hipModuleLaunchKernel.
func BenchmarkMockLaunchKernel(b *testing.B) {
	d := benchMock(b)
	f := loadFunc(b, d, testSource(), "inc")
	s := newStream(b, d)
	x := alloc(b, d, 4)
	b.ReportAllocs()
	for b.Loop() {
		if err := d.LaunchKernel(f, hip.D1(1), hip.D1(1), 0, s, x, int32(1)); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkMockLaunchKernelRaw is hipModuleLaunchKernel alone with the
// arguments packed once: the floor LaunchKernel's own work adds to.
func BenchmarkMockLaunchKernelRaw(b *testing.B) {
	d := benchMock(b)
	f := loadFunc(b, d, testSource(), "inc")
	s := newStream(b, d)
	x := alloc(b, d, 4)
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	params, err := gpulib.PackKernelArgs([]hip.KernelArg{x, int32(1)})
	must(b, err)
	defer params.Release()
	for b.Loop() {
		if st := gpulib.Call(d.api.launchKernel, uintptr(f), 1, 1, 1, 1, 1, 1, 0, uintptr(s), params.Pointer(), 0); st != 0 {
			b.Fatal(d.st.Err("LaunchKernel", st))
		}
	}
}

// BenchmarkMockHostFuncRoundTrip enqueues a host function and waits for the
// Go side to hear from it through the stand-in's events thread: enqueue,
// capture-state query, the foreign thread's wake-up and the callback into
// Go.
func BenchmarkMockHostFuncRoundTrip(b *testing.B) {
	d := benchMock(b)
	s := newStream(b, d)
	for b.Loop() {
		done := make(chan struct{})
		if err := d.LaunchHostFunc(s, func() { close(done) }); err != nil {
			b.Fatal(err)
		}
		waitClosed(b, done, "a host function")
	}
}
