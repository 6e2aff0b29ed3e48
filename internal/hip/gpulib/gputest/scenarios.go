package gputest

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

// KernelText defines the kernels every scenario uses, in source both NVRTC and
// hiprtc compile; the stand-in runtimes know them by name. Backends append
// kernels of their own.
const KernelText = `
extern "C" __global__ void vadd(const float* a, const float* b, float* c, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) c[i] = a[i] + b[i];
}
extern "C" __global__ void inc(float* x, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] += 1.0f;
}
`

// Twins are the Go twins of KernelText's kernels, which the simulator runs
// in their place: vadd(a, b, c, n) and inc(x, n), over n float32 values.
func Twins() map[string]hip.GoKernel {
	floats := func(mem hip.Memory, arg hip.KernelArg, n int32) ([]float32, error) {
		p, ok := arg.(hip.DevPtr)
		if !ok {
			return nil, fmt.Errorf("argument %v is a %T, not a device pointer", arg, arg)
		}
		return mem.Float32s(p, int(n))
	}
	count := func(args []hip.KernelArg, i int) (int32, error) {
		if len(args) <= i {
			return 0, fmt.Errorf("%d arguments, want %d", len(args), i+1)
		}
		n, ok := args[i].(int32)
		if !ok || n < 0 {
			return 0, fmt.Errorf("argument %d is %v, not a count", i, args[i])
		}
		return n, nil
	}
	return map[string]hip.GoKernel{
		"vadd": func(mem hip.Memory, _, _ hip.Dim3, args []hip.KernelArg) error {
			n, err := count(args, 3)
			if err != nil {
				return err
			}
			var v [3][]float32
			for i := range v {
				if v[i], err = floats(mem, args[i], n); err != nil {
					return err
				}
			}
			for i := range v[2] {
				v[2][i] = v[0][i] + v[1][i]
			}
			return nil
		},
		"inc": func(mem hip.Memory, _, _ hip.Dim3, args []hip.KernelArg) error {
			n, err := count(args, 1)
			if err != nil {
				return err
			}
			x, err := floats(mem, args[0], n)
			if err != nil {
				return err
			}
			for i := range x {
				x[i]++
			}
			return nil
		},
	}
}

// RuntimeDevice is what a device over a real runtime library has beyond
// hip.Device (gpulib.Device): the host-function tickets its captures and
// graphs hold, behind the process's one trampoline, and kernels compiled
// from their source text through the process's compile cache. The
// scenarios check for it: where a device has it, they also check that no
// ticket is left behind and that compiles are cached and fail with the
// compiler's log; the simulator, which binds Go twins, has none of that.
type RuntimeDevice interface {
	hip.Device
	Captures() *gpulib.CaptureTickets
}

// Kit is a backend's device and what the scenarios need to know of it.
// Every backend runs the kit: the simulator, the C stand-ins of the GPU
// runtimes and the GPUs themselves.
type Kit struct {
	Device hip.Device
	// Source returns a new kernel source that holds KernelText (and, for
	// the simulator, its Go twins: Twins).
	Source func() *hip.KernelSource
	// CompileLog is text the error of a source named "broken" that does not
	// compile shows: the compiler's position mark, "broken.cu(" (NVRTC) or
	// "broken.hip:" (hiprtc). A RuntimeDevice's kit sets it.
	CompileLog string
	// AfterFailedCapture checks the capture status a stream shows after its
	// capture failed; nil accepts none and invalidated (HIP before ROCm PR
	// 6509 keeps the stream invalidated).
	AfterFailedCapture func(t testing.TB, st hip.CaptureStatus)
}

// runtimeDevice is the kit's device as a RuntimeDevice, if it is one.
func (k Kit) runtimeDevice() (RuntimeDevice, bool) {
	rd, ok := k.Device.(RuntimeDevice)
	return rd, ok
}

// tickets checks, on a RuntimeDevice, that its captures and graphs hold
// tracked tickets and the process live ones, as want says; other devices
// hold none.
func (k Kit) tickets(t testing.TB, tracked, live int, what string) {
	t.Helper()
	rd, ok := k.runtimeDevice()
	if !ok {
		return
	}
	if got, gotLive := rd.Captures().Tracked(), gpulib.HostFuncs.Stats().Live; got != tracked || gotLive != live {
		t.Fatalf("%s: tracked %d tickets (want %d), live %d (want %d)", what, got, tracked, gotLive, live)
	}
}

