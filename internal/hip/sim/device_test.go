package sim_test

import (
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"miotool/internal/hip"
	"miotool/internal/hip/sim"
)

func TestNewAndProps(t *testing.T) {
	for _, tc := range []struct {
		dialect hip.Dialect
		warp    int
		name    string
	}{
		{"", 32, "miotool simulated device (cuda rules)"},
		{hip.DialectCUDA, 32, "miotool simulated device (cuda rules)"},
		{hip.DialectHIP, 64, "miotool simulated device (hip rules)"},
	} {
		d := newDevice(t, tc.dialect, 3)
		p := d.Props()
		if p.Backend != "sim" || p.Name != tc.name || p.Arch != "sim" || p.WarpSize != tc.warp ||
			p.ComputeUnits != runtime.NumCPU() || p.ClockKHz != 1_000_000 || p.RuntimeVersion != "sim-1" ||
			p.DriverVersion != runtime.Version() {
			t.Errorf("dialect %q: props %+v", tc.dialect, p)
		}
		if d.HWQueues() != 3 || d.Libraries() != nil {
			t.Errorf("dialect %q: %d queues, libraries %v", tc.dialect, d.HWQueues(), d.Libraries())
		}
	}
	for _, bad := range []hip.OpenOptions{{Dialect: "metal"}, {Ordinal: 1}, {HWQueues: -1}, {HWQueues: 1 << 20}} {
		if d, err := sim.New(bad); err == nil {
			_ = d.Close()
			t.Errorf("New(%+v) succeeded", bad)
		} else if !strings.Contains(err.Error(), ":") {
			t.Errorf("New(%+v): unclear error %q", bad, err)
		}
	}
}

func TestHWQueuesFromEnvironment(t *testing.T) {
	t.Setenv(hip.EnvHWQueues, "2")
	if got := newDevice(t, "", 0).HWQueues(); got != 2 {
		t.Errorf("GPU_MAX_HW_QUEUES=2 gave %d queues", got)
	}
	t.Setenv(hip.EnvHWQueues, "junk")
	if got := newDevice(t, "", 0).HWQueues(); got != hip.DefaultHWQueues {
		t.Errorf("GPU_MAX_HW_QUEUES=junk gave %d queues", got)
	}
}

func TestRegisteredBackend(t *testing.T) {
	d, sel, err := hip.Select("sim", hip.OpenOptions{Dialect: hip.DialectHIP})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if sel.Chosen != "sim" || d.Props().Backend != "sim" || d.Dialect() != hip.DialectHIP {
		t.Errorf("selection %+v, props %+v", sel, d.Props())
	}
}

func TestErrorsNameOpAndDialect(t *testing.T) {
	d := newDevice(t, hip.DialectHIP, 0)
	err := d.Free(12345)
	var he *hip.Error
	if !errors.As(err, &he) || he.Op != "Free" || he.Code != hip.ErrInvalidValue || he.Dialect != hip.DialectHIP {
		t.Fatalf("Free of an unknown pointer: %#v", err)
	}
	if !strings.HasPrefix(err.Error(), "hipFree: hipErrorInvalidValue (1): ") {
		t.Errorf("message %q", err)
	}
	err = d.StreamQuery(0)
	if !errors.As(err, &he) || he.Op != "StreamQuery" || he.Code != hip.ErrInvalidHandle {
		t.Errorf("StreamQuery(0): %v", err)
	}
}

// TestHostFunctionsSerialized: host functions of several streams run one
// at a time, each stream's in order.
func TestHostFunctionsSerialized(t *testing.T) {
	d := newDevice(t, "", 8)
	const streams, perStream = 4, 25
	var running, maxRunning atomic.Int32
	var mu sync.Mutex
	order := make([][]int, streams)
	var ss []hip.Stream
	for range streams {
		ss = append(ss, must1[hip.Stream](t)(d.StreamCreate(hip.StreamNonBlocking)))
	}
	for i := range perStream {
		for si, s := range ss {
			must(t, d.LaunchHostFunc(s, func() {
				n := running.Add(1)
				for {
					m := maxRunning.Load()
					if n <= m || maxRunning.CompareAndSwap(m, n) {
						break
					}
				}
				runtime.Gosched() // widen the window in which a second one could start
				mu.Lock()
				order[si] = append(order[si], i)
				mu.Unlock()
				running.Add(-1)
			}))
		}
	}
	within(t, "device synchronize", func() { must(t, d.DeviceSynchronize()) })
	if m := maxRunning.Load(); m != 1 {
		t.Errorf("at most %d host functions ran at once, want 1", m)
	}
	for si, o := range order {
		if len(o) != perStream {
			t.Fatalf("stream %d ran %d host functions, want %d", si, len(o), perStream)
		}
		for i, v := range o {
			if v != i {
				t.Fatalf("stream %d ran its host functions in order %v", si, o)
			}
		}
	}
}

