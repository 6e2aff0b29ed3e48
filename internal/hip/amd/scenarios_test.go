package amd

import (
	"bytes"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"

	"miotool/internal/hip"
	"miotool/internal/hip/gpulib"
)

// The checks below run against the stand-in runtime and against a real
// AMD GPU.

func newStream(t testing.TB, d hip.Device) hip.Stream {
	t.Helper()
	s, err := d.StreamCreate(hip.StreamNonBlocking)
	must(t, err)
	t.Cleanup(func() { d.StreamDestroy(s) })
	return s
}

func alloc(t testing.TB, d hip.Device, bytes int) hip.DevPtr {
	t.Helper()
	p, err := d.Malloc(bytes)
	must(t, err)
	t.Cleanup(func() { d.Free(p) })
	return p
}

func loadFunc(t testing.TB, d hip.Device, src *hip.KernelSource, name string) hip.Function {
	t.Helper()
	m, err := d.ModuleLoad(src)
	must(t, err)
	t.Cleanup(func() { d.ModuleUnload(m) })
	f, err := d.ModuleGetFunction(m, name)
	must(t, err)
	return f
}

func mustStatus(t testing.TB, d hip.Device, s hip.Stream) hip.CaptureStatus {
	t.Helper()
	st, err := d.StreamIsCapturing(s)
	must(t, err)
	return st
}

func testMemory(t *testing.T, d hip.Device) {
	const n = 1 << 16
	a, b := alloc(t, d, n), alloc(t, d, n)
	s := newStream(t, d)
	got := make([]byte, n)

	must(t, d.MemsetAsync(a, 0xAB, n, s))
	must(t, d.MemcpyDtoHAsync(got, a, s))
	must(t, d.StreamSynchronize(s))
	if !bytes.Equal(got, bytes.Repeat([]byte{0xAB}, n)) {
		t.Fatal("MemsetAsync + MemcpyDtoHAsync: wrong bytes")
	}

	pattern := make([]byte, n)
	for i := range pattern {
		pattern[i] = byte(i * 7)
	}
	must(t, d.MemcpyHtoD(a, pattern))
	must(t, d.MemcpyDtoDAsync(b, a, n, s))
	clear(got)
	must(t, d.MemcpyDtoHAsync(got, b, s))
	must(t, d.StreamSynchronize(s))
	if !bytes.Equal(got, pattern) {
		t.Fatal("MemcpyHtoD + MemcpyDtoDAsync: wrong bytes")
	}

	fives := bytes.Repeat([]byte{5}, n)
	must(t, d.MemcpyHtoDAsync(a, fives, s))
	must(t, d.StreamSynchronize(s))
	runtime.KeepAlive(fives) // the contract: alive until the stream has read it
	must(t, d.Memset(b, 0, n))
	must(t, d.Memset(b.Add(16), 9, 8))
	must(t, d.MemcpyDtoH(got, b))
	want := make([]byte, n)
	copy(want[16:24], bytes.Repeat([]byte{9}, 8))
	if !bytes.Equal(got, want) {
		t.Fatal("Memset at an offset: wrong bytes")
	}
	must(t, d.MemcpyDtoH(got[:4], a))
	if !bytes.Equal(got[:4], []byte{5, 5, 5, 5}) {
		t.Fatalf("MemcpyHtoDAsync: got %v", got[:4])
	}

	must(t, d.MemcpyHtoD(a, nil))
	must(t, d.MemcpyDtoH(nil, a))
	wantCode(t, d.Memset(a, 0, -1), hip.ErrInvalidValue, "negative memset")
	_, err := d.Malloc(-5)
	wantCode(t, err, hip.ErrInvalidValue, "negative malloc")
	_, err = d.Malloc(0)
	wantCode(t, err, hip.ErrInvalidValue, "zero-byte malloc")
}