// liveTickets is the process's live host-function tickets (0 where the
// device is not a RuntimeDevice).
func (k Kit) liveTickets() int {
	if _, ok := k.runtimeDevice(); !ok {
		return 0
	}
	return gpulib.HostFuncs.Stats().Live
}

// Scenario is one check of the shared list.
type Scenario struct {
	Name string
	Run  func(t *testing.T, k Kit)
}

// Scenarios is the list every backend runs, on its stand-in and on its
// GPU, against one open device.
var Scenarios = []Scenario{
	{"Memory", Memory},
	{"Kernels", Kernels},
	{"LaunchRejectsArgs", LaunchRejectsArgs},
	{"HostMemory", HostMemory},
	{"LegacyStream", LegacyStream},
	{"HostFunctions", func(t *testing.T, k Kit) { HostFuncOrder(t, k) }},
	{"CaptureReplay", func(t *testing.T, k Kit) {
		for _, mode := range hip.CaptureModes {
			t.Run(mode.String(), func(t *testing.T) { CaptureReplay(t, k, mode) })
		}
	}},
	{"GlobalCaptureRefusal", func(t *testing.T, k Kit) {
		st := GlobalCaptureRefusal(t, k)
		if k.AfterFailedCapture != nil {
			k.AfterFailedCapture(t, st)
		}
		t.Logf("a stream after a failed capture reads %v", st)
	}},
	{"EndCaptureFromAnotherThread", func(t *testing.T, k Kit) {
		t.Logf("a capture ended from another thread reads %v", EndCaptureFromAnotherThread(t, k))
	}},
	{"ThreadExchange", func(t *testing.T, k Kit) { ThreadExchange(t, k.Device) }},
}

// Run runs every scenario as a subtest of t.
func Run(t *testing.T, k Kit) {
	for _, s := range Scenarios {
		t.Run(s.Name, func(t *testing.T) { s.Run(t, k) })
	}
}

// Memory checks allocation, memsets and copies of every kind, and the
// refusal of negative and zero sizes.
func Memory(t *testing.T, k Kit) {
	d := k.Device
	const n = 1 << 16
	a, b := Alloc(t, d, n), Alloc(t, d, n)
	s := NewStream(t, d)
	got := make([]byte, n)

	Must(t, d.MemsetAsync(a, 0xAB, n, s))
	Must(t, d.MemcpyDtoHAsync(got, a, s))
	Must(t, d.StreamSynchronize(s))
	if !bytes.Equal(got, bytes.Repeat([]byte{0xAB}, n)) {
		t.Fatal("MemsetAsync + MemcpyDtoHAsync: wrong bytes")
	}

	pattern := make([]byte, n)
	for i := range pattern {
		pattern[i] = byte(i * 7)
	}
	Must(t, d.MemcpyHtoD(a, pattern))
	Must(t, d.MemcpyDtoDAsync(b, a, n, s))
	clear(got)
	Must(t, d.MemcpyDtoHAsync(got, b, s))
	Must(t, d.StreamSynchronize(s))
	if !bytes.Equal(got, pattern) {
		t.Fatal("MemcpyHtoD + MemcpyDtoDAsync: wrong bytes")
	}

	fives := bytes.Repeat([]byte{5}, n)
	Must(t, d.MemcpyHtoDAsync(a, fives, s))
	Must(t, d.StreamSynchronize(s))
	runtime.KeepAlive(fives) // the contract: alive until the stream has read it
	Must(t, d.Memset(b, 0, n))
	Must(t, d.Memset(b.Add(16), 9, 8))
	Must(t, d.MemcpyDtoH(got, b))
	want := make([]byte, n)
	copy(want[16:24], bytes.Repeat([]byte{9}, 8))
	if !bytes.Equal(got, want) {
		t.Fatal("Memset at an offset: wrong bytes")
	}
	Must(t, d.MemcpyDtoH(got[:4], a))
	if !bytes.Equal(got[:4], []byte{5, 5, 5, 5}) {
		t.Fatalf("MemcpyHtoDAsync: got %v", got[:4])
	}

	Must(t, d.MemcpyHtoD(a, nil))
	Must(t, d.MemcpyDtoH(nil, a))
	WantCode(t, d.Memset(a, 0, -1), hip.ErrInvalidValue, "negative memset")
	_, err := d.Malloc(-5)
	WantCode(t, err, hip.ErrInvalidValue, "negative malloc")
	_, err = d.Malloc(0)
	WantCode(t, err, hip.ErrInvalidValue, "zero-byte malloc")
}

