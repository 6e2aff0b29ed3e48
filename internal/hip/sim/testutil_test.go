package sim_test

import (
	"encoding/binary"
	"errors"
	"math"
	"runtime"
	"sync"
	"testing"
	"time"

	"miotool/internal/hip"
	"miotool/internal/hip/sim"
)

// waitLimit bounds every wait in these tests, so that a broken simulator
// fails a test instead of hanging it.
const waitLimit = 20 * time.Second

func newDevice(t testing.TB, dialect hip.Dialect, queues int) *sim.Device {
	t.Helper()
	d, err := sim.New(hip.OpenOptions{Dialect: dialect, HWQueues: queues})
	if err != nil {
		t.Fatalf("sim.New: %v", err)
	}
	t.Cleanup(func() { _ = d.Close() })
	return d
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func must1[T any](t testing.TB) func(T, error) T {
	return func(v T, err error) T {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
}

// wantCode fails unless err carries code (Success for nil).
func wantCode(t testing.TB, what string, err error, code hip.Code) {
	t.Helper()
	if got := hip.CodeOf(err); got != code {
		t.Fatalf("%s: got %d (%v), want %d", what, int(got), err, int(code))
	}
}

// within runs fn and fails the test if it has not returned in waitLimit.
func within(t testing.TB, what string, fn func()) {
	t.Helper()
	done := make(chan struct{})
	go func() { defer close(done); fn() }()
	select {
	case <-done:
	case <-time.After(waitLimit):
		t.Fatalf("%s did not finish within %v", what, waitLimit)
	}
}

// recv waits for one value from ch, with the usual limit.
func recv[T any](t testing.TB, what string, ch <-chan T) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(waitLimit):
		t.Fatalf("%s: nothing arrived within %v", what, waitLimit)
	}
	var zero T
	return zero
}

// osThread is a goroutine locked to one OS thread that runs what it is
// given, so a test can act "on the capturing thread" or "on another".
type osThread struct {
	work   chan func()
	exited chan struct{}
}

func startThread(t testing.TB) *osThread {
	th := &osThread{work: make(chan func()), exited: make(chan struct{})}
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		defer close(th.exited)
		for f := range th.work {
			f()
		}
	}()
	t.Cleanup(func() {
		close(th.work)
		select {
		case <-th.exited:
		case <-time.After(waitLimit):
			t.Errorf("a test thread did not exit within %v", waitLimit)
		}
	})
	return th
}

// do runs fn on the thread and waits for it.
func (th *osThread) do(t testing.TB, what string, fn func()) {
	t.Helper()
	done := make(chan struct{})
	select {
	case th.work <- func() { defer close(done); fn() }:
	case <-time.After(waitLimit):
		t.Fatalf("%s: the thread stayed busy for %v", what, waitLimit)
	}
	select {
	case <-done:
	case <-time.After(waitLimit):
		t.Fatalf("%s did not finish within %v", what, waitLimit)
	}
}

// gate is a channel closed once, from any path.
type gate struct {
	ch   chan struct{}
	once sync.Once
}

func newGate(t testing.TB) *gate {
	g := &gate{ch: make(chan struct{})}
	t.Cleanup(g.open)
	return g
}

func (g *gate) open() { g.once.Do(func() { close(g.ch) }) }

// gatedKernels is a kernel source whose "hold" kernel (argument: an int32
// gate index) reports that it started and then waits for its gate, and
// whose "tiny" kernel does nothing. "vecadd" (a, b, c DevPtr, n int32)
// computes c = a + b; "poke" (p DevPtr, n int32) writes n bytes at p.
type gatedKernels struct {
	gates   []*gate
	started chan int32
	ended   chan int32
}

func newGatedKernels(t testing.TB, n int) *gatedKernels {
	k := &gatedKernels{started: make(chan int32, 64), ended: make(chan int32, 64)}
	for range n {
		k.gates = append(k.gates, newGate(t))
	}
	return k
}

func (k *gatedKernels) source() *hip.KernelSource {
	return &hip.KernelSource{
		Name:    "test",
		Kernels: []string{"hold", "tiny", "vecadd", "poke"},
		Twins: map[string]hip.GoKernel{
			"hold": func(_ hip.Memory, _, _ hip.Dim3, args []hip.KernelArg) error {
				i := args[0].(int32)
				k.started <- i
				select {
				case <-k.gates[i].ch:
				case <-time.After(waitLimit):
					return errors.New("hold kernel: gate never opened")
				}
				k.ended <- i
				return nil
			},
			"tiny":   func(hip.Memory, hip.Dim3, hip.Dim3, []hip.KernelArg) error { return nil },
			"vecadd": vecAddTwin,
			"poke": func(mem hip.Memory, _, _ hip.Dim3, args []hip.KernelArg) error {
				b, err := mem.Bytes(args[0].(hip.DevPtr), int(args[1].(int32)))
				if err != nil {
					return err
				}
				for i := range b {
					b[i] = 0xAB
				}
				return nil
			},
		},
	}
}

func vecAddTwin(mem hip.Memory, _, _ hip.Dim3, args []hip.KernelArg) error {
	n := int(args[3].(int32))
	a, err := mem.Float32s(args[0].(hip.DevPtr), n)
	if err != nil {
		return err
	}
	b, err := mem.Float32s(args[1].(hip.DevPtr), n)
	if err != nil {
		return err
	}
	c, err := mem.Float32s(args[2].(hip.DevPtr), n)
	if err != nil {
		return err
	}
	for i := range c {
		c[i] = a[i] + b[i]
	}
	return nil
}

// kernelSet loads the gated kernels into d and returns their functions.
type kernelSet struct {
	*gatedKernels
	hold, tiny, vecadd, poke hip.Function
}

func loadKernels(t testing.TB, d hip.Device, gates int) *kernelSet {
	t.Helper()
	k := &kernelSet{gatedKernels: newGatedKernels(t, gates)}
	m := must1[hip.Module](t)(d.ModuleLoad(k.source()))
	get := func(name string) hip.Function { return must1[hip.Function](t)(d.ModuleGetFunction(m, name)) }
	k.hold, k.tiny, k.vecadd, k.poke = get("hold"), get("tiny"), get("vecadd"), get("poke")
	return k
}

func float32Bytes(v []float32) []byte {
	b := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(x))
	}
	return b
}

func bytesFloat32(b []byte) []float32 {
	v := make([]float32, len(b)/4)
	for i := range v {
		v[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return v
}
