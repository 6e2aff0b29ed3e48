package bench

import (
	"context"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"miotool/internal/handle"
	"miotool/internal/hip"
	_ "miotool/internal/hip/amd"
	_ "miotool/internal/hip/cuda"
	_ "miotool/internal/hip/sim"
	"miotool/internal/rules"
	"miotool/internal/streams"
)

// device opens the benchmark's device once per benchmark.
func device(b *testing.B) hip.Device {
	b.Helper()
	name := os.Getenv("MIOTOOL_BENCH_BACKEND")
	if name == "" {
		name = "sim"
	}
	d, _, err := hip.Select(name, hip.OpenOptions{HWQueues: 64})
	if err != nil {
		b.Skipf("backend %s: %v", name, err)
	}
	b.Cleanup(func() { _ = d.Close() })
	return d
}

type kernels struct {
	spin, tiny hip.Function
	out        hip.DevPtr
}

func load(b *testing.B, d hip.Device) kernels {
	b.Helper()
	m, err := d.ModuleLoad(rules.Kernels())
	must(b, err)
	var k kernels
	k.spin, err = d.ModuleGetFunction(m, rules.SpinKernel)
	must(b, err)
	k.tiny, err = d.ModuleGetFunction(m, rules.TinyKernel)
	must(b, err)
	k.out, err = d.Malloc(256)
	must(b, err)
	b.Cleanup(func() { _ = d.Free(k.out); _ = d.ModuleUnload(m) })
	return k
}

func must(b *testing.B, err error) {
	b.Helper()
	if err != nil {
		b.Fatal(err)
	}
}

func (k kernels) spinOn(b *testing.B, d hip.Device, s hip.Stream, dur time.Duration) {
	must(b, d.LaunchKernel(k.spin, hip.D1(1), hip.D1(1), 0, s, uint64(dur.Nanoseconds())))
}

// pin is a scratch stand-in that frees nothing.
type pin struct{}

func (pin) Bytes() int     { return 256 }
func (pin) Release() error { return nil }

// BenchmarkAbandon is the cost of Abandon on the calling thread: under the
// worker policy, marking the slot draining and queuing the host callback;
// under lazy, the bookkeeping alone.
func BenchmarkAbandon(b *testing.B) {
	for _, p := range []streams.Policy{streams.Worker, streams.Lazy} {
		b.Run(string(p), func(b *testing.B) {
			d := device(b)
			k := load(b, d)
			tr, err := streams.New(d, streams.Options{Policy: p, MaxDraining: 64})
			must(b, err)
			defer tr.Close()
			var spent time.Duration
			n := 0
			for b.Loop() {
				s, err := tr.Acquire(context.Background())
				must(b, err)
				tr.Pin(s, pin{})
				k.spinOn(b, d, s.Stream(), 20*time.Microsecond)
				ev, err := d.EventCreate(hip.EventDisableTiming)
				must(b, err)
				must(b, d.EventRecord(ev, s.Stream()))
				t0 := time.Now()
				tr.Abandon(s, ev)
				spent += time.Since(t0)
				n++
			}
			b.ReportMetric(float64(spent.Nanoseconds())/float64(n), "ns/abandon")
		})
	}
}

// BenchmarkCallbackToScratchFreed is, per abandoned evaluation under the
// worker policy, the time from the stream reaching the host callback (a
// host function queued just before the tracker's stamps it) to the
// allocator's free starting and to the scratch being freed.
func BenchmarkCallbackToScratchFreed(b *testing.B) {
	d := device(b)
	k := load(b, d)
	var freeStart atomic.Int64
	alloc := &handle.Allocator{
		Alloc: d.Malloc,
		Free: func(p hip.DevPtr) error {
			freeStart.Store(time.Now().UnixNano())
			return d.Free(p)
		},
	}
	h, err := handle.New(d, handle.Options{Policy: streams.Worker, MaxDraining: 2, Allocator: alloc})
	must(b, err)
	defer h.Close()
	tr := h.Tracker()
	var toStart, toFreed time.Duration
	n := 0
	for b.Loop() {
		scratch, err := h.ScratchBuffer(1 << 20)
		must(b, err)
		slot, err := tr.Acquire(context.Background())
		must(b, err)
		tr.Pin(slot, scratch)
		k.spinOn(b, d, slot.Stream(), 200*time.Microsecond)
		var reached atomic.Int64
		must(b, d.LaunchHostFunc(slot.Stream(), func() { reached.Store(time.Now().UnixNano()) }))
		tr.Abandon(slot, 0)
		must(b, h.DropScratchCache())
		select {
		case <-scratch.Freed():
		case <-time.After(30 * time.Second):
			b.Fatal("scratch not freed within 30 s")
		}
		freed := time.Now().UnixNano()
		toStart += time.Duration(freeStart.Load() - reached.Load())
		toFreed += time.Duration(freed - reached.Load())
		n++
	}
	b.ReportMetric(float64(toStart.Nanoseconds())/float64(n), "ns/callback-to-free-start")
	b.ReportMetric(float64(toFreed.Nanoseconds())/float64(n), "ns/callback-to-freed")
}

// BenchmarkRun is the launch path: a raw LaunchKernel with no handle, then
// Handle.Run under each policy, with nothing abandoned and with one
// abandoned evaluation still running and pinning scratch. Every variant
// synchronizes its stream every 1024 launches.
func BenchmarkRun(b *testing.B) {
	type variant struct {
		name   string
		policy streams.Policy // empty: raw LaunchKernel
		pinned bool
	}
	vs := []variant{{name: "raw-launch"}}
	for _, p := range []streams.Policy{streams.Worker, streams.Guarded, streams.Lazy} {
		vs = append(vs, variant{string(p), p, false}, variant{string(p) + "-pinned", p, true})
	}
	for _, v := range vs {
		b.Run(v.name, func(b *testing.B) {
			d := device(b)
			k := load(b, d)
			policy := v.policy
			if policy == "" {
				policy = streams.Worker
			}
			h, err := handle.New(d, handle.Options{Policy: policy, MaxDraining: 2})
			must(b, err)
			defer h.Close()
			if v.pinned {
				scratch, err := h.ScratchBuffer(1 << 20)
				must(b, err)
				slot, err := h.Tracker().Acquire(context.Background())
				must(b, err)
				h.Tracker().Pin(slot, scratch)
				// Long enough to outlast the benchmark's launches.
				k.spinOn(b, d, slot.Stream(), 300*time.Millisecond)
				ev, err := d.EventCreate(hip.EventDisableTiming)
				must(b, err)
				must(b, d.EventRecord(ev, slot.Stream()))
				h.Tracker().Abandon(slot, ev)
				must(b, h.DropScratchCache())
			}
			st := h.Stream()
			one := hip.D1(1)
			i := 0
			for b.Loop() {
				if v.policy == "" {
					err = d.LaunchKernel(k.tiny, one, one, 0, st, k.out, uint32(i))
				} else {
					err = h.Run(k.tiny, one, one, 0, k.out, uint32(i))
				}
				must(b, err)
				if i++; i%1024 == 0 {
					must(b, d.StreamSynchronize(st))
				}
			}
			must(b, d.StreamSynchronize(st))
		})
	}
}
