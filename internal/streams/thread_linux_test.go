package streams

import (
	"runtime"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"miotool/internal/hip"
	"miotool/internal/streams/streamtest"
)

// The reclaim thread stays on the OS thread whose capture mode it set to
// relaxed: a deallocator running on it, parked and woken again and again
// while another goroutine keeps its old thread busy, always wakes on the
// same OS thread. An unlocked goroutine would wake on whichever thread
// took it, one whose capture mode is not relaxed.
func TestTheReclaimThreadStaysOnItsOSThread(t *testing.T) {
	if runtime.GOMAXPROCS(0) < 2 {
		defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(2))
	}
	for _, policy := range []Policy{Worker, Poller} {
		t.Run(string(policy), func(t *testing.T) {
			f := newFixture(t, Options{Policy: policy, MaxDraining: 1})
			type moved struct{ from, to, round int }
			result := make(chan *moved, 1)
			buf := bufferFunc(64, func(hip.DevPtr) error {
				first := syscall.Gettid()
				for round := range 50 {
					var stop atomic.Bool
					// The spinner takes this goroutine's processor when it
					// parks, so that an unlocked goroutine wakes elsewhere.
					go func() {
						for !stop.Load() {
						}
					}()
					time.Sleep(50 * time.Microsecond) // parks the goroutine; not a wait for anything
					stop.Store(true)
					if now := syscall.Gettid(); now != first {
						result <- &moved{first, now, round}
						return nil
					}
				}
				result <- nil
				return nil
			})
			a := f.abandonGated(t, f.acquire(t), buf, true)
			a.gate.Open()
			if m := streamtest.Recv(t, "the deallocator on the reclaim thread", result); m != nil {
				t.Fatalf("the %s thread moved from OS thread %d to %d after %d parks: it is not locked to the thread whose capture mode it set", policy, m.from, m.to, m.round+1)
			}
		})
	}
}
