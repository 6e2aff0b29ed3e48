package bench

import (
	"runtime"
	"sync"
	"testing"
)

// copyBuffer is each goroutine's buffer in BenchmarkCopyBandwidth: the
// size of one of a simulated stress run's images (2048 x 2048 floats), so
// that the copy sees the caches and memory the run's threads see.
const copyBuffer = 16 << 20

// BenchmarkCopyBandwidth is the host's memory copy bandwidth, the yardstick
// of what a simulated stress run costs (scripts/sim-stress.sh): one
// goroutine per CPU the process may use (GOMAXPROCS), all at once, each
// copying its own 16 MiB buffer into another. GB/s counts the bytes copied
// (each read once and written once) by all of them, 1 GB = 1e9 bytes;
// GB/s-per-core is that over GOMAXPROCS, the share of one core when every
// core streams, as the simulator's threads do.
func BenchmarkCopyBandwidth(b *testing.B) {
	n := runtime.GOMAXPROCS(0)
	src, dst := make([][]byte, n), make([][]byte, n)
	for i := range n {
		src[i], dst[i] = make([]byte, copyBuffer), make([]byte, copyBuffer)
		for j := range src[i] {
			src[i][j] = byte(j)
		}
		copy(dst[i], src[i]) // touch every page before the clock starts
	}
	start := make([]chan struct{}, n)
	done := make(chan struct{}, n)
	var wg sync.WaitGroup
	for i := range n {
		start[i] = make(chan struct{})
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range start[i] {
				copy(dst[i], src[i])
				done <- struct{}{}
			}
		}()
	}
	defer wg.Wait()
	defer func() {
		for _, c := range start {
			close(c)
		}
	}()
	for b.Loop() {
		for _, c := range start {
			c <- struct{}{}
		}
		for range n {
			<-done
		}
	}
	gbs := float64(n) * copyBuffer * float64(b.N) / b.Elapsed().Seconds() / 1e9
	b.ReportMetric(gbs, "GB/s")
	b.ReportMetric(gbs/float64(n), "GB/s-per-core")
}