func testVectorAdd(t *testing.T, d hip.Device, src *hip.KernelSource, n int) {
	f := loadFunc(t, d, src, "vadd")
	av, bv := make([]float32, n), make([]float32, n)
	for i := range av {
		av[i], bv[i] = float32(i), float32(2*i)
	}
	a, b, c := alloc(t, d, 4*n), alloc(t, d, 4*n), alloc(t, d, 4*n)
	must(t, d.MemcpyHtoD(a, floatsToBytes(av)))
	must(t, d.MemcpyHtoD(b, floatsToBytes(bv)))
	s := newStream(t, d)
	must(t, d.LaunchKernel(f, hip.D1(uint32(n+255)/256), hip.D1(256), 0, s, a, b, c, int32(n)))
	must(t, d.StreamSynchronize(s))
	out := make([]byte, 4*n)
	must(t, d.MemcpyDtoH(out, c))
	for i, v := range bytesToFloats(out) {
		if v != float32(3*i) {
			t.Fatalf("c[%d] = %v, want %v", i, v, float32(3*i))
		}
	}
}

func testModuleErrors(t *testing.T, d hip.Device) {
	m, err := d.ModuleLoad(testSource())
	must(t, err)
	defer d.ModuleUnload(m)
	_, err = d.ModuleGetFunction(m, "no_such_kernel")
	wantCode(t, err, hip.ErrNotFound, "unknown kernel")
	if !strings.Contains(err.Error(), `"no_such_kernel"`) || !strings.HasPrefix(err.Error(), "hipModuleGetFunction: hipErrorNotFound (500)") {
		t.Errorf("error %q does not name the call and the kernel", err)
	}
	_, err = d.ModuleGetFunction(m, "")
	wantCode(t, err, hip.ErrInvalidValue, "empty kernel name")

	_, err = d.ModuleLoad(&hip.KernelSource{Name: "broken", Text: "extern \"C\" __global__ void k() {}\n#error broken on purpose\n"})
	wantCode(t, err, hip.ErrInvalidSource, "compile error")
	if msg := err.Error(); !strings.Contains(msg, "broken.hip:") || !strings.Contains(msg, "error") || !strings.HasPrefix(msg, "hipModuleLoadData") {
		t.Errorf("compile error %q lacks the call or the compiler's log", msg)
	}
	_, err = d.ModuleLoad(nil)
	wantCode(t, err, hip.ErrInvalidValue, "nil source")
	_, err = d.ModuleLoad(&hip.KernelSource{Name: "empty", Text: " \n"})
	wantCode(t, err, hip.ErrInvalidValue, "source without text")
	if !strings.Contains(err.Error(), `"empty" has no text`) {
		t.Errorf("message %q", err)
	}
}

// testHostFuncOrder enqueues host functions between memsets and checks
// they ran once each, in order. It returns the OS thread ids they ran on.
func testHostFuncOrder(t *testing.T, d hip.Device) []int {
	before := gpulib.HostFuncs.Stats()
	s := newStream(t, d)
	x := alloc(t, d, 64)
	var mu sync.Mutex
	var order, tids []int
	const n = 100
	for i := range n {
		must(t, d.LaunchHostFunc(s, func() {
			mu.Lock()
			order = append(order, i)
			tids = append(tids, syscall.Gettid())
			mu.Unlock()
		}))
		must(t, d.MemsetAsync(x, byte(i), 64, s))
	}
	done := make(chan struct{})
	must(t, d.LaunchHostFunc(s, func() { close(done) }))
	waitClosed(t, done, "the last host function")
	must(t, d.StreamSynchronize(s))
	mu.Lock()
	defer mu.Unlock()
	want := make([]int, n)
	for i := range want {
		want[i] = i
	}
	if !slices.Equal(order, want) {
		t.Fatalf("host functions ran in order %v", order)
	}
	after := gpulib.HostFuncs.Stats()
	if after.Fired-before.Fired != n+1 || after.Stale != before.Stale || after.Unknown != before.Unknown || after.Live != before.Live {
		t.Fatalf("tickets before %+v after %+v", before, after)
	}
	wantCode(t, d.LaunchHostFunc(s, nil), hip.ErrInvalidValue, "nil host function")
	return tids
}