// HostMemory allocates pinned host memory, uses and frees it, registers
// and unregisters host pages, and checks the refusal of empty ranges.
func HostMemory(t *testing.T, k Kit) {
	d := k.Device
	b, err := d.HostAlloc(1 << 16)
	Must(t, err)
	if len(b) != 1<<16 {
		t.Fatalf("HostAlloc(65536) gave %d bytes", len(b))
	}
	for i := range b {
		b[i] = byte(i)
	}
	x := Alloc(t, d, len(b))
	Must(t, d.MemcpyHtoD(x, b))
	got := make([]byte, len(b))
	Must(t, d.MemcpyDtoH(got, x))
	if !bytes.Equal(got, b) {
		t.Fatal("a copy from pinned host memory came back different")
	}
	Must(t, d.HostFree(b))
	_, err = d.HostAlloc(0)
	WantCode(t, err, hip.ErrInvalidValue, "HostAlloc(0)")
	WantCode(t, d.HostFree(nil), hip.ErrInvalidValue, "HostFree(nil)")

	pages, unmap, err := hip.MapHostPages(1 << 16)
	Must(t, err)
	t.Cleanup(func() { Must(t, unmap()) })
	Must(t, d.HostRegister(pages))
	Must(t, d.MemcpyHtoD(x, pages))
	Must(t, d.HostUnregister(pages))
	WantCode(t, d.HostRegister(nil), hip.ErrInvalidValue, "HostRegister(nil)")
	WantCode(t, d.HostUnregister(nil), hip.ErrInvalidValue, "HostUnregister(nil)")
}

// LegacyStream runs a kernel on the legacy default stream and waits for it
// there; the legacy stream is not a stream to destroy or capture on.
func LegacyStream(t *testing.T, k Kit) {
	d := k.Device
	f := LoadFunc(t, d, k.Source(), "inc")
	const n = 256
	x := Alloc(t, d, 4*n)
	Must(t, d.MemcpyHtoD(x, FloatsToBytes(make([]float32, n))))
	Must(t, d.LaunchKernel(f, hip.D1(1), hip.D1(n), 0, hip.StreamLegacy, x, int32(n)))
	Must(t, d.StreamSynchronize(hip.StreamLegacy))
	out := make([]byte, 4*n)
	Must(t, d.MemcpyDtoH(out, x))
	for i, v := range BytesToFloats(out) {
		if v != 1 {
			t.Fatalf("x[%d] = %v after inc on the legacy stream, want 1", i, v)
		}
	}
	if err := d.StreamBeginCapture(hip.StreamLegacy, hip.CaptureModeGlobal); err == nil {
		t.Fatal("a capture began on the legacy stream")
	}
}

// Kernels adds vectors of two sizes, the second load hitting the compile
// cache where the device compiles, then checks the module errors.
func Kernels(t *testing.T, k Kit) {
	hits, _ := gpulib.Programs.Stats()
	VectorAdd(t, k.Device, k.Source(), 1<<20)
	VectorAdd(t, k.Device, k.Source(), 1000)
	if _, ok := k.runtimeDevice(); ok {
		if h, _ := gpulib.Programs.Stats(); h <= hits {
			t.Fatal("the second ModuleLoad of one source did not hit the compile cache")
		}
	}
	ModuleErrors(t, k)
}

// VectorAdd runs vadd from src over n elements and checks every sum.
func VectorAdd(t *testing.T, d hip.Device, src *hip.KernelSource, n int) {
	f := LoadFunc(t, d, src, "vadd")
	av, bv := make([]float32, n), make([]float32, n)
	for i := range av {
		av[i], bv[i] = float32(i), float32(2*i)
	}
	a, b, c := Alloc(t, d, 4*n), Alloc(t, d, 4*n), Alloc(t, d, 4*n)
	Must(t, d.MemcpyHtoD(a, FloatsToBytes(av)))
	Must(t, d.MemcpyHtoD(b, FloatsToBytes(bv)))
	s := NewStream(t, d)
	Must(t, d.LaunchKernel(f, hip.D1(uint32(n+255)/256), hip.D1(256), 0, s, a, b, c, int32(n)))
	Must(t, d.StreamSynchronize(s))
	out := make([]byte, 4*n)
	Must(t, d.MemcpyDtoH(out, c))
	for i, v := range BytesToFloats(out) {
		if v != float32(3*i) {
			t.Fatalf("c[%d] = %v, want %v", i, v, float32(3*i))
		}
	}
}

