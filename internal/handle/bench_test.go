package handle_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"miotool/internal/handle"
	"miotool/internal/hip"
	"miotool/internal/streams"
	"miotool/internal/streams/streamtest"
)

// BenchmarkCallbackToScratchFreed measures, per abandoned evaluation, the
// time from its stream reaching the host callback to its scratch being
// freed by the worker (worker policy, the runtime's free, which waits for
// every stream). A host function queued just before the tracker's stamps
// the moment the stream reaches the callback; the allocator stamps the
// moment the worker starts the free.
func BenchmarkCallbackToScratchFreed(b *testing.B) {
	sd := streamtest.NewSim(b, hip.DialectHIP)
	k := streamtest.LoadKernels(b, sd)
	var freeStart atomic.Int64
	alloc := &handle.Allocator{
		Alloc: sd.Malloc,
		Free: func(p hip.DevPtr) error {
			freeStart.Store(time.Now().UnixNano())
			return sd.Free(p)
		},
	}
	h, err := handle.New(sd, handle.Options{Policy: streams.Worker, MaxDraining: 2, Allocator: alloc})
	streamtest.Must(b, "new handle", err)
	defer h.Close()
	tr := h.Tracker()
	ctx := context.Background()
	var toFreeStart, toFreed time.Duration
	rounds := 0
	for b.Loop() {
		scratch, err := h.ScratchBuffer(4096)
		if err != nil {
			b.Fatal(err)
		}
		slot, err := tr.Acquire(ctx)
		if err != nil {
			b.Fatal(err)
		}
		tr.Pin(slot, scratch)
		gate := k.Hold(b, slot.Stream())
		var reached atomic.Int64
		if err := sd.LaunchHostFunc(slot.Stream(), func() { reached.Store(time.Now().UnixNano()) }); err != nil {
			b.Fatal(err)
		}
		tr.Abandon(slot, 0)
		if err := h.DropScratchCache(); err != nil {
			b.Fatal(err)
		}
		gate.Open()
		<-scratch.Freed()
		freed := time.Now().UnixNano()
		toFreeStart += time.Duration(freeStart.Load() - reached.Load())
		toFreed += time.Duration(freed - reached.Load())
		rounds++
	}
	b.ReportMetric(float64(toFreeStart.Nanoseconds())/float64(rounds), "ns/callback-to-free-start")
	b.ReportMetric(float64(toFreed.Nanoseconds())/float64(rounds), "ns/callback-to-freed")
}

// BenchmarkRun measures the launch path: a raw LaunchKernel (no handle at
// all), then Handle.Run under each policy, with nothing abandoned and with
// one abandoned evaluation still running and pinning scratch. The stream is
// synchronized every 1024 launches in every variant alike.
func BenchmarkRun(b *testing.B) {
	type variant struct {
		name   string
		policy streams.Policy // empty: raw LaunchKernel
		pinned bool
	}
	variants := []variant{{name: "raw-launch"}}
	for _, p := range []streams.Policy{streams.Worker, streams.Guarded, streams.Lazy} {
		variants = append(variants, variant{string(p), p, false}, variant{string(p) + "-pinned", p, true})
	}
	for _, v := range variants {
		b.Run(v.name, func(b *testing.B) {
			sd := streamtest.NewSim(b, hip.DialectHIP)
			k := streamtest.LoadKernels(b, sd)
			policy := v.policy
			if policy == "" {
				policy = streams.Worker
			}
			h, err := handle.New(sd, handle.Options{Policy: policy, MaxDraining: 2})
			streamtest.Must(b, "new handle", err)
			defer h.Close()
			if v.pinned {
				s := &setup{sim: sd, dev: streamtest.Wrap(sd), h: h, k: k}
				a := s.abandonFindB(b, 4096)
				defer a.gate.Open()
			}
			f, st := k.TinyFunc(), h.Stream()
			one := hip.D1(1)
			i := 0
			for b.Loop() {
				if v.policy == "" {
					err = sd.LaunchKernel(f, one, one, 0, st)
				} else {
					err = h.Run(f, one, one, 0)
				}
				if err != nil {
					b.Fatal(err)
				}
				if i++; i%1024 == 0 {
					if err := sd.StreamSynchronize(st); err != nil {
						b.Fatal(err)
					}
				}
			}
			if err := sd.StreamSynchronize(st); err != nil {
				b.Fatal(err)
			}
		})
	}
}

// abandonFindB is abandonFind for a benchmark.
func (s *setup) abandonFindB(b *testing.B, bytes int) abandonedFind {
	tr := s.h.Tracker()
	scratch, err := s.h.ScratchBuffer(bytes)
	streamtest.Must(b, "scratch buffer", err)
	slot, err := tr.Acquire(context.Background())
	streamtest.Must(b, "acquire", err)
	tr.Pin(slot, scratch)
	a := abandonedFind{scratch: scratch, stream: slot.Stream()}
	a.gate = s.k.Hold(b, slot.Stream())
	tr.Abandon(slot, streamtest.DoneEvent(b, s.sim, slot.Stream()))
	streamtest.Must(b, "drop the scratch cache", s.h.DropScratchCache())
	return a
}