// testCaptureReplay captures a kernel and a host function in mode, then
// replays the graph three times on another stream.
func testCaptureReplay(t *testing.T, d *device, mode hip.CaptureMode) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	live := gpulib.HostFuncs.Stats().Live
	f := loadFunc(t, d, testSource(), "inc")
	const n = 4096
	x := alloc(t, d, 4*n)
	must(t, d.Memset(x, 0, 4*n))
	a, b := newStream(t, d), newStream(t, d)
	var ran atomic.Int32

	must(t, d.StreamBeginCapture(a, mode))
	if st, err := d.StreamIsCapturing(a); err != nil || st != hip.CaptureStatusActive {
		t.Fatalf("IsCapturing during capture: %v %v", st, err)
	}
	must(t, d.LaunchKernel(f, hip.D1(n/256), hip.D1(256), 0, a, x, int32(n)))
	must(t, d.LaunchHostFunc(a, func() { ran.Add(1) }))
	g, err := d.StreamEndCapture(a)
	must(t, err)
	if g == 0 {
		t.Fatal("EndCapture returned no graph")
	}
	ge, err := d.GraphInstantiate(g)
	must(t, err)
	if ran.Load() != 0 {
		t.Fatal("a captured host function ran during capture")
	}
	for range 3 {
		must(t, d.GraphLaunch(ge, b))
	}
	must(t, d.StreamSynchronize(b))
	if ran.Load() != 3 {
		t.Fatalf("captured host function ran %d times over 3 replays", ran.Load())
	}
	out := make([]byte, 4*n)
	must(t, d.MemcpyDtoH(out, x))
	for i, v := range bytesToFloats(out) {
		if v != 3 {
			t.Fatalf("x[%d] = %v after 3 replays, want 3", i, v)
		}
	}
	must(t, d.GraphDestroy(g))
	if d.captures.Tracked() != 1 {
		t.Fatalf("the executable graph must keep its host function's ticket (tracked %d)", d.captures.Tracked())
	}
	must(t, d.GraphExecDestroy(ge))
	if d.captures.Tracked() != 0 || gpulib.HostFuncs.Stats().Live != live {
		t.Fatalf("tickets left behind: tracked %d, live %d (was %d)", d.captures.Tracked(), gpulib.HostFuncs.Stats().Live, live)
	}
}