// prefix is how an error of op with code starts in d's dialect, e.g.
// "hipModuleGetFunction: hipErrorNotFound (500)".
func prefix(d hip.Device, op string, code hip.Code) string {
	return fmt.Sprintf("%s: %s (%d)", hip.CallName(op, d.Dialect()), code.Name(d.Dialect()), int(code))
}

// ModuleErrors checks an unknown or empty kernel name, a source that does
// not compile, a nil source and one without text.
func ModuleErrors(t *testing.T, k Kit) {
	d := k.Device
	m, err := d.ModuleLoad(k.Source())
	Must(t, err)
	defer d.ModuleUnload(m)
	_, err = d.ModuleGetFunction(m, "no_such_kernel")
	WantCode(t, err, hip.ErrNotFound, "unknown kernel")
	if !strings.Contains(err.Error(), `"no_such_kernel"`) || !strings.HasPrefix(err.Error(), prefix(d, "ModuleGetFunction", hip.ErrNotFound)) {
		t.Errorf("error %q does not name the call and the kernel", err)
	}
	_, err = d.ModuleGetFunction(m, "")
	WantCode(t, err, hip.ErrInvalidValue, "empty kernel name")
	_, err = d.ModuleLoad(nil)
	WantCode(t, err, hip.ErrInvalidValue, "nil source")
	if _, ok := k.runtimeDevice(); !ok {
		return // the simulator compiles nothing: what follows is the compiler's
	}

	_, err = d.ModuleLoad(&hip.KernelSource{Name: "broken", Text: "extern \"C\" __global__ void k() {}\n#error broken on purpose\n"})
	WantCode(t, err, hip.ErrInvalidSource, "compile error")
	if msg := err.Error(); !strings.Contains(msg, k.CompileLog) || !strings.Contains(msg, "error") ||
		!strings.HasPrefix(msg, hip.CallName("ModuleLoad", d.Dialect())) {
		t.Errorf("compile error %q lacks the call or the compiler's log (%q)", msg, k.CompileLog)
	}
	_, err = d.ModuleLoad(&hip.KernelSource{Name: "empty", Text: " \n"})
	WantCode(t, err, hip.ErrInvalidValue, "source without text")
	if !strings.Contains(err.Error(), `kernel source "empty" has n`) || !strings.Contains(err.Error(), "text") {
		t.Errorf("message %q", err)
	}
}

// LaunchRejectsArgs passes a Go int, which no kernel parameter is: the
// launch is refused before it reaches the runtime, naming the argument.
func LaunchRejectsArgs(t *testing.T, k Kit) {
	d := k.Device
	f := LoadFunc(t, d, k.Source(), "inc")
	s := NewStream(t, d)
	err := d.LaunchKernel(f, hip.D1(1), hip.D1(1), 0, s, hip.DevPtr(0), 3)
	WantCode(t, err, hip.ErrInvalidValue, "int argument")
	if !strings.Contains(err.Error(), "kernel argument 1 has type int") || !strings.HasPrefix(err.Error(), hip.CallName("LaunchKernel", d.Dialect())) {
		t.Fatalf("message %q", err)
	}
}

// HostFuncOrder enqueues host functions between memsets and checks they
// ran once each, in order, with no ticket left behind. It returns the OS
// thread ids they ran on.
func HostFuncOrder(t *testing.T, k Kit) []int {
	d := k.Device
	before := gpulib.HostFuncs.Stats()
	s := NewStream(t, d)
	x := Alloc(t, d, 64)
	var mu sync.Mutex
	var order, tids []int
	const n = 100
	for i := range n {
		Must(t, d.LaunchHostFunc(s, func() {
			mu.Lock()
			order = append(order, i)
			tids = append(tids, syscall.Gettid())
			mu.Unlock()
		}))
		Must(t, d.MemsetAsync(x, byte(i), 64, s))
	}
	done := make(chan struct{})
	Must(t, d.LaunchHostFunc(s, func() { close(done) }))
	WaitClosed(t, done, "the last host function")
	Must(t, d.StreamSynchronize(s))
	mu.Lock()
	defer mu.Unlock()
	want := make([]int, n)
	for i := range want {
		want[i] = i
	}
	if !slices.Equal(order, want) {
		t.Fatalf("host functions ran in order %v", order)
	}
	if _, ok := k.runtimeDevice(); ok {
		after := gpulib.HostFuncs.Stats()
		if after.Fired-before.Fired != n+1 || after.Stale != before.Stale || after.Unknown != before.Unknown || after.Live != before.Live {
			t.Fatalf("tickets before %+v after %+v", before, after)
		}
	}
	WantCode(t, d.LaunchHostFunc(s, nil), hip.ErrInvalidValue, "nil host function")
	return tids
}