// TestHostFunctionHoldsStream: work after a host function on the same
// stream does not start before the function returns.
func TestHostFunctionHoldsStream(t *testing.T) {
	d := newDevice(t, "", 0)
	k := loadKernels(t, d, 1)
	s := must1[hip.Stream](t)(d.StreamCreate(0))
	inside, release := make(chan struct{}), newGate(t)
	var returned atomic.Bool
	must(t, d.LaunchHostFunc(s, func() {
		close(inside)
		<-release.ch // test-only: a real host function must not block
		returned.Store(true)
	}))
	must(t, d.LaunchKernel(k.hold, hip.D1(1), hip.D1(1), 0, s, int32(0)))
	k.gates[0].open()
	recv(t, "host function start", inside)
	wantCode(t, "query while the host function runs", d.StreamQuery(s), hip.ErrNotReady)
	select {
	case <-k.started:
		t.Fatal("the kernel after the host function started before it returned")
	default:
	}
	release.open()
	recv(t, "kernel start", k.started)
	if !returned.Load() {
		t.Fatal("the kernel started before the host function returned")
	}
	within(t, "stream synchronize", func() { must(t, d.StreamSynchronize(s)) })
}

// TestHWQueueSerialization: with 2 queues the third stream shares queue 0
// with the first, so its kernel waits for the first's; with 4 queues all
// three kernels run at once.
func TestHWQueueSerialization(t *testing.T) {
	t.Run("Q=2", func(t *testing.T) {
		d := newDevice(t, "", 2)
		k := loadKernels(t, d, 3)
		var ss []hip.Stream
		for i := range 3 {
			s := must1[hip.Stream](t)(d.StreamCreate(hip.StreamNonBlocking))
			if q := must1[int](t)(d.StreamQueue(s)); q != []int{0, 1, 0}[i] {
				t.Fatalf("stream %d is on queue %d", i, q)
			}
			ss = append(ss, s)
		}
		for i, s := range ss {
			must(t, d.LaunchKernel(k.hold, hip.D1(1), hip.D1(1), 0, s, int32(i)))
		}
		first := map[int32]bool{recv(t, "first start", k.started): true, recv(t, "second start", k.started): true}
		if !first[0] || !first[1] {
			t.Fatalf("the first two kernels to start were %v, want streams 0 and 1", first)
		}
		// Stream 1 has a queue of its own: it finishes while stream 2
		// still waits behind stream 0.
		k.gates[1].open()
		if got := recv(t, "stream 1 end", k.ended); got != 1 {
			t.Fatalf("kernel %d ended, want 1", got)
		}
		within(t, "sync stream 1", func() { must(t, d.StreamSynchronize(ss[1])) })
		select {
		case i := <-k.started:
			t.Fatalf("kernel %d started while stream 0 held the shared queue", i)
		default:
		}
		k.gates[2].open()
		k.gates[0].open()
		if got := recv(t, "stream 0 end", k.ended); got != 0 {
			t.Fatalf("kernel %d ended, want 0", got)
		}
		if got := recv(t, "stream 2 start", k.started); got != 2 {
			t.Fatalf("kernel %d started, want 2", got)
		}
		within(t, "device sync", func() { must(t, d.DeviceSynchronize()) })
	})
	t.Run("Q=4", func(t *testing.T) {
		d := newDevice(t, "", 4)
		k := loadKernels(t, d, 3)
		for i := range 3 {
			s := must1[hip.Stream](t)(d.StreamCreate(hip.StreamNonBlocking))
			must(t, d.LaunchKernel(k.hold, hip.D1(1), hip.D1(1), 0, s, int32(i)))
		}
		got := map[int32]bool{}
		for range 3 {
			got[recv(t, "start with every gate closed", k.started)] = true
		}
		if len(got) != 3 {
			t.Fatalf("started %v", got)
		}
		for _, g := range k.gates {
			g.open()
		}
		within(t, "device sync", func() { must(t, d.DeviceSynchronize()) })
	})
}

