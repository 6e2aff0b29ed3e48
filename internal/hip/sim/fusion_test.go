package sim_test

import (
	"encoding/binary"
	"slices"
	"sync"
	"testing"

	"miotool/internal/hip"
	"miotool/internal/hip/sim"
)

// stepLog is device memory that "step" kernels append to in order: word 0
// counts the entries, word 1+i holds entry i.
const stepLogWords = 64

func stepTwin(mem hip.Memory, _, _ hip.Dim3, args []hip.KernelArg) error {
	b, err := mem.Bytes(args[0].(hip.DevPtr), 4*stepLogWords)
	if err != nil {
		return err
	}
	appendStep(b, uint32(args[1].(int32)))
	return nil
}

func appendStep(b []byte, v uint32) {
	n := binary.LittleEndian.Uint32(b)
	binary.LittleEndian.PutUint32(b[4+4*n:], v)
	binary.LittleEndian.PutUint32(b, n+1)
}

// stepFusion runs a prefix of the "step" launches of its own source as one
// (at most take of them; 0 declines), and records what it was offered and
// what it took.
type stepFusion struct {
	hip.Fusion
	take  int
	panic bool

	mu      sync.Mutex
	offered [][]string // kernel names of each offer
	took    []int
}

func newStepFusion(take int) *stepFusion {
	f := &stepFusion{take: take}
	f.Run = func(mem hip.Memory, ls []hip.FusedLaunch) int {
		names := make([]string, len(ls))
		for i, l := range ls {
			names[i] = l.Kernel
		}
		n := 0
		for n < len(ls) && n < f.take && ls[n].Fusion == &f.Fusion && ls[n].Kernel == "step" {
			n++
		}
		if n < 2 {
			n = 0
		}
		f.mu.Lock()
		f.offered = append(f.offered, names)
		f.took = append(f.took, n)
		f.mu.Unlock()
		if f.panic {
			panic("a broken fusion")
		}
		for _, l := range ls[:n] {
			b, err := mem.Bytes(l.Args[0].(hip.DevPtr), 4*stepLogWords)
			if err != nil {
				panic(err) // checked before it starts, in a real Fusion
			}
			appendStep(b, uint32(l.Args[1].(int32)))
		}
		return n
	}
	return f
}

// stepKernels loads a source with "step" (carrying f, unless nil) and one
// without a Fusion whose "other" kernel also appends (its entries + 100).
func stepKernels(t *testing.T, d *sim.Device, f *stepFusion) (step, other hip.Function) {
	t.Helper()
	src := &hip.KernelSource{Name: "steps", Kernels: []string{"step"}, Twins: map[string]hip.GoKernel{"step": stepTwin}}
	if f != nil {
		src.Fusion = &f.Fusion
	}
	m := must1[hip.Module](t)(d.ModuleLoad(src))
	step = must1[hip.Function](t)(d.ModuleGetFunction(m, "step"))
	plain := &hip.KernelSource{Name: "plain", Kernels: []string{"other"}, Twins: map[string]hip.GoKernel{
		"other": func(mem hip.Memory, g, b hip.Dim3, args []hip.KernelArg) error {
			return stepTwin(mem, g, b, []hip.KernelArg{args[0], args[1].(int32) + 100})
		}}}
	pm := must1[hip.Module](t)(d.ModuleLoad(plain))
	other = must1[hip.Function](t)(d.ModuleGetFunction(pm, "other"))
	return step, other
}

func readSteps(t *testing.T, d *sim.Device, log hip.DevPtr) []uint32 {
	t.Helper()
	b := make([]byte, 4*stepLogWords)
	must(t, d.MemcpyDtoH(b, log))
	n := binary.LittleEndian.Uint32(b)
	out := make([]uint32, n)
	for i := range out {
		out[i] = binary.LittleEndian.Uint32(b[4+4*i:])
	}
	return out
}