// CaptureReplay captures a kernel and a host function in mode, then
// replays the graph three times on another stream.
func CaptureReplay(t *testing.T, k Kit, mode hip.CaptureMode) {
	d := k.Device
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	live := k.liveTickets()
	f := LoadFunc(t, d, k.Source(), "inc")
	const n = 4096
	x := Alloc(t, d, 4*n)
	Must(t, d.Memset(x, 0, 4*n))
	a, b := NewStream(t, d), NewStream(t, d)
	var ran atomic.Int32

	Must(t, d.StreamBeginCapture(a, mode))
	if st, err := d.StreamIsCapturing(a); err != nil || st != hip.CaptureStatusActive {
		t.Fatalf("IsCapturing during capture: %v %v", st, err)
	}
	Must(t, d.LaunchKernel(f, hip.D1(n/256), hip.D1(256), 0, a, x, int32(n)))
	Must(t, d.LaunchHostFunc(a, func() { ran.Add(1) }))
	g, err := d.StreamEndCapture(a)
	Must(t, err)
	if g == 0 {
		t.Fatal("EndCapture returned no graph")
	}
	ge, err := d.GraphInstantiate(g)
	Must(t, err)
	if ran.Load() != 0 {
		t.Fatal("a captured host function ran during capture")
	}
	for range 3 {
		Must(t, d.GraphLaunch(ge, b))
	}
	Must(t, d.StreamSynchronize(b))
	if ran.Load() != 3 {
		t.Fatalf("captured host function ran %d times over 3 replays", ran.Load())
	}
	out := make([]byte, 4*n)
	Must(t, d.MemcpyDtoH(out, x))
	for i, v := range BytesToFloats(out) {
		if v != 3 {
			t.Fatalf("x[%d] = %v after 3 replays, want 3", i, v)
		}
	}
	Must(t, d.GraphDestroy(g))
	k.tickets(t, 1, live+1, "the executable graph must keep its host function's ticket")
	Must(t, d.GraphExecDestroy(ge))
	k.tickets(t, 0, live, "tickets left behind")
}