// testGlobalCaptureRefusal checks cells of HIP's capture rules: a query
// from another thread in global mode breaks a global capture, one in
// relaxed mode does not, enqueueing on an unrelated stream does not, and an
// allocation on the capturing thread does. It returns the stream's state
// after the first failed capture: none on HIP with ROCm PR 6509, still
// invalidated before it (the stream is then replaced, as callers must).
func testGlobalCaptureRefusal(t *testing.T, d *device) hip.CaptureStatus {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	f := loadFunc(t, d, testSource(), "inc")
	x := alloc(t, d, 4*256)
	a, other := newStream(t, d), newStream(t, d)

	capture := func(during func()) (hip.Graph, error) {
		t.Helper()
		must(t, d.StreamBeginCapture(a, hip.CaptureModeGlobal))
		must(t, d.LaunchKernel(f, hip.D1(1), hip.D1(256), 0, a, x, int32(256)))
		during()
		return d.StreamEndCapture(a)
	}
	ok := func(g hip.Graph, err error, cell string) {
		t.Helper()
		if err != nil || g == 0 {
			t.Fatalf("%s: the capture should survive, EndCapture gave %#x, %v", cell, g, err)
		}
		must(t, d.GraphDestroy(g))
	}

	var queryErr error
	g, err := capture(func() { onLockedThread(t, func() { queryErr = d.StreamQuery(other) }) })
	wantCode(t, queryErr, hip.ErrStreamCaptureUnsupported, "other thread, global mode, StreamQuery(unrelated stream)")
	wantCode(t, err, hip.ErrStreamCaptureInvalidated, "EndCapture after the refused query")
	if g != 0 {
		t.Fatalf("an invalidated capture returned graph %#x", g)
	}
	after := mustStatus(t, d, a)
	switch after {
	case hip.CaptureStatusNone:
		must(t, d.StreamQuery(a))
	case hip.CaptureStatusInvalidated:
		wantCode(t, d.StreamQuery(a), hip.ErrStreamCaptureUnsupported, "query of a stream left invalidated")
		a = newStream(t, d)
	default:
		t.Fatalf("stream status after the failed capture: %v", after)
	}

	g, err = capture(func() {
		onLockedThread(t, func() {
			queryErr = hip.WithCaptureMode(d, hip.CaptureModeRelaxed, func() error { return d.StreamQuery(other) })
		})
	})
	if queryErr != nil && !hip.IsNotReady(queryErr) {
		t.Fatalf("relaxed-mode query during a global capture: %v", queryErr)
	}
	ok(g, err, "relaxed-mode query")

	var enqueueErr error
	hostRan := make(chan struct{})
	g, err = capture(func() {
		onLockedThread(t, func() {
			if enqueueErr = d.LaunchHostFunc(other, func() { close(hostRan) }); enqueueErr == nil {
				enqueueErr = d.MemsetAsync(x, 0, 4, other)
			}
		})
	})
	must(t, enqueueErr)
	ok(g, err, "enqueue on an unrelated stream from another thread")
	waitClosed(t, hostRan, "the host function on the unrelated stream")

	var mallocErr error
	g, err = capture(func() { _, mallocErr = d.Malloc(64) })
	wantCode(t, mallocErr, hip.ErrStreamCaptureUnsupported, "same thread, global mode, Malloc")
	wantCode(t, err, hip.ErrStreamCaptureInvalidated, "EndCapture after the refused Malloc")
	must(t, d.StreamSynchronize(other))
	return after
}

func testThreadExchange(t *testing.T, d hip.Device) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	prev, err := d.ThreadExchangeCaptureMode(hip.CaptureModeRelaxed)
	must(t, err)
	if prev != hip.CaptureModeGlobal {
		t.Fatalf("a thread starts in %v mode, want global", prev)
	}
	got, err := d.ThreadExchangeCaptureMode(hip.CaptureModeThreadLocal)
	must(t, err)
	if got != hip.CaptureModeRelaxed {
		t.Fatalf("exchange returned %v, want relaxed", got)
	}
	must(t, hip.WithCaptureMode(d, hip.CaptureModeRelaxed, func() error {
		inner, err := d.ThreadExchangeCaptureMode(hip.CaptureModeRelaxed)
		if err == nil && inner != hip.CaptureModeRelaxed {
			t.Errorf("inside WithCaptureMode the mode is %v", inner)
		}
		return err
	}))
	got, err = d.ThreadExchangeCaptureMode(prev)
	must(t, err)
	if got != hip.CaptureModeThreadLocal {
		t.Fatalf("WithCaptureMode did not restore thread-local: %v", got)
	}
	for _, bad := range []hip.CaptureMode{-1, 3, 7} {
		_, err = d.ThreadExchangeCaptureMode(bad)
		wantCode(t, err, hip.ErrInvalidValue, fmt.Sprintf("ThreadExchangeCaptureMode(%d)", int(bad)))
	}
	got, err = d.ThreadExchangeCaptureMode(prev)
	must(t, err)
	if got != prev {
		t.Fatalf("a refused exchange changed the thread's mode to %v", got)
	}
	s := newStream(t, d)
	wantCode(t, d.StreamBeginCapture(s, hip.CaptureMode(7)), hip.ErrInvalidValue, "StreamBeginCapture(mode 7)")
	if st, err := d.StreamIsCapturing(s); err != nil || st != hip.CaptureStatusNone {
		t.Fatalf("after a refused begin: %v %v", st, err)
	}
}
