package cache

import (
	"fmt"
	"sync"
	"testing"
)

// BenchmarkCacheHit measures a hit (the steady state after warm-up) with
// g goroutines asking at once; ns/op is wall time per Get across all of
// them. The unlocked policy is a floor: with no writers its reads are safe.
func BenchmarkCacheHit(b *testing.B) {
	for _, p := range Policies {
		for _, g := range []int{1, 2, 8, 64} {
			b.Run(fmt.Sprintf("%s/goroutines=%d", p, g), func(b *testing.B) {
				c, err := New[SetKey, *fakeModel](p, Options{})
				if err != nil {
					b.Fatal(err)
				}
				keys := []SetKey{{Arch: "gfx942"}, {Arch: "gfx942", Solver: "ConvHipIgemmGroupFwdXdlops"},
					{Arch: "gfx942", Solver: "ConvHipIgemmGroupWrwXdlops"}, {Arch: "gfx942", Solver: "ConvHipIgemmGroupXdlops"}}
				for i, k := range keys {
					m := &fakeModel{id: i}
					if _, err := c.Get(k, func() (*fakeModel, error) { return m, nil }); err != nil {
						b.Fatal(err)
					}
				}
				missing := func() (*fakeModel, error) { panic("benchmark key missing") }
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
							if _, err := c.Get(keys[(w+i)&3], missing); err != nil {
								panic(err)
							}
						}
					}()
				}
				b.ResetTimer()
				close(start)
				wg.Wait()
			})
		}
	}
}
