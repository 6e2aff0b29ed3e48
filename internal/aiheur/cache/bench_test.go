package cache

import (
	"fmt"
	"sync"
	"testing"
	"time"
)

var benchKeys = []SetKey{{Arch: "gfx942"}, {Arch: "gfx942", Solver: "ConvHipIgemmGroupFwdXdlops"},
	{Arch: "gfx942", Solver: "ConvHipIgemmGroupWrwXdlops"}, {Arch: "gfx942", Solver: "ConvHipIgemmGroupXdlops"}}

// benchHits fills a cache of policy p with benchKeys, then splits b.N
// hits (Get, or Hold and Done) over g goroutines started together; ns/op
// is wall time per hit across all of them.
func benchHits(b *testing.B, p Policy, g int, hold bool) {
	c, err := New[SetKey, *fakeModel](p, Options{})
	if err != nil {
		b.Fatal(err)
	}
	for i, k := range benchKeys {
		m := &fakeModel{id: i}
		if _, err := c.Get(k, func() (*fakeModel, error) { return m, nil }); err != nil {
			b.Fatal(err)
		}
	}
	start := make(chan struct{})
	var wg sync.WaitGroup
	per := b.N / g
	for w := 0; w < g; w++ {
		n := per
		if w == 0 {
			n += b.N % g
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			for i := 0; i < n; i++ {
				key := benchKeys[(w+i)&3]
				if !hold {
					if _, err := c.Get(key, missing); err != nil {
						panic(err)
					}
					continue
				}
				h, err := c.Hold(key, missing)
				if err != nil {
					panic(err)
				}
				h.Done()
			}
		}()
	}
	b.ResetTimer()
	cpu := processCPU()
	close(start)
	wg.Wait()
	reportCPU(b, cpu)
}

// reportCPU adds cpu-ns/op, the process's CPU time per op since cpu: on a
// shared machine it is the cost of a hit, where ns/op also counts the time
// other processes held the cores.
func reportCPU(b *testing.B, cpu time.Duration) {
	if end := processCPU(); end > 0 {
		b.ReportMetric(float64(end-cpu)/float64(b.N), "cpu-ns/op")
	}
}

func missing() (*fakeModel, error) { panic("benchmark key missing") }

// BenchmarkCacheHit measures a hit (the steady state after warm-up) with
// g goroutines asking at once. The unlocked policy is no floor: its
// detector reads the goroutine id (about 2 µs) on every Get.
func BenchmarkCacheHit(b *testing.B) {
	for _, p := range Policies {
		for _, g := range []int{1, 2, 8, 64} {
			b.Run(fmt.Sprintf("%s/goroutines=%d", p, g), func(b *testing.B) {
				benchHits(b, p, g, false)
			})
		}
	}
}

// BenchmarkCacheHold is a hit through Hold and Done, as a caller that
// reports its use of the model (for use-after-free detection) makes it.
func BenchmarkCacheHold(b *testing.B) {
	for _, p := range []Policy{Locked, LockFree} {
		for _, g := range []int{1, 64} {
			b.Run(fmt.Sprintf("%s/goroutines=%d", p, g), func(b *testing.B) {
				benchHits(b, p, g, true)
			})
		}
	}
}
