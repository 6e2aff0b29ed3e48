package cuda

import (
	"testing"
	"unsafe"

	"miotool/internal/hip"
	"miotool/internal/hip/gpulib"
)

// BenchmarkGPULaunchKernel is the whole LaunchKernel path: argument
// packing, pinning the thread, making the context current, cuLaunchKernel.
func BenchmarkGPULaunchKernel(b *testing.B) {
	d := gpuDevice(b)
	f := loadFunc(b, d, testSource(), "inc")
	s := newStream(b, d)
	x := alloc(b, d, 4)
	b.ReportAllocs()
	for b.Loop() {
		if err := d.LaunchKernel(f, hip.D1(1), hip.D1(1), 0, s, x, int32(1)); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	must(b, d.StreamSynchronize(s))
}

// BenchmarkGPULaunchKernelRaw is cuLaunchKernel alone on a pinned thread
// with the context already current and the arguments packed once: the
// floor LaunchKernel's own work adds to.
func BenchmarkGPULaunchKernelRaw(b *testing.B) {
	d := gpuDevice(b)
	f := loadFunc(b, d, testSource(), "inc")
	s := newStream(b, d)
	x := alloc(b, d, 4)
	runtimeLock()
	defer runtimeUnlock()
	gpulib.Call(d.api.ctxSetCurrent, d.ctx)
	params, err := gpulib.PackKernelArgs([]hip.KernelArg{x, int32(1)})
	must(b, err)
	defer params.Release()
	for b.Loop() {
		if st := gpulib.Call(d.api.launchKernel, uintptr(f), 1, 1, 1, 1, 1, 1, 0, uintptr(s), params.Pointer(), 0); st != 0 {
			b.Fatal(d.st.Err("LaunchKernel", st))
		}
	}
	b.StopTimer()
	must(b, d.StreamSynchronize(s))
}

// BenchmarkGPULaunchHostFunc is the enqueue cost of a host function
// (ticket, capture-state query, cuLaunchHostFunc), not its latency.
func BenchmarkGPULaunchHostFunc(b *testing.B) {
	d := gpuDevice(b)
	s := newStream(b, d)
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
// stream and waits for the Go side to hear from it: enqueue plus the
// driver's callback-thread wake-up plus the hand-off to a goroutine.
func BenchmarkGPUHostFuncRoundTrip(b *testing.B) {
	d := gpuDevice(b)
	s := newStream(b, d)
	for b.Loop() {
		done := make(chan struct{})
		if err := d.LaunchHostFunc(s, func() { close(done) }); err != nil {
			b.Fatal(err)
		}
		waitClosed(b, done, "a host function")
	}
}

// BenchmarkGPUCtxSetCurrent is the price of making the context current,
// which every call pays.
func BenchmarkGPUCtxSetCurrent(b *testing.B) {
	d := gpuDevice(b)
	runtimeLock()
	defer runtimeUnlock()
	for b.Loop() {
		if st := gpulib.Call(d.api.ctxSetCurrent, d.ctx); st != 0 {
			b.Fatal(d.st.Err("CtxSetCurrent", st))
		}
	}
}

// BenchmarkGPUCtxGetCurrent is the alternative check-before-set would pay.
func BenchmarkGPUCtxGetCurrent(b *testing.B) {
	d := gpuDevice(b)
	runtimeLock()
	defer runtimeUnlock()
	var ctx uintptr
	for b.Loop() {
		gpulib.Call(d.api.ctxGetCurrent, uintptr(unsafe.Pointer(&ctx)))
	}
}

// BenchmarkGPUStreamQuery is a full-path query of an idle stream.
func BenchmarkGPUStreamQuery(b *testing.B) {
	d := gpuDevice(b)
	s := newStream(b, d)
	for b.Loop() {
		if err := d.StreamQuery(s); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkGPUGraphLaunch replays a captured kernel + host function.
func BenchmarkGPUGraphLaunch(b *testing.B) {
	d := gpuDevice(b)
	f := loadFunc(b, d, testSource(), "inc")
	x := alloc(b, d, 4*256)
	a, s := newStream(b, d), newStream(b, d)
	runtimeLock()
	defer runtimeUnlock()
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