// TestEventsAndElapsedTime: an event is pending until its stream reaches
// it; elapsed time is positive, ordered and at least what the kernel took.
func TestEventsAndElapsedTime(t *testing.T) {
	const work = 5 * time.Millisecond
	d := newDevice(t, "", 0)
	m := must1[hip.Module](t)(d.ModuleLoad(&hip.KernelSource{
		Name:    "timing",
		Kernels: []string{"busy"},
		Twins: map[string]hip.GoKernel{"busy": func(hip.Memory, hip.Dim3, hip.Dim3, []hip.KernelArg) error {
			time.Sleep(work) // the kernel's work: it takes measurable time
			return nil
		}},
	}))
	busy := must1[hip.Function](t)(d.ModuleGetFunction(m, "busy"))
	k := loadKernels(t, d, 1)
	s := must1[hip.Stream](t)(d.StreamCreate(0))
	start := must1[hip.Event](t)(d.EventCreate(0))
	mid := must1[hip.Event](t)(d.EventCreate(0))
	stop := must1[hip.Event](t)(d.EventCreate(hip.EventBlockingSync))
	noTiming := must1[hip.Event](t)(d.EventCreate(hip.EventDisableTiming))
	never := must1[hip.Event](t)(d.EventCreate(0))

	must(t, d.EventQuery(never)) // never recorded: complete
	must(t, d.LaunchKernel(k.hold, hip.D1(1), hip.D1(1), 0, s, int32(0)))
	must(t, d.EventRecord(start, s))
	must(t, d.LaunchKernel(busy, hip.D1(1), hip.D1(1), 0, s))
	must(t, d.EventRecord(mid, s))
	must(t, d.LaunchKernel(busy, hip.D1(1), hip.D1(1), 0, s))
	must(t, d.EventRecord(stop, s))
	must(t, d.EventRecord(noTiming, s))

	wantCode(t, "query before completion", d.EventQuery(stop), hip.ErrNotReady)
	_, err := d.EventElapsedTime(start, stop)
	wantCode(t, "elapsed before completion", err, hip.ErrNotReady)
	k.gates[0].open()
	within(t, "event synchronize", func() { must(t, d.EventSynchronize(stop)) })
	must(t, d.EventQuery(stop))

	total := must1[float32](t)(d.EventElapsedTime(start, stop))
	part := must1[float32](t)(d.EventElapsedTime(start, mid))
	back := must1[float32](t)(d.EventElapsedTime(stop, start))
	if part < float32(work.Milliseconds()) || total < 2*float32(work.Milliseconds()) || part > total || back != -total {
		t.Errorf("elapsed start-mid %.3f ms, start-stop %.3f ms, stop-start %.3f ms (work %v per kernel)", part, total, back, work)
	}
	_, err = d.EventElapsedTime(start, noTiming)
	wantCode(t, "elapsed with a no-timing event", err, hip.ErrInvalidHandle)
	_, err = d.EventElapsedTime(never, stop)
	wantCode(t, "elapsed with a never-recorded event", err, hip.ErrInvalidHandle)

	// Re-recording resets the event.
	k2 := loadKernels(t, d, 1)
	must(t, d.LaunchKernel(k2.hold, hip.D1(1), hip.D1(1), 0, s, int32(0)))
	must(t, d.EventRecord(stop, s))
	wantCode(t, "query after re-record", d.EventQuery(stop), hip.ErrNotReady)
	k2.gates[0].open()
	within(t, "event synchronize", func() { must(t, d.EventSynchronize(stop)) })
	must(t, d.EventDestroy(stop))
	wantCode(t, "query of a destroyed event", d.EventQuery(stop), hip.ErrInvalidHandle)
	_, err = d.EventCreate(0x80)
	wantCode(t, "bad event flags", err, hip.ErrInvalidValue)
}

