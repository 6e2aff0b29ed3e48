package cuda

import (
	"runtime"
	"testing"
	"unsafe"

	"miotool/internal/dl"
	"miotool/internal/hip"
	"miotool/internal/hip/gpulib/gputest"
)

// BenchmarkGPULaunchKernel is the whole LaunchKernel path: argument
// packing, pinning the thread, making the context current, cuLaunchKernel.
func BenchmarkGPULaunchKernel(b *testing.B) { gputest.BenchLaunchKernel(b, kit(gpu.Device(b))) }

// BenchmarkGPULaunchKernelRaw is cuLaunchKernel alone on a pinned thread
// with the context already current and the arguments packed once: the
// floor LaunchKernel's own work adds to.
func BenchmarkGPULaunchKernelRaw(b *testing.B) {
	d := gpu.Device(b)
	gputest.BenchLaunchKernelRaw(b, kit(d), d.drv.Funcs.LaunchKernel, d.drv.Status,
		func() int32 { return dl.Call(d.drv.Funcs.Select, d.ctx) })
}

// BenchmarkGPULaunchHostFunc is the enqueue cost of a host function
// (ticket, capture-state query, cuLaunchHostFunc), not its latency.
func BenchmarkGPULaunchHostFunc(b *testing.B) {
	d := gpu.Device(b)
	s := gputest.NewStream(b, d)
	noop := func() {}
	b.ReportAllocs()
	for b.Loop() {
		if err := d.LaunchHostFunc(s, noop); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	must(b, d.StreamSynchronize(s))
}

// BenchmarkGPUHostFuncRoundTrip enqueues a host function on an idle
// stream and waits for the Go side to hear from it.
func BenchmarkGPUHostFuncRoundTrip(b *testing.B) {
	gputest.BenchHostFuncRoundTrip(b, kit(gpu.Device(b)))
}

// BenchmarkGPUCtxSetCurrent is the price of making the context current,
// which every call pays.
func BenchmarkGPUCtxSetCurrent(b *testing.B) {
	d := gpu.Device(b)
	gputest.BenchRuntimeCall(b, d.drv.Funcs.Select, d.ctx, d.drv.Status, "CtxSetCurrent")
}

// BenchmarkGPUCtxGetCurrent is the alternative check-before-set would pay.
func BenchmarkGPUCtxGetCurrent(b *testing.B) {
	d := gpu.Device(b)
	ctx := new(uintptr) // on the heap, which does not move: C writes to it
	gputest.BenchRuntimeCall(b, d.drv.api.ctxGetCurrent, uintptr(unsafe.Pointer(ctx)), d.drv.Status, "CtxGetCurrent")
	runtime.KeepAlive(ctx)
}

// BenchmarkGPUStreamQuery is a full-path query of an idle stream.
func BenchmarkGPUStreamQuery(b *testing.B) {
	d := gpu.Device(b)
	s := gputest.NewStream(b, d)
	for b.Loop() {
		if err := d.StreamQuery(s); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkGPUGraphLaunch replays a captured kernel + host function.
func BenchmarkGPUGraphLaunch(b *testing.B) {
	d := gpu.Device(b)
	f := gputest.LoadFunc(b, d, testSource(), "inc")
	x := gputest.Alloc(b, d, 4*256)
	a, s := gputest.NewStream(b, d), gputest.NewStream(b, d)
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	must(b, d.StreamBeginCapture(a, hip.CaptureModeThreadLocal))
	must(b, d.LaunchKernel(f, hip.D1(1), hip.D1(256), 0, a, x, int32(256)))
	must(b, d.LaunchHostFunc(a, func() {}))
	g, err := d.StreamEndCapture(a)
	must(b, err)
	ge, err := d.GraphInstantiate(g)
	must(b, err)
	b.Cleanup(func() { d.GraphExecDestroy(ge); d.GraphDestroy(g) })
	for b.Loop() {
		if err := d.GraphLaunch(ge, s); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	must(b, d.StreamSynchronize(s))
}
