package cuda

import (
	"context"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"miotool/internal/hip"
	"miotool/internal/streams"
)

// BenchmarkHandoffStandIn is the stream tracker's hand-off from a host
// callback to its worker on a real foreign thread, without a GPU: the
// stand-in driver runs every host function on a thread of its own (a C
// thread the Go runtime did not create), as the driver's callback thread
// does. It reports, in µs, the medians and p90 from the callback's first
// line to the worker awake and to the deallocator starting (goal: ≤ 10 µs
// median), for the worker with its spin and with the futex wake alone.
func BenchmarkHandoffStandIn(b *testing.B) {
	for _, v := range []struct {
		name string
		spin time.Duration
	}{{"worker", 0}, {"worker-futex", -1}} {
		b.Run(v.name, func(b *testing.B) { benchHandoff(b, v.spin) })
	}
}

func benchHandoff(b *testing.B, spin time.Duration) {
	d := openMock(b, nil)
	epoch := time.Now()
	now := func() int64 { return int64(time.Since(epoch)) }
	var entered, awake atomic.Int64
	tr, err := streams.New(d, streams.Options{Policy: streams.Worker, MaxDraining: 4, Spin: spin, Trace: &streams.Trace{
		CallbackEntered: func() { entered.Store(now()) },
		Awake:           func() { awake.Store(now()) },
	}})
	must(b, err)
	b.Cleanup(func() { _ = tr.Close() })
	var toAwake, toFree []float64
	for b.Loop() {
		slot, err := tr.Acquire(context.Background())
		must(b, err)
		p := &stampPin{now: now, freed: make(chan struct{})}
		tr.Pin(slot, p)
		ev, err := d.EventCreate(hip.EventDisableTiming)
		must(b, err)
		must(b, d.EventRecord(ev, slot.Stream()))
		tr.Abandon(slot, ev)
		select {
		case <-p.freed:
		case <-time.After(30 * time.Second):
			b.Fatal("the pin was not freed within 30 s")
		}
		toAwake = append(toAwake, float64(awake.Load()-entered.Load())/1e3)
		toFree = append(toFree, float64(p.at-entered.Load())/1e3)
	}
	b.ReportMetric(quantile(toAwake, 0.5), "us-callback-to-awake-p50")
	b.ReportMetric(quantile(toAwake, 0.9), "us-callback-to-awake-p90")
	b.ReportMetric(quantile(toFree, 0.5), "us-callback-to-free-start-p50")
	b.ReportMetric(quantile(toFree, 0.9), "us-callback-to-free-start-p90")
}

// stampPin notes when its release starts.
type stampPin struct {
	now   func() int64
	at    int64
	freed chan struct{}
}

func (p *stampPin) Bytes() int { return 64 }
func (p *stampPin) Release() error {
	p.at = p.now()
	close(p.freed)
	return nil
}

func quantile(xs []float64, q float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[min(len(s)-1, int(q*float64(len(s))))]
}