// TestStreamWaitEvent: a stream waits for another stream's event.
func TestStreamWaitEvent(t *testing.T) {
	d := newDevice(t, "", 0)
	k := loadKernels(t, d, 2)
	a := must1[hip.Stream](t)(d.StreamCreate(0))
	b := must1[hip.Stream](t)(d.StreamCreate(0))
	ev := must1[hip.Event](t)(d.EventCreate(0))
	must(t, d.LaunchKernel(k.hold, hip.D1(1), hip.D1(1), 0, a, int32(0)))
	must(t, d.EventRecord(ev, a))
	must(t, d.StreamWaitEvent(b, ev))
	must(t, d.LaunchKernel(k.hold, hip.D1(1), hip.D1(1), 0, b, int32(1)))
	k.gates[1].open()
	if got := recv(t, "a's kernel", k.started); got != 0 {
		t.Fatalf("kernel %d started first", got)
	}
	wantCode(t, "b waits", d.StreamQuery(b), hip.ErrNotReady)
	k.gates[0].open()
	if got := recv(t, "b's kernel", k.started); got != 1 {
		t.Fatalf("kernel %d started second", got)
	}
	within(t, "device sync", func() { must(t, d.DeviceSynchronize()) })
}

// TestGraphReplay: a vector add captured once replays three times on
// another stream with the right numbers; host slices are read at each
// replay and kernel arguments keep their captured values.
func TestGraphReplay(t *testing.T) {
	const n = 1024
	th := startThread(t)
	d := newDevice(t, "", 0)
	k := loadKernels(t, d, 0)
	a := must1[hip.DevPtr](t)(d.Malloc(4 * n))
	b := must1[hip.DevPtr](t)(d.Malloc(4 * n))
	c := must1[hip.DevPtr](t)(d.Malloc(4 * n))
	capS := must1[hip.Stream](t)(d.StreamCreate(hip.StreamNonBlocking))
	replayS := must1[hip.Stream](t)(d.StreamCreate(hip.StreamNonBlocking))
	hostA, hostB, out := make([]byte, 4*n), make([]byte, 4*n), make([]byte, 4*n)
	var hostCalls atomic.Int32
	done := must1[hip.Event](t)(d.EventCreate(0))

	var g hip.Graph
	th.do(t, "capture", func() {
		must(t, d.StreamBeginCapture(capS, global))
		must(t, d.MemcpyHtoDAsync(a, hostA, capS))
		must(t, d.MemcpyHtoDAsync(b, hostB, capS))
		args := []hip.KernelArg{a, b, c, int32(n)}
		must(t, d.LaunchKernel(k.vecadd, hip.D1(n/256), hip.D1(256), 0, capS, args...))
		args[3] = int32(0) // must not reach the captured launch
		must(t, d.MemcpyDtoHAsync(out, c, capS))
		must(t, d.LaunchHostFunc(capS, func() { hostCalls.Add(1) }))
		must(t, d.EventRecord(done, capS))
		g = must1[hip.Graph](t)(d.StreamEndCapture(capS))
	})
	if hostCalls.Load() != 0 {
		t.Fatal("captured work ran during capture")
	}
	ge := must1[hip.GraphExec](t)(d.GraphInstantiate(g))
	must(t, d.GraphDestroy(g))
	for r := range 3 {
		va, vb := make([]float32, n), make([]float32, n)
		for i := range va {
			va[i], vb[i] = float32(i*(r+1)), float32(1000*r)+0.5
		}
		copy(hostA, float32Bytes(va))
		copy(hostB, float32Bytes(vb))
		must(t, d.GraphLaunch(ge, replayS))
		within(t, "replay", func() { must(t, d.EventSynchronize(done)) })
		got := bytesFloat32(out)
		for i := range got {
			if got[i] != va[i]+vb[i] {
				t.Fatalf("replay %d: c[%d] = %v, want %v", r, i, got[i], va[i]+vb[i])
			}
		}
		if hostCalls.Load() != int32(r+1) {
			t.Fatalf("after replay %d the host node ran %d times", r, hostCalls.Load())
		}
	}
	must(t, d.GraphExecDestroy(ge))
	wantCode(t, "launch of a destroyed graph", d.GraphLaunch(ge, replayS), hip.ErrInvalidHandle)
}

