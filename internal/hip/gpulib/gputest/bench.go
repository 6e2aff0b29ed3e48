package gputest

import (
	"runtime"
	"testing"

	"miotool/internal/dl"
	"miotool/internal/hip"
	"miotool/internal/hip/gpulib"
)

// BenchLaunchKernel is the whole LaunchKernel path: argument packing,
// pinning the thread, making the device current, the runtime's launch.
func BenchLaunchKernel(b *testing.B, k Kit) {
	d := k.Device
	f := LoadFunc(b, d, k.Source(), "inc")
	s := NewStream(b, d)
	x := Alloc(b, d, 4)
	b.ReportAllocs()
	for b.Loop() {
		if err := d.LaunchKernel(f, hip.D1(1), hip.D1(1), 0, s, x, int32(1)); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	Must(b, d.StreamSynchronize(s))
}

// BenchLaunchKernelRaw is the runtime's launch function alone, on a
// pinned thread that makeCurrent has made the device current on, with the
// arguments packed once: the floor LaunchKernel's own work adds to.
func BenchLaunchKernelRaw(b *testing.B, k Kit, launch uintptr, st gpulib.StatusMapper, makeCurrent func() int32) {
	d := k.Device
	f := LoadFunc(b, d, k.Source(), "inc")
	s := NewStream(b, d)
	x := Alloc(b, d, 4)
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if r := makeCurrent(); r != 0 {
		b.Fatal(st.Err("Select", r))
	}
	params, err := gpulib.PackKernelArgs([]hip.KernelArg{x, int32(1)})
	Must(b, err)
	defer params.Release()
	for b.Loop() {
		if r := dl.Call(launch, uintptr(f), 1, 1, 1, 1, 1, 1, 0, uintptr(s), params.Pointer(), 0); r != 0 {
			b.Fatal(st.Err("LaunchKernel", r))
		}
	}
	b.StopTimer()
	Must(b, d.StreamSynchronize(s))
}

// BenchHostFuncRoundTrip enqueues a host function on an idle stream and
// waits for the Go side to hear from it: enqueue (ticket, capture-state
// query, the runtime's call), the callback thread's wake-up and the
// hand-off to a goroutine.
func BenchHostFuncRoundTrip(b *testing.B, k Kit) {
	d := k.Device
	s := NewStream(b, d)
	for b.Loop() {
		done := make(chan struct{})
		if err := d.LaunchHostFunc(s, func() { close(done) }); err != nil {
			b.Fatal(err)
		}
		WaitClosed(b, done, "a host function")
	}
}

// BenchRuntimeCall is fn(arg) alone through purego on a pinned thread:
// the cuCtxSetCurrent or hipSetDevice every device call pays, or a call a
// lazier scheme would pay instead. A non-zero status fails b, named op.
func BenchRuntimeCall(b *testing.B, fn, arg uintptr, st gpulib.StatusMapper, op string) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	for b.Loop() {
		if r := dl.Call(fn, arg); r != 0 {
			b.Fatal(st.Err(op, r))
		}
	}
}
