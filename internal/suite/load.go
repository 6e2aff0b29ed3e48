package suite

import (
	"runtime"
	"sync"
	"sync/atomic"
)

var loadSink atomic.Uint64

// StartCPULoad starts n workers that keep a CPU core busy each, the way
// the fix's tests ran "with all CPU cores saturated", and returns the
// function that stops them and says how many rounds of work they did.
// Each worker holds its own OS thread, and GOMAXPROCS is raised while they
// run so that they do not starve the runner itself.
func StartCPULoad(n int) (stop func() uint64) {
	if n <= 0 {
		return func() uint64 { return 0 }
	}
	prev := runtime.GOMAXPROCS(0)
	if prev < n+1 {
		runtime.GOMAXPROCS(n + 1)
	}
	var quit atomic.Bool
	var rounds atomic.Uint64
	var wg sync.WaitGroup
	started := make(chan struct{}, n)
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			started <- struct{}{}
			x := uint64(1)
			var local uint64
			for !quit.Load() {
				// A few hundred multiply-adds between looks at the flag.
				for range 256 {
					x = x*6364136223846793005 + 1442695040888963407
				}
				local++
			}
			rounds.Add(local)
			loadSink.Store(x) // a used result keeps the arithmetic from being optimised away
		}()
	}
	for range n {
		<-started
	}
	var once sync.Once
	return func() uint64 {
		once.Do(func() {
			quit.Store(true)
			wg.Wait()
			if prev < n+1 {
				runtime.GOMAXPROCS(prev)
			}
		})
		return rounds.Load()
	}
}