// TestIllegalAddressIsSticky: a kernel that runs past its buffer fails the
// launch with an illegal address, and the device stays faulted.
func TestIllegalAddressIsSticky(t *testing.T) {
	d := newDevice(t, "", 0)
	k := loadKernels(t, d, 0)
	s := must1[hip.Stream](t)(d.StreamCreate(0))
	other := must1[hip.Stream](t)(d.StreamCreate(0))
	p := must1[hip.DevPtr](t)(d.Malloc(100))
	ev := must1[hip.Event](t)(d.EventCreate(0))
	must(t, d.LaunchKernel(k.poke, hip.D1(1), hip.D1(1), 0, s, p, int32(100))) // in range
	must(t, d.LaunchKernel(k.poke, hip.D1(1), hip.D1(1), 0, s, p, int32(101))) // one byte past
	var ran atomic.Bool
	// The faulting kernel may already have run: then the launch itself
	// reports the sticky fault, as the real runtime's does.
	if err := d.LaunchHostFunc(s, func() { ran.Store(true) }); err != nil {
		wantCode(t, "host function launched after the fault", err, hip.ErrIllegalAddress)
	}
	within(t, "sync", func() { wantCode(t, "sync after the fault", d.StreamSynchronize(s), hip.ErrIllegalAddress) })
	if ran.Load() {
		t.Error("a host function ran after the device faulted")
	}
	wantCode(t, "query of another stream", d.StreamQuery(other), hip.ErrIllegalAddress)
	wantCode(t, "event query", d.EventQuery(ev), hip.ErrIllegalAddress)
	wantCode(t, "event sync", d.EventSynchronize(ev), hip.ErrIllegalAddress)
	wantCode(t, "launch", d.LaunchKernel(k.tiny, hip.D1(1), hip.D1(1), 0, other), hip.ErrIllegalAddress)
	wantCode(t, "device sync", d.DeviceSynchronize(), hip.ErrIllegalAddress)
	if err := d.StreamQuery(other); !strings.Contains(err.Error(), "past the end") {
		t.Errorf("the sticky error does not say what faulted: %v", err)
	}

	// A freed buffer faults the same way, on a fresh device.
	d2 := newDevice(t, "", 0)
	k2 := loadKernels(t, d2, 0)
	s2 := must1[hip.Stream](t)(d2.StreamCreate(0))
	q := must1[hip.DevPtr](t)(d2.Malloc(64))
	must(t, d2.Free(q))
	must(t, d2.LaunchKernel(k2.poke, hip.D1(1), hip.D1(1), 0, s2, q, int32(1)))
	within(t, "sync", func() { wantCode(t, "use after free", d2.StreamSynchronize(s2), hip.ErrIllegalAddress) })
}

func TestMemory(t *testing.T) {
	d := newDevice(t, "", 0)
	var ptrs []hip.DevPtr
	for _, n := range []int{1, 255, 256, 1000} {
		p := must1[hip.DevPtr](t)(d.Malloc(n))
		if p == 0 || p%256 != 0 {
			t.Errorf("Malloc(%d) = %#x, not 256-byte aligned", n, uint64(p))
		}
		ptrs = append(ptrs, p)
	}
	src := []byte("simulated device memory")
	must(t, d.MemcpyHtoD(ptrs[3], src))
	must(t, d.Memset(ptrs[3].Add(len(src)), 'x', 3))
	back := make([]byte, len(src)+3)
	must(t, d.MemcpyDtoH(back, ptrs[3]))
	if string(back) != string(src)+"xxx" {
		t.Errorf("read back %q", back)
	}
	wantCode(t, "copy past the end", d.MemcpyHtoD(ptrs[1], make([]byte, 256)), hip.ErrInvalidValue)
	wantCode(t, "memset of a bad address", d.Memset(1, 0, 1), hip.ErrInvalidValue)
	for _, n := range []int{0, -1} {
		_, err := d.Malloc(n)
		wantCode(t, fmt.Sprintf("Malloc(%d)", n), err, hip.ErrInvalidValue)
	}
	_, err := d.Malloc(sim.TotalMemory + 1)
	wantCode(t, "Malloc beyond the device", err, hip.ErrOutOfMemory)
	wantCode(t, "free of an interior pointer", d.Free(ptrs[3].Add(8)), hip.ErrInvalidValue)
	must(t, d.Free(ptrs[3]))
	wantCode(t, "double free", d.Free(ptrs[3]), hip.ErrInvalidValue)

	// Async copies through a stream.
	s := must1[hip.Stream](t)(d.StreamCreate(0))
	out := make([]byte, 4)
	must(t, d.MemcpyHtoDAsync(ptrs[0], []byte{9}, s))
	must(t, d.MemsetAsync(ptrs[2], 5, 4, s))
	must(t, d.MemcpyDtoDAsync(ptrs[2], ptrs[0], 1, s))
	must(t, d.MemcpyDtoHAsync(out, ptrs[2], s))
	within(t, "sync", func() { must(t, d.StreamSynchronize(s)) })
	if string(out) != "\x09\x05\x05\x05" {
		t.Errorf("async copies gave %v", out)
	}
	wantCode(t, "async copy past the end", d.MemcpyDtoDAsync(ptrs[0], ptrs[2], 2, s), hip.ErrInvalidValue)
}