// GlobalCaptureRefusal checks cells of the capture rules both runtimes
// share: a query from another thread in global mode breaks a global
// capture, one in relaxed mode does not, enqueueing on an unrelated stream
// does not, and an allocation on the capturing thread does. It returns the
// stream's state after the first failed capture: none on CUDA and on HIP
// with ROCm PR 6509, still invalidated before it (the stream is then
// replaced, as callers must).
func GlobalCaptureRefusal(t *testing.T, k Kit) hip.CaptureStatus {
	d := k.Device
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	f := LoadFunc(t, d, k.Source(), "inc")
	x := Alloc(t, d, 4*256)
	a, other := NewStream(t, d), NewStream(t, d)

	capture := func(during func()) (hip.Graph, error) {
		t.Helper()
		Must(t, d.StreamBeginCapture(a, hip.CaptureModeGlobal))
		Must(t, d.LaunchKernel(f, hip.D1(1), hip.D1(256), 0, a, x, int32(256)))
		during()
		return d.StreamEndCapture(a)
	}
	ok := func(g hip.Graph, err error, cell string) {
		t.Helper()
		if err != nil || g == 0 {
			t.Fatalf("%s: the capture should survive, EndCapture gave %#x, %v", cell, g, err)
		}
		Must(t, d.GraphDestroy(g))
	}

	var queryErr error
	g, err := capture(func() { OnLockedThread(t, func() { queryErr = d.StreamQuery(other) }) })
	WantCode(t, queryErr, hip.ErrStreamCaptureUnsupported, "other thread, global mode, StreamQuery(unrelated stream)")
	WantCode(t, err, hip.ErrStreamCaptureInvalidated, "EndCapture after the refused query")
	if g != 0 {
		t.Fatalf("an invalidated capture returned graph %#x", g)
	}
	after := MustStatus(t, d, a)
	switch after {
	case hip.CaptureStatusNone:
		Must(t, d.StreamQuery(a))
	case hip.CaptureStatusInvalidated:
		WantCode(t, d.StreamQuery(a), hip.ErrStreamCaptureUnsupported, "query of a stream left invalidated")
		a = NewStream(t, d)
	default:
		t.Fatalf("stream status after the failed capture: %v", after)
	}

	g, err = capture(func() {
		OnLockedThread(t, func() {
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
		OnLockedThread(t, func() {
			if enqueueErr = d.LaunchHostFunc(other, func() { close(hostRan) }); enqueueErr == nil {
				enqueueErr = d.MemsetAsync(x, 0, 4, other)
			}
		})
	})
	Must(t, enqueueErr)
	ok(g, err, "enqueue on an unrelated stream from another thread")
	WaitClosed(t, hostRan, "the host function on the unrelated stream")

	var mallocErr error
	g, err = capture(func() { _, mallocErr = d.Malloc(64) })
	WantCode(t, mallocErr, hip.ErrStreamCaptureUnsupported, "same thread, global mode, Malloc")
	WantCode(t, err, hip.ErrStreamCaptureInvalidated, "EndCapture after the refused Malloc")
	if g != 0 {
		t.Fatalf("a capture invalidated by Malloc returned graph %#x", g)
	}
	Must(t, d.StreamSynchronize(other))
	return after
}

// EndCaptureFromAnotherThread ends a thread-local capture that holds a
// host function from a thread that did not begin it. Both runtimes refuse
// with 908; CUDA tears the capture down, so its ticket must go, while HIP
// leaves it active for its own thread, so the ticket must stay and fire on
// replay. It returns the status the stream showed after the 908.
func EndCaptureFromAnotherThread(t *testing.T, k Kit) hip.CaptureStatus {
	d := k.Device
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	live := k.liveTickets()
	s, replay := NewStream(t, d), NewStream(t, d)
	var ran atomic.Int32
	Must(t, d.StreamBeginCapture(s, hip.CaptureModeThreadLocal))
	Must(t, d.LaunchHostFunc(s, func() { ran.Add(1) }))
	var otherErr error
	OnLockedThread(t, func() { _, otherErr = d.StreamEndCapture(s) })
	WantCode(t, otherErr, hip.ErrStreamCaptureWrongThread, "EndCapture from another thread")
	after := MustStatus(t, d, s)
	switch after {
	case hip.CaptureStatusActive:
		k.tickets(t, 1, live+1, "the capture goes on")
		g, err := d.StreamEndCapture(s)
		Must(t, err)
		ge, err := d.GraphInstantiate(g)
		Must(t, err)
		Must(t, d.GraphDestroy(g))
		stale := gpulib.HostFuncs.Stats().Stale
		Must(t, d.GraphLaunch(ge, replay))
		Must(t, d.StreamSynchronize(replay))
		if ran.Load() != 1 || gpulib.HostFuncs.Stats().Stale != stale {
			t.Fatalf("replay ran the host function %d times (stale fires %d)", ran.Load(), gpulib.HostFuncs.Stats().Stale-stale)
		}
		Must(t, d.GraphExecDestroy(ge))
	case hip.CaptureStatusNone:
		_, err := d.StreamEndCapture(s)
		WantCode(t, err, hip.ErrIllegalState, "EndCapture of a capture torn down")
		if ran.Load() != 0 {
			t.Fatal("the host function of a torn-down capture ran")
		}
	default:
		t.Fatalf("stream status after a wrong-thread EndCapture: %v", after)
	}
	k.tickets(t, 0, live, "after the capture")
	return after
}

// ThreadExchange checks the per-thread mode exchange, WithCaptureMode's
// restore, and that modes outside the three are refused before they reach
// the runtime.
func ThreadExchange(t *testing.T, d hip.Device) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	prev, err := d.ThreadExchangeCaptureMode(hip.CaptureModeRelaxed)
	Must(t, err)
	if prev != hip.CaptureModeGlobal {
		t.Fatalf("a thread starts in %v mode, want global", prev)
	}
	got, err := d.ThreadExchangeCaptureMode(hip.CaptureModeThreadLocal)
	Must(t, err)
	if got != hip.CaptureModeRelaxed {
		t.Fatalf("exchange returned %v, want relaxed", got)
	}
	Must(t, hip.WithCaptureMode(d, hip.CaptureModeRelaxed, func() error {
		inner, err := d.ThreadExchangeCaptureMode(hip.CaptureModeRelaxed)
		if err == nil && inner != hip.CaptureModeRelaxed {
			t.Errorf("inside WithCaptureMode the mode is %v", inner)
		}
		return err
	}))
	got, err = d.ThreadExchangeCaptureMode(prev)
	Must(t, err)
	if got != hip.CaptureModeThreadLocal {
		t.Fatalf("WithCaptureMode did not restore thread-local: %v", got)
	}
	for _, bad := range []hip.CaptureMode{-1, 3, 7} {
		_, err = d.ThreadExchangeCaptureMode(bad)
		WantCode(t, err, hip.ErrInvalidValue, fmt.Sprintf("ThreadExchangeCaptureMode(%d)", int(bad)))
	}
	got, err = d.ThreadExchangeCaptureMode(prev)
	Must(t, err)
	if got != prev {
		t.Fatalf("a refused exchange changed the thread's mode to %v", got)
	}
	s := NewStream(t, d)
	WantCode(t, d.StreamBeginCapture(s, hip.CaptureMode(7)), hip.ErrInvalidValue, "StreamBeginCapture(mode 7)")
	if st, err := d.StreamIsCapturing(s); err != nil || st != hip.CaptureStatusNone {
		t.Fatalf("after a refused begin: %v %v", st, err)
	}
}

// HostFuncLaunchFailureForgetsTicket launches a host function on an
// invalidated capture: the launch fails, and its ticket must not stay
// behind.
func HostFuncLaunchFailureForgetsTicket(t *testing.T, k Kit) {
	d := k.Device
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	s := NewStream(t, d)
	live := k.liveTickets()
	Must(t, d.StreamBeginCapture(s, hip.CaptureModeGlobal))
	WantCode(t, d.StreamQuery(s), hip.ErrStreamCaptureUnsupported, "query of the capturing stream")
	var ran atomic.Bool
	WantCode(t, d.LaunchHostFunc(s, func() { ran.Store(true) }), hip.ErrStreamCaptureInvalidated, "host function on an invalidated capture")
	g, err := d.StreamEndCapture(s)
	WantCode(t, err, hip.ErrStreamCaptureInvalidated, "end of an invalidated capture")
	if g != 0 || ran.Load() {
		t.Fatalf("graph %#x, host function ran %v", g, ran.Load())
	}
	k.tickets(t, 0, live, "after the failed launch")
	if st := MustStatus(t, d, s); st != hip.CaptureStatusNone {
		t.Fatalf("stream status %v after EndCapture", st)
	}
}

// CloseWaitsForWork closes d while a host function runs: Close returns
// only after it has, a second Close does nothing, and every later call is
// refused with closed, the runtime's code for a closed device.
func CloseWaitsForWork(t *testing.T, d hip.Device, closed hip.Code) {
	s, err := d.StreamCreate(hip.StreamNonBlocking)
	Must(t, err)
	started, gate := make(chan struct{}), make(chan struct{})
	var gateOnce sync.Once
	openGate := func() { gateOnce.Do(func() { close(gate) }) }
	t.Cleanup(openGate)
	var finished atomic.Bool
	go func() {
		<-started
		openGate()
	}()
	Must(t, d.LaunchHostFunc(s, func() {
		close(started)
		<-gate
		finished.Store(true)
	}))
	Must(t, d.Close())
	if !finished.Load() {
		t.Fatal("Close returned before the pending host function finished")
	}
	Must(t, d.Close())
	_, err = d.Malloc(16)
	WantCode(t, err, closed, "Malloc after Close")
	if !strings.Contains(err.Error(), "the device is closed") {
		t.Fatalf("message %q", err)
	}
	WantCode(t, d.StreamDestroy(s), closed, "StreamDestroy after Close")
	_, err = d.ThreadExchangeCaptureMode(hip.CaptureModeRelaxed)
	WantCode(t, err, closed, "ThreadExchangeCaptureMode after Close")
}

// AllocFreeOnFreshThreads allocates and frees from many locked threads,
// calling reset before every call to leave the thread without the device
// current (as on a thread that never called in); the backend must make it
// current again each time.
func AllocFreeOnFreshThreads(t *testing.T, d hip.Device, workers, iters int, reset func()) {
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			for range iters {
				reset()
				p, err := d.Malloc(64)
				if err == nil {
					reset()
					err = d.Free(p)
				}
				if err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}
