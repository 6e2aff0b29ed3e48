package streams

import (
	"context"
	"testing"
	"time"

	"miotool/internal/hip"
	"miotool/internal/streams/streamtest"
)

// BenchmarkAbandon measures Abandon on the calling thread: under the worker
// policy that is marking the slot draining plus queuing the host callback
// (and, once, starting the worker); under lazy, the bookkeeping alone. The
// ns/abandon figure times only the Abandon call; ns/op also includes the
// Acquire, kernel launch and event record of each round.
func BenchmarkAbandon(b *testing.B) {
	for _, policy := range []Policy{Worker, Lazy} {
		b.Run(string(policy), func(b *testing.B) {
			sd := streamtest.NewSim(b, hip.DialectHIP)
			k := streamtest.LoadKernels(b, sd)
			tr, err := New(sd, Options{Policy: policy, MaxDraining: 64})
			streamtest.Must(b, "new tracker", err)
			defer tr.Close()
			ctx := context.Background()
			var spent time.Duration
			rounds := 0
			for b.Loop() {
				s, err := tr.Acquire(ctx)
				if err != nil {
					b.Fatal(err)
				}
				tr.Pin(s, bufferFunc(256, func(hip.DevPtr) error { return nil }))
				k.Tiny(b, s.Stream())
				ev, err := sd.EventCreate(hip.EventDisableTiming)
				if err == nil {
					err = sd.EventRecord(ev, s.Stream())
				}
				if err != nil {
					b.Fatal(err)
				}
				t0 := time.Now()
				tr.Abandon(s, ev)
				spent += time.Since(t0)
				rounds++
			}
			b.ReportMetric(float64(spent.Nanoseconds())/float64(rounds), "ns/abandon")
		})
	}
}