// TestFreeWaitsForEveryStream: Free returns only once the device's streams
// have drained, even for an unrelated buffer.
func TestFreeWaitsForEveryStream(t *testing.T) {
	d := newDevice(t, "", 0)
	k := loadKernels(t, d, 1)
	s := must1[hip.Stream](t)(d.StreamCreate(0))
	p := must1[hip.DevPtr](t)(d.Malloc(16))
	must(t, d.LaunchKernel(k.hold, hip.D1(1), hip.D1(1), 0, s, int32(0)))
	recv(t, "kernel start", k.started)
	calling, freed := make(chan struct{}), make(chan error, 1)
	go func() {
		close(calling)
		freed <- d.Free(p)
	}()
	recv(t, "free goroutine", calling)
	// A Free that does not wait returns within microseconds; this window
	// only gives it the chance to show. A correct Free passes whatever the
	// scheduling, because the check after the gate opens is exact.
	select {
	case err := <-freed:
		t.Fatalf("Free returned (%v) while a stream was busy", err)
	case <-time.After(50 * time.Millisecond):
	}
	k.gates[0].open()
	must(t, recv(t, "free", freed))
	select {
	case <-k.ended:
	default:
		t.Fatal("Free returned before the busy kernel ended")
	}
}

func TestModulesAndLaunchValidation(t *testing.T) {
	d := newDevice(t, "", 0)
	_, err := d.ModuleLoad(&hip.KernelSource{Name: "half", Kernels: []string{"a", "b"},
		Twins: map[string]hip.GoKernel{"a": func(hip.Memory, hip.Dim3, hip.Dim3, []hip.KernelArg) error { return nil }}})
	wantCode(t, "load without a twin", err, hip.ErrInvalidImage)
	if !strings.Contains(err.Error(), `"b"`) {
		t.Errorf("the error does not name the missing twin: %v", err)
	}
	_, err = d.ModuleLoad(nil)
	wantCode(t, "load nil", err, hip.ErrInvalidValue)

	k := loadKernels(t, d, 0)
	m := must1[hip.Module](t)(d.ModuleLoad(k.source()))
	_, err = d.ModuleGetFunction(m, "missing")
	wantCode(t, "unknown function", err, hip.ErrNotFound)
	f := must1[hip.Function](t)(d.ModuleGetFunction(m, "tiny"))
	s := must1[hip.Stream](t)(d.StreamCreate(0))
	for _, tc := range []struct {
		name        string
		grid, block hip.Dim3
		args        []hip.KernelArg
		want        hip.Code
	}{
		{"zero grid", hip.Dim3{X: 0, Y: 1, Z: 1}, hip.D1(1), nil, hip.ErrInvalidValue},
		{"zero block", hip.D1(1), hip.Dim3{X: 1, Y: 0, Z: 1}, nil, hip.ErrInvalidValue},
		{"int arg", hip.D1(1), hip.D1(1), []hip.KernelArg{1}, hip.ErrInvalidValue},
		{"string arg", hip.D1(1), hip.D1(1), []hip.KernelArg{"x"}, hip.ErrInvalidValue},
		{"every allowed type", hip.D1(1), hip.D1(1),
			[]hip.KernelArg{hip.DevPtr(1), int32(1), uint32(1), int64(1), uint64(1), float32(1), float64(1)}, hip.Success},
	} {
		wantCode(t, tc.name, d.LaunchKernel(f, tc.grid, tc.block, 0, s, tc.args...), tc.want)
	}
	wantCode(t, "launch on stream 0", d.LaunchKernel(f, hip.D1(1), hip.D1(1), 0, 0), hip.ErrInvalidHandle)
	must(t, d.ModuleUnload(m))
	wantCode(t, "launch of an unloaded function", d.LaunchKernel(f, hip.D1(1), hip.D1(1), 0, s), hip.ErrInvalidHandle)
	wantCode(t, "host func nil", d.LaunchHostFunc(s, nil), hip.ErrInvalidValue)
	_, err = d.StreamCreate(0x10)
	wantCode(t, "bad stream flags", err, hip.ErrInvalidValue)
	must(t, d.StreamDestroy(s))
	wantCode(t, "query of a destroyed stream", d.StreamQuery(s), hip.ErrInvalidHandle)
}