// Launches queued back to back behind a held stream are offered to their
// source's Fusion as one run, which stops at anything but a kernel (here
// an event record); what the Fusion does not take runs on its own, in
// order; every entry lands where running them one by one puts it.
func TestFusionRunsQueuedLaunchesAsOne(t *testing.T) {
	for _, tt := range []struct {
		name    string
		take    int
		off     bool
		offered [][]string
		took    []int
		fused   int64
	}{
		{"takes every step", 64, false,
			[][]string{{"step", "step", "step", "other", "step"}, {"step", "step"}}, []int{3, 2}, 5},
		{"takes two at a time", 2, false,
			[][]string{{"step", "step", "step", "other", "step"}, {"step", "other", "step"}, {"step", "step"}}, []int{2, 0, 2}, 4},
		{"declines", 0, false,
			[][]string{{"step", "step", "step", "other", "step"}, {"step", "step", "other", "step"}, {"step", "other", "step"}, {"step", "step"}}, []int{0, 0, 0, 0}, 0},
		{"switched off", 64, true, nil, nil, 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			d := newDevice(t, hip.DialectCUDA, 4)
			d.FuseLaunches(!tt.off)
			k := loadKernels(t, d, 1)
			f := newStepFusion(tt.take)
			step, other := stepKernels(t, d, f)
			log := must1[hip.DevPtr](t)(d.Malloc(4 * stepLogWords))
			must(t, d.MemcpyHtoD(log, make([]byte, 4*stepLogWords)))
			s := must1[hip.Stream](t)(d.StreamCreate(hip.StreamNonBlocking))
			ev := must1[hip.Event](t)(d.EventCreate(hip.EventDisableTiming))
			one := hip.D1(1)
			must(t, d.LaunchKernel(k.hold, one, one, 0, s, int32(0)))
			recv(t, "the hold kernel to start", k.started)
			for i, fn := range []hip.Function{step, step, step, other, step, 0, step, step} {
				if fn == 0 {
					must(t, d.EventRecord(ev, s))
					continue
				}
				must(t, d.LaunchKernel(fn, one, one, 0, s, log, int32(i)))
			}
			k.gates[0].open()
			within(t, "the stream to drain", func() { must(t, d.StreamSynchronize(s)) })
			if got, want := readSteps(t, d, log), []uint32{0, 1, 2, 103, 4, 6, 7}; !slices.Equal(got, want) {
				t.Errorf("entries %v, want %v", got, want)
			}
			f.mu.Lock()
			defer f.mu.Unlock()
			if !slices.EqualFunc(f.offered, tt.offered, slices.Equal[[]string]) || !slices.Equal(f.took, tt.took) {
				t.Errorf("offered %v, took %v; want %v, %v", f.offered, f.took, tt.offered, tt.took)
			}
			if got := d.FusedLaunches(); got != tt.fused {
				t.Errorf("%d launches ran fused, want %d", got, tt.fused)
			}
		})
	}
}

// Streams that share a hardware queue take turns in submission order: a
// stream's launches are not offered together when another stream's work
// was queued between them.
func TestFusionKeepsTheHardwareQueuesOrder(t *testing.T) {
	d := newDevice(t, hip.DialectCUDA, 1)
	k := loadKernels(t, d, 1)
	f := newStepFusion(64)
	step, _ := stepKernels(t, d, f)
	log := must1[hip.DevPtr](t)(d.Malloc(4 * stepLogWords))
	must(t, d.MemcpyHtoD(log, make([]byte, 4*stepLogWords)))
	s1 := must1[hip.Stream](t)(d.StreamCreate(hip.StreamNonBlocking))
	s2 := must1[hip.Stream](t)(d.StreamCreate(hip.StreamNonBlocking))
	one := hip.D1(1)
	must(t, d.LaunchKernel(k.hold, one, one, 0, s1, int32(0)))
	recv(t, "the hold kernel to start", k.started)
	for i, s := range []hip.Stream{s1, s2, s1, s2, s2, s1} {
		must(t, d.LaunchKernel(step, one, one, 0, s, log, int32(i)))
	}
	k.gates[0].open()
	within(t, "the streams to drain", func() { must(t, d.DeviceSynchronize()) })
	if got, want := readSteps(t, d, log), []uint32{0, 1, 2, 3, 4, 5}; !slices.Equal(got, want) {
		t.Errorf("entries %v, want the submission order %v", got, want)
	}
	// Only s2's launches 3 and 4 are back to back on the queue.
	if got := d.FusedLaunches(); got != 2 {
		t.Errorf("%d launches ran fused, want 2 (s2's two in a row)", got)
	}
}

// A Fusion that panics is a launch failure: the device is faulted, and the
// launches it was offered do not run.
func TestAPanickingFusionFaultsTheDevice(t *testing.T) {
	d := newDevice(t, hip.DialectCUDA, 4)
	k := loadKernels(t, d, 1)
	f := newStepFusion(64)
	f.panic = true
	step, _ := stepKernels(t, d, f)
	log := must1[hip.DevPtr](t)(d.Malloc(4 * stepLogWords))
	s := must1[hip.Stream](t)(d.StreamCreate(hip.StreamNonBlocking))
	one := hip.D1(1)
	must(t, d.LaunchKernel(k.hold, one, one, 0, s, int32(0)))
	recv(t, "the hold kernel to start", k.started)
	for i := range 3 {
		must(t, d.LaunchKernel(step, one, one, 0, s, log, int32(i)))
	}
	k.gates[0].open()
	var err error
	within(t, "the stream to drain", func() { err = d.StreamSynchronize(s) })
	wantCode(t, "StreamSynchronize after a panicking fusion", err, hip.ErrLaunchFailure)
}