// TestClosedDevice: calls after Close fail with ErrDeinitialized.
func TestClosedDevice(t *testing.T) {
	d := newDevice(t, "", 0)
	s := must1[hip.Stream](t)(d.StreamCreate(0))
	must(t, d.Close())
	must(t, d.Close())
	wantCode(t, "query after close", d.StreamQuery(s), hip.ErrDeinitialized)
	_, err := d.Malloc(1)
	wantCode(t, "malloc after close", err, hip.ErrDeinitialized)
}

// TestNoGoroutineLeak: Close stops every goroutine the device started,
// including a host function still held by the fault injector.
func TestNoGoroutineLeak(t *testing.T) {
	before := runtime.NumGoroutine()
	d, err := sim.New(hip.OpenOptions{HWQueues: 2})
	if err != nil {
		t.Fatal(err)
	}
	k := newGatedKernels(t, 1)
	m := must1[hip.Module](t)(d.ModuleLoad(k.source()))
	hold := must1[hip.Function](t)(d.ModuleGetFunction(m, "hold"))
	_ = d.Faults().HoldHostFuncs()
	for i := range 5 {
		s := must1[hip.Stream](t)(d.StreamCreate(0))
		must(t, d.LaunchHostFunc(s, func() {}))
		if i == 0 {
			must(t, d.LaunchKernel(hold, hip.D1(1), hip.D1(1), 0, s, int32(0)))
		}
		if i == 4 {
			must(t, d.StreamDestroy(s))
		}
	}
	k.gates[0].open()
	within(t, "close", func() { must(t, d.Close()) })
	deadline := time.Now().Add(waitLimit)
	for runtime.NumGoroutine() > before {
		if time.Now().After(deadline) {
			t.Fatalf("%d goroutines after Close, %d before", runtime.NumGoroutine(), before)
		}
		time.Sleep(time.Millisecond) // polling for exits that Close already waited for
	}
}

// TestKernelFailuresAreSticky: a twin that fails or panics is a launch
// failure that poisons the device; the message says which kernel.
func TestKernelFailuresAreSticky(t *testing.T) {
	for _, tc := range []struct {
		name string
		twin hip.GoKernel
		want string
	}{
		{"error", func(hip.Memory, hip.Dim3, hip.Dim3, []hip.KernelArg) error { return errors.New("bad tile") }, "kernel bad.k: bad tile"},
		{"panic", func(hip.Memory, hip.Dim3, hip.Dim3, []hip.KernelArg) error { panic("index out of range") }, "kernel bad.k: panicked: index out of range"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := newDevice(t, "", 0)
			m := must1[hip.Module](t)(d.ModuleLoad(&hip.KernelSource{Name: "bad", Kernels: []string{"k"},
				Twins: map[string]hip.GoKernel{"k": tc.twin}}))
			f := must1[hip.Function](t)(d.ModuleGetFunction(m, "k"))
			s := must1[hip.Stream](t)(d.StreamCreate(0))
			must(t, d.LaunchKernel(f, hip.D1(1), hip.D1(1), 0, s))
			var err error
			within(t, "sync", func() { err = d.StreamSynchronize(s) })
			wantCode(t, "sync", err, hip.ErrLaunchFailure)
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("message %q does not contain %q", err, tc.want)
			}
			wantCode(t, "later launch", d.LaunchKernel(f, hip.D1(1), hip.D1(1), 0, s), hip.ErrLaunchFailure)
		})
	}
}
